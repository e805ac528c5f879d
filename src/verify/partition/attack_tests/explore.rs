//! The random search for differences between a run judged whole and in parts.

use super::*;
use std::sync::Mutex;
/// Random runs compared whole and in parts (by `Plan::with_parts` and by `Plan::new`
/// from a small budget): records of one size and of many, up to 4 MiB across several
/// edges, regions off the grid, devices shorter than the region (ending inside a part
/// or on an edge), lost, torn, flipped and misdirected records, failed reads, hung reads
/// (`FUZZ_HANG`), exact, loose and absent ack counts, with and without `--scan-region`;
/// and no read crossing the 2 MiB grid. 64 seeds in every test run; more with
/// `FUZZ_SEEDS=N` (and `FUZZ_FROM`), by hand.
#[test]
fn explore_parts_against_the_whole_run_at_random() {
    let t = match std::env::var("FUZZ_HANG") {
        Ok(_) => Duration::from_millis(250),
        Err(_) => Duration::from_secs(10),
    };
    let from: u64 = std::env::var("FUZZ_FROM").map_or(0, |v| v.parse().unwrap());
    let seeds: u64 = std::env::var("FUZZ_SEEDS").map_or(64, |v| v.parse().unwrap());
    let mut bad = vec![];
    for seed in from..from + seeds {
        let mut rng = crate::rng::Rng::new(seed);
        let id = RunId([(seed as u8) | 0x21; 16]);
        let (min, max) = [
            (512, 8192),
            (4096, 4096),
            (512, 4 * MIB),
            (MIB, 4 * MIB),
            (1536, 1536),
            (3 * MIB, 3 * MIB),
            (512, 512),
        ][rng.below(7) as usize];
        let offset = match rng.below(3) {
            0 => 0,
            1 => rng.below(12 * MIB / S) * S,
            _ => 2 * MIB * rng.range(0, 3) + [0, S, 3584, 4096][rng.below(4) as usize],
        };
        let bytes = (rng.range(2 * max.max(2 * MIB), 14 * MIB) / S * S).max(2 * max);
        let mut d = descriptor(id, offset, bytes, min, max);
        d.settings.placement = if rng.below(2) == 0 {
            "random".into()
        } else {
            "sequential".into()
        };
        let end = offset + bytes;
        let dev_bytes = match rng.below(5) {
            0 => end - rng.below(bytes / S) * S,
            1 => (end - bytes / 2) / (2 * MIB) * (2 * MIB),
            2 => end + rng.below(8) * MIB,
            _ => end + MIB,
        };
        let mem = Arc::new(MemDevice::new(dev_bytes.max(S) as usize));
        let n = [0usize, 1, 2, 5, 30, 200][rng.below(6) as usize];
        let mut acks = vec![];
        let mut seqs = [0u64; 2];
        let mut cursor = offset;
        for _ in 0..n {
            let stream = rng.below(2) as u16;
            seqs[stream as usize] += 1 + rng.below(2);
            let len = if min == max {
                min
            } else {
                rng.range(min / S, max / S) * S
            };
            let at = match rng.below(4) {
                0 => {
                    // Near an edge of the grid.
                    let edge = (offset / (2 * MIB) + rng.range(1, 6)) * 2 * MIB;
                    let back = rng.below(len / S + 8) * S;
                    edge.saturating_sub(back)
                }
                1 => {
                    let a = cursor;
                    cursor += len;
                    a
                }
                _ => offset + rng.below((bytes - len) / S + 1) * S,
            };
            let at = if min == max && rng.below(3) != 0 {
                offset + (at.saturating_sub(offset) / min) * min
            } else {
                at
            };
            let at = at.clamp(offset, end - len);
            let a = ack(stream, seqs[stream as usize], at, (len / S) as u32);
            acks.push(a);
            let fits = at + len <= dev_bytes;
            match rng.below(10) {
                0 => {}
                1 if fits => write(&mem, &d, &a, at, Some(1)),
                2 if fits => {
                    write(&mem, &d, &a, at, None);
                    mem.edit(|b| b[(at + len - 3) as usize] ^= 1);
                }
                3 => {
                    let to = offset + rng.below((bytes - len) / S + 1) * S;
                    if to + len <= dev_bytes {
                        write(&mem, &d, &a, to, None);
                    }
                }
                _ if fits => write(&mem, &d, &a, at, None),
                _ => {}
            }
        }
        let bad_sectors: Vec<u64> = (0..rng.below(3))
            .map(|_| offset + rng.below(bytes / S) * S)
            .collect();
        let reads = Arc::new(Mutex::new(vec![]));
        let log = reads.clone();
        let hangs = std::env::var("FUZZ_HANG").is_ok();
        let hang_at = (hangs && rng.below(2) == 0).then(|| match rng.below(3) {
            0 => (offset / (2 * MIB) + rng.range(1, 4)) * 2 * MIB,
            1 => acks
                .get(rng.below(acks.len().max(1) as u64) as usize)
                .map_or(offset, |a: &Ack| a.record.end() - S),
            _ => offset + rng.below(bytes / S) * S,
        });
        let dev: Arc<dyn Device> = Arc::new(ReadHook {
            inner: mem.clone(),
            before: move |len: usize, off: u64| {
                log.lock().unwrap().push((off, len as u64));
                if hang_at.is_some_and(|h| off <= h && h < off + len as u64) {
                    std::thread::sleep(Duration::from_millis(700));
                }
                match bad_sectors
                    .iter()
                    .any(|&b| off <= b && b < off + len as u64)
                {
                    true => Err(std::io::Error::other("bad sector")),
                    false => Ok(()),
                }
            },
        });
        let scan_region = rng.below(4) == 0;
        let (unhinted, loose) = (Unhinted(&acks), Loose(&acks));
        let passes: &dyn AckPasses = match rng.below(3) {
            0 => &unhinted,
            1 => &loose,
            _ => &acks,
        };
        let what = format!(
            "seed {seed}: region {offset}+{bytes} dev {dev_bytes} sizes {min}..{max} n {n} \
             scan_region {scan_region} hint {:?} placement {}",
            passes.ack_count_hint(),
            d.settings.placement
        );
        let whole = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            verify_streamed(dev.clone(), &d, passes, t, scan_region, &|_, _| {})
        })) {
            Ok(Ok(w)) => w,
            Ok(Err(e)) => {
                eprintln!("{what}: whole refused: {e}");
                continue;
            }
            Err(_) => {
                bad.push(format!("{what}: whole PANICKED"));
                continue;
            }
        };
        for r in reads.lock().unwrap().drain(..) {
            // (Narrowed reads of a failing chunk are within it.)
            if r.0 / (2 * MIB) != (r.0 + r.1 - 1) / (2 * MIB) {
                bad.push(format!("{what}: whole read {r:?} crosses the grid"));
            }
        }
        for (parts, align) in [(1u64, 512u64), (2, 512), (3, 4096), (5, 512), (8, 1536)] {
            for room in [1u64, 1 << 30] {
                let plan = Plan::with_parts(&d, parts, align, room);
                let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    in_parts(dev.clone(), &d, passes, scan_region, plan, t)
                }));
                match got {
                    Err(_) => bad.push(format!("{what}: parts {parts} room {room} PANICKED")),
                    Ok(got) => {
                        let (g, w) = (without_time(&got.report), without_time(&whole.report));
                        if g != w {
                            let (g, w) = (g.as_object().unwrap(), w.as_object().unwrap());
                            let diff: Vec<String> = w
                                .keys()
                                .filter(|k| g[*k] != w[*k])
                                .map(|k| format!("{k}: whole {} parts {}", w[k], g[k]))
                                .collect();
                            bad.push(format!(
                                "{what}: parts {parts} ({plan:?}) room {room}: {}",
                                diff.join("; ")
                            ));
                        }
                    }
                }
            }
        }
        for live in [4096u64, 3 * 4096 + 100] {
            let budget = budget_for(live);
            let run = scan::ScanRun::from(&d);
            let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::verify::engine::verify_streamed_run(
                    dev.clone(),
                    &d,
                    run,
                    passes,
                    t,
                    scan_region,
                    &|_, _| {},
                    &budget,
                )
            }));
            match got {
                Err(_) => bad.push(format!("{what}: budget {live} PANICKED")),
                Ok(Err(VerifyError::MemoryTooSmall { .. })) => {}
                Ok(Err(e)) => bad.push(format!("{what}: budget {live}: {e}")),
                Ok(Ok(got)) => {
                    let (g, w) = (without_time(&got.report), without_time(&whole.report));
                    if g != w {
                        bad.push(format!("{what}: budget {live} differs"));
                    }
                }
            }
        }
        for r in reads.lock().unwrap().iter() {
            if r.0 / (2 * MIB) != (r.0 + r.1 - 1) / (2 * MIB) {
                bad.push(format!("{what}: parts' read {r:?} crosses the grid"));
            }
        }
    }
    for b in &bad {
        eprintln!("{b}\n");
    }
    assert!(bad.is_empty(), "{} differences", bad.len());
}
