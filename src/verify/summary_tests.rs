//! Verify at scale with the region summarised per slot during the first pass
//! (`scan::summarise_early`, `scan::scan_summarised`) must judge as the slow reference
//! judge (`scale_tests::reference`) does, and give the report the streamed path without
//! the summary gives: a differential test on random runs of one record size, with
//! damage of every class, for both record format versions.

use super::engine::verify_streamed;
use super::scale_tests::reference;
use super::scan::SUMMARY_COUNTS;
use crate::device::Device;
use crate::device::mem::{MemDevice, ReadHook};
use crate::model::{Ack, RunDescriptor};
use crate::record::{RecordId, RunId, RunKey, SECTOR, fill_record};
use crate::rng::Rng;
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

const REGION: u64 = 64 << 10;

const HANG: Duration = Duration::from_millis(1500);

/// `inner` whose reads fail where they touch a `bad` range, and hang (for `HANG`)
/// where they reach past `hang_from`.
fn faulty(inner: Arc<MemDevice>, bad: Vec<(u64, u64)>, hang_from: u64) -> Arc<dyn Device> {
    Arc::new(ReadHook {
        inner,
        before: move |len, offset| {
            let end = offset + len as u64;
            if end > hang_from {
                std::thread::sleep(HANG);
            }
            if bad.iter().any(|&(s, e)| s < end && offset < e) {
                return Err(std::io::Error::other("injected media error"));
            }
            Ok(())
        },
    })
}

/// One case: the run's shape and the device's.
struct Case {
    seed: u64,
    version: u16,
    sectors: u32,
    base: u64,
    acks: usize,
    /// The device ends this many bytes before the region does.
    short_bytes: u64,
}

/// A run of `c.acks` acks of one record size on the grid from `c.base`, and a device
/// holding what a drive might after a cut: each record intact, lost, torn, with a
/// content or a stamp bit flipped, written to another slot (misdirected, found
/// elsewhere), replaced by another run's record (stale), by zeros, or by the same
/// record id with another write time (only its bytes can judge it); some unreadable
/// blocks.
fn damaged_run(c: &Case) -> (RunDescriptor, Vec<Ack>, Arc<dyn Device>) {
    let mut rng = Rng::new(c.seed);
    let run = RunId([c.seed as u8 | 1; 16]);
    let key = RunKey::for_version(run, c.version).unwrap();
    let other = RunId([0xee; 16]);
    let other_key = RunKey::new(other);
    let len = c.sectors as u64 * SECTOR as u64;
    let slots = REGION / len;
    let sequential = c.seed % 2 == 0;
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = run;
    d.format_version = c.version;
    d.settings.region_offset = c.base;
    d.settings.region_bytes = REGION;
    d.settings.record_bytes_min = len;
    d.settings.record_bytes_max = len;
    d.settings.streams = 3;
    d.settings.placement = if sequential { "sequential" } else { "random" }.into();
    let mem = MemDevice::new((c.base + REGION - c.short_bytes) as usize);
    let write = |buf: &[u8], at: u64| {
        // What lies past the device's end was never written.
        let room = mem.size_bytes().saturating_sub(at).min(buf.len() as u64);
        if room > 0 {
            mem.write_at(&buf[..room as usize], at).unwrap();
        }
    };
    let mut seqs = [0u64; 3];
    let mut acks = vec![];
    for i in 0..c.acks {
        let stream = rng.below(3) as u16;
        seqs[stream as usize] += 1 + rng.below(2);
        let slot = if sequential {
            i as u64 % slots
        } else {
            rng.below(slots)
        };
        let record = RecordId {
            stream,
            seq: seqs[stream as usize],
            offset: c.base + slot * len,
            sectors: c.sectors,
            write_time_ns: 1_000_000 + i as u64 * 1000,
        };
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 100 + rng.below(5000),
        });
        let mut buf = vec![0u8; len as usize];
        fill_record(&mut buf, &key, run, &record);
        let at = record.offset;
        match rng.below(14) {
            0 => {}                                                            // lost
            1 => write(&buf[..(c.sectors as usize).div_ceil(2) * SECTOR], at), // torn
            2 => {
                buf[len as usize - 7] ^= 0x10; // a content bit
                write(&buf, at);
            }
            3 => {
                buf[33] ^= 0x04; // a stamp bit
                write(&buf, at);
            }
            4 => {
                // Misdirected: landed in another slot; its home keeps what it held.
                write(&buf, c.base + rng.below(slots) * len);
            }
            5 => {
                let mut foreign = vec![0u8; len as usize];
                fill_record(&mut foreign, &other_key, other, &record);
                write(&foreign, at);
            }
            6 => write(&vec![0u8; len as usize], at), // blank
            7 => {
                let twin = RecordId {
                    write_time_ns: record.write_time_ns + 1,
                    ..record
                };
                fill_record(&mut buf, &key, run, &twin);
                write(&buf, at);
            }
            _ => write(&buf, at),
        }
    }
    // One or two unreadable ranges, block-sized or a few blocks.
    let bad = (0..rng.below(3))
        .map(|_| {
            let s = c.base + rng.below(REGION / 512) * 512;
            (s, s + 512 * (1 + rng.below(4)))
        })
        .collect();
    (d, acks, faulty(Arc::new(mem), bad, u64::MAX))
}

fn without_time(r: &super::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn the_summarised_scan_judges_as_the_reference_does() {
    let t = Duration::from_secs(10);
    let (judged0, reread0) = (
        SUMMARY_COUNTS[0].load(SeqCst),
        SUMMARY_COUNTS[1].load(SeqCst),
    );
    let (mut failing, mut classes) = (0, std::collections::BTreeSet::<&str>::new());
    let mut cases = 0;
    for seed in 0..48u64 {
        for version in [1u16, 2] {
            let c = Case {
                seed,
                version,
                sectors: [1, 8, 3][seed as usize % 3],
                base: [0, 512, 4096, 1536][(seed / 3) as usize % 4],
                acks: [1, 40, 150, 400][(seed / 2) as usize % 4],
                short_bytes: if seed % 7 == 3 { 1024 } else { 0 },
            };
            let (d, acks, dev) = damaged_run(&c);
            let scan_region = seed % 3 != 1;
            let want = reference::judge(dev.as_ref(), &d, &acks, scan_region);
            let summarised =
                verify_streamed(dev.clone(), &d, &acks, t, scan_region, &|_, _| {}).unwrap();
            // The same run with sizes allowed to vary: no summary, the early reads.
            let mut plain = d.clone();
            plain.settings.record_bytes_max += 512;
            let streamed = verify_streamed(dev, &plain, &acks, t, scan_region, &|_, _| {});
            let mut streamed = without_time(&streamed.unwrap().report);
            streamed["run"] = without_time(&summarised.report)["run"].clone();
            let what = format!("seed {seed}, version {version}, scan_region {scan_region}");
            assert_eq!(reference::observed(&summarised.report), want, "{what}");
            assert_eq!(streamed, without_time(&summarised.report), "{what}");
            failing += (want.verdict == crate::model::Verdict::Fail) as u32;
            classes.extend(want.counts.keys().copied());
            cases += 1;
        }
    }
    assert!(failing > cases / 3, "{failing} of {cases}");
    for class in [
        "intact",
        "superseded",
        "lost",
        "stale",
        "shorn",
        "corrupt",
        "misdirected",
        "unreadable",
    ] {
        assert!(
            classes.contains(class),
            "no {class} record in any run: {classes:?}"
        );
    }
    // Both halves ran: slots judged by their summary, and slots read again.
    assert!(SUMMARY_COUNTS[0].load(SeqCst) > judged0 + 1000);
    assert!(SUMMARY_COUNTS[1].load(SeqCst) > reread0 + 100);
}

/// A read that does not complete within the timeout: the summarising reads give up as
/// the scan does, and the report (the range left unread, INCONCLUSIVE as nothing read
/// was damaged) is the one the streamed path without the summary gives.
#[test]
fn a_hung_read_is_inconclusive_with_or_without_the_summary() {
    let t = Duration::from_millis(300);
    for seed in [0u64, 1] {
        let c = Case {
            seed,
            version: 2,
            sectors: 1,
            base: 0,
            acks: 300,
            short_bytes: 0,
        };
        let (d, acks, dev) = damaged_run(&c);
        let blank = MemDevice::new(dev.size_bytes() as usize);
        let dev = faulty(Arc::new(blank), vec![], 0);
        let summarised = verify_streamed(dev.clone(), &d, &acks, t, true, &|_, _| {}).unwrap();
        let mut plain = d.clone();
        plain.settings.record_bytes_max += 512;
        let streamed = verify_streamed(dev, &plain, &acks, t, true, &|_, _| {}).unwrap();
        let mut streamed = without_time(&streamed.report);
        streamed["run"] = without_time(&summarised.report)["run"].clone();
        let r = &summarised.report;
        assert_eq!(streamed, without_time(r), "seed {seed}");
        assert_eq!(
            r.verdict,
            crate::model::Verdict::Inconclusive,
            "seed {seed}"
        );
        assert!(r.summary.contains("--read-timeout"), "{}", r.summary);
        assert!(r.counts["unreadable"] > 0, "seed {seed}: {:?}", r.counts);
        assert_eq!(r.unreadable_ranges.len(), 1, "seed {seed}");
    }
}
