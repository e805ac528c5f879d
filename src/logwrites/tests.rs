//! The log format round trip, damaged logs, which acks each durable point holds, and the
//! incremental judge against a whole verify at every point.

use super::drops;
use super::encode::LogEncoder;
use super::format::{self, FormatError, LogReader};
use super::image::ScratchImage;
use super::replay::{MainPass, PassOptions, main_pass};
use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use crate::model::{Ack, RunDescriptor, RunLog, Verdict, WriterSettings};
use crate::record::{RecordId, RunId, RunKey, fill_record};
use std::io::Cursor;
use std::time::Duration;

fn reader(bytes: &[u8]) -> Result<LogReader<Cursor<Vec<u8>>>, FormatError> {
    LogReader::new(Cursor::new(bytes.to_vec()), Some(bytes.len() as u64))
}

fn all(bytes: &[u8]) -> Result<Vec<format::Entry>, FormatError> {
    reader(bytes)?.collect()
}

#[test]
fn round_trip_every_kind_of_entry_in_both_sector_sizes() {
    for ss in [512u32, 4096] {
        let mut enc = LogEncoder::new(ss);
        let a = vec![0xabu8; 2 * ss as usize];
        let b = vec![0x5au8; ss as usize];
        enc.write(3 * ss as u64, &a, false);
        enc.flush();
        enc.write(10 * ss as u64, &b, true);
        enc.discard(0, 8 * ss as u64);
        enc.mark("after-discard");
        enc.entry(format::FLUSH | format::FUA, ss as u64, ss as u64, &b, "");
        let bytes = enc.finish();
        // The super block, byte by byte.
        assert_eq!(&bytes[0..8], &0x6a736677736872u64.to_le_bytes());
        assert_eq!(&bytes[8..16], &1u64.to_le_bytes());
        assert_eq!(&bytes[16..24], &6u64.to_le_bytes());
        assert_eq!(&bytes[24..28], &ss.to_le_bytes());
        // The first entry header is at byte `ss`; sector counts are in `ss` units.
        let h = &bytes[ss as usize..];
        assert_eq!(&h[0..8], &3u64.to_le_bytes());
        assert_eq!(&h[8..16], &2u64.to_le_bytes());
        assert_eq!(&h[16..24], &0u64.to_le_bytes());
        assert_eq!(&h[24..32], &0u64.to_le_bytes(), "a write's data_len is 0");
        let es = all(&bytes).unwrap();
        assert_eq!(es.len(), 6);
        assert_eq!(
            (es[0].offset, es[0].len, &es[0].data),
            (3 * ss as u64, 2 * ss as u64, &a)
        );
        assert!(es[0].is_write() && !es[0].is_durable_point());
        assert!(es[1].is_flush() && es[1].is_durable_point() && !es[1].is_write());
        assert!(es[2].is_fua() && es[2].is_write() && es[2].is_durable_point());
        assert_eq!(es[2].data, b);
        assert!(es[3].is_discard() && es[3].data.is_empty() && es[3].len == 8 * ss as u64);
        assert_eq!(es[4].mark.as_deref(), Some("after-discard"));
        assert!(!es[4].is_durable_point());
        assert!(es[5].is_flush() && es[5].is_fua() && es[5].is_write());
        // Entry positions: header sector, then data (none for discards and marks).
        let s = ss as u64;
        let want = [s, 4 * s, 5 * s, 7 * s, 8 * s, 9 * s];
        assert_eq!(es.iter().map(|e| e.log_offset).collect::<Vec<_>>(), want);
        assert_eq!(
            es.iter().map(|e| e.index).collect::<Vec<_>>(),
            (0..6).collect::<Vec<_>>()
        );
    }
}

#[test]
fn entries_past_the_count_are_not_read() {
    let mut enc = LogEncoder::new(512);
    enc.flush();
    enc.flush();
    let mut bytes = enc.finish();
    bytes[16..24].copy_from_slice(&1u64.to_le_bytes());
    assert_eq!(all(&bytes).unwrap().len(), 1);
    // ... but the reader can tell one follows (a target not removed cleanly).
    let mut r = reader(&bytes).unwrap();
    assert!(r.by_ref().all(|e| e.is_ok()));
    assert!(r.entry_follows());
    let mut whole = reader(&bytes[..bytes.len() - 512]).unwrap();
    assert!(whole.by_ref().all(|e| e.is_ok()));
    assert!(!whole.entry_follows());
}

fn err_text(bytes: &[u8]) -> String {
    match all(bytes) {
        Ok(es) => panic!("read {} entries from a bad log", es.len()),
        Err(e) => crate::exit::error_chain(&e),
    }
}

#[test]
fn garbage_and_damaged_logs_are_errors_that_say_what_is_wrong() {
    assert!(err_text(b"hello").contains("shorter than a super block"));
    let garbage = vec![0x42u8; 8192];
    let t = err_text(&garbage);
    assert!(
        t.contains("not a dm-log-writes log: bad magic at byte 0"),
        "{t}"
    );
    let mut enc = LogEncoder::new(512);
    enc.write(0, &[7u8; 1024], false);
    enc.flush();
    let good = enc.finish();
    let mut v = good.clone();
    v[8] = 2;
    assert!(err_text(&v).contains("version 2 at byte 8"));
    let mut v = good.clone();
    v[24..28].copy_from_slice(&1000u32.to_le_bytes());
    assert!(err_text(&v).contains("sector size 1000"));
    // More entries counted than the log holds.
    let mut v = good.clone();
    v[16..24].copy_from_slice(&3u64.to_le_bytes());
    assert!(
        err_text(&v).contains("truncated: the header of entry 2"),
        "{}",
        err_text(&v)
    );
    // A zeroed entry (what a log device holds past the last entry written).
    let mut v = good.clone();
    v.extend_from_slice(&[0u8; 512]);
    v[16..24].copy_from_slice(&3u64.to_le_bytes());
    assert!(err_text(&v).contains("entry 2 at byte 2560: all zeroes"));
    // Unknown flags; non-zero padding.
    let mut v = good.clone();
    v[512 + 16] = 0x40;
    assert!(err_text(&v).contains("unknown flags 0x40"));
    let mut v = good.clone();
    v[512 + 40] = 1;
    assert!(err_text(&v).contains("not zero padding"));
    // A garbage sector count is refused before anything is allocated for it.
    let mut v = good.clone();
    v[512 + 8..512 + 16].copy_from_slice(&(1u64 << 50).to_le_bytes());
    assert!(err_text(&v).contains("truncated: the data of entry 0"));
    // Every truncation: an error or fewer entries, never a panic.
    for n in 0..good.len() {
        let _ = all(&good[..n]);
    }
}

/// A run's records as the writer stamps them, and a log built from them.
struct Fixture {
    run: RunId,
    key: RunKey,
    descriptor: RunDescriptor,
    acks: Vec<Ack>,
}

impl Fixture {
    fn new(region_bytes: u64, streams: u16) -> Fixture {
        let run = RunId([7; 16]);
        Fixture {
            run,
            key: RunKey::new(run),
            descriptor: run_descriptor(run, region_bytes, (4096, 8192), "sequential", streams),
            acks: vec![],
        }
    }

    /// Record (stream, seq) at `offset`, `sectors` long: its id and bytes; acked unless
    /// `acked` is false.
    fn record(&mut self, stream: u16, seq: u64, offset: u64, sectors: u32, acked: bool) -> Vec<u8> {
        let rec = RecordId {
            stream,
            seq,
            offset,
            sectors,
            write_time_ns: 1_000_000 + seq * 10 + stream as u64,
        };
        let mut buf = vec![0u8; rec.len_bytes() as usize];
        fill_record(&mut buf, &self.key, self.run, &rec);
        if acked {
            self.acks.push(Ack {
                record: rec,
                flushed_ns: rec.write_time_ns + 5,
            });
        }
        buf
    }

    fn pass(&self, log: &[u8], full: bool) -> MainPass {
        let image = ScratchImage::create(
            &std::env::temp_dir(),
            self.descriptor.settings.region_bytes,
            None,
        )
        .unwrap();
        main_pass(
            reader(log).unwrap(),
            &image,
            &self.descriptor,
            &self.acks,
            PassOptions {
                full_verify: full,
                for_drops: true,
                read_timeout: Duration::from_secs(30),
                part: None,
            },
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
    }
}

#[test]
fn a_record_is_judged_only_after_the_flush_that_follows_all_its_writes() {
    let mut f = Fixture::new(1 << 20, 2);
    let mut enc = LogEncoder::new(512);
    let r0 = f.record(0, 0, 0, 16, true);
    let r1 = f.record(1, 0, 512 << 10, 8, true);
    // Stream 0's record split in two writes around a flush; stream 1's written with FUA.
    enc.write(0, &r0[..4096], false);
    enc.flush(); // point 0: nothing whole yet
    enc.write(512 << 10, &r1, true); // point 1: r1 (FUA)
    enc.write(4096, &r0[4096..], false);
    enc.mark("half");
    enc.flush(); // point 2: r0 too
    let p = f.pass(&enc.finish(), false);
    let got: Vec<(u64, u32, Verdict)> = p
        .points
        .iter()
        .map(|x| (x.entry, x.acks, x.verdict))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, 0, Verdict::Inconclusive),
            (2, 1, Verdict::Pass),
            (5, 2, Verdict::Pass)
        ]
    );
    assert!(p.disagreements.is_empty(), "{:?}", p.disagreements);
    assert_eq!(p.acks[0].record.stream, 1);
    assert_eq!(p.marks, vec!["half".to_string()]);
    assert_eq!(p.ackable_at, vec![Some(2), Some(1)]);
    assert_eq!(p.never_durable, 0);
    assert!(p.first_never_durable.is_none());
}

#[test]
fn writes_after_the_last_flush_are_not_acked_and_an_unflushed_record_never_is() {
    let mut f = Fixture::new(1 << 20, 1);
    let mut enc = LogEncoder::new(512);
    let r0 = f.record(0, 0, 0, 8, true);
    let r1 = f.record(0, 1, 4096, 8, true); // acked by the witness, never flushed in the log
    enc.write(0, &r0, false);
    enc.flush();
    enc.write(4096, &r1, false);
    let p = f.pass(&enc.finish(), false);
    assert_eq!(p.points.len(), 1);
    assert_eq!(p.points[0].acks, 1);
    assert_eq!(p.never_durable, 1);
    assert_eq!(p.first_never_durable.unwrap().record.seq, 1);
}

/// A two-stream run that wraps with records of mixed sizes, some writes batched under
/// one flush, a FUA write, unacked writes; then damage logged as if the drive had
/// written it: garbage over an acked record, a discard, and a re-write of an older
/// record's bytes (stale data).
fn busy_log(f: &mut Fixture, damage: bool) -> Vec<u8> {
    busy_log_shares(f, damage, 64 * 1024)
}

/// [`busy_log`] with each stream's share `share` bytes long (far apart: separate scans).
fn busy_log_shares(f: &mut Fixture, damage: bool, share: u64) -> Vec<u8> {
    let mut enc = LogEncoder::new(512);
    let mut at = [0u64, 0];
    let mut old: Option<(u64, Vec<u8>)> = None;
    for seq in 0..60u64 {
        for stream in 0..2u16 {
            let sectors = if (seq + stream as u64) % 3 == 0 {
                16
            } else {
                8
            };
            let len = sectors as u64 * 512;
            if at[stream as usize] + len > share {
                at[stream as usize] = 0;
            }
            let offset = stream as u64 * share + at[stream as usize];
            at[stream as usize] += len;
            let acked = seq % 7 != 6;
            let bytes = f.record(stream, seq, offset, sectors, acked);
            enc.write(offset, &bytes, seq % 11 == 5 && stream == 1);
            if seq == 3 && stream == 0 {
                old = Some((offset, bytes.clone()));
            }
        }
        if seq % 2 == 1 {
            enc.flush();
        }
        if damage && seq == 20 {
            enc.write(share + 4096, &[0x99u8; 1024], false);
            enc.flush();
        }
        if damage && seq == 30 {
            enc.discard(8192, 4096);
            enc.flush();
        }
        if damage && seq == 40 {
            let (o, b) = old.clone().unwrap();
            enc.write(o, &b, false);
            enc.flush();
        }
    }
    enc.flush();
    enc.finish()
}

#[test]
fn the_incremental_judge_agrees_with_a_whole_verify_at_every_point() {
    for (damage, share) in [(false, 64 << 10), (true, 64 << 10), (true, 4 << 20)] {
        let mut f = Fixture::new(8 << 20, 2);
        let log = busy_log_shares(&mut f, damage, share);
        let fast = f.pass(&log, false);
        let whole = f.pass(&log, true);
        let key = |p: &MainPass| -> Vec<(u64, u32, Verdict, u32, u32)> {
            p.points
                .iter()
                .map(|x| (x.entry, x.acks, x.verdict, x.failed, x.intact))
                .collect()
        };
        assert_eq!(key(&fast), key(&whole), "damage {damage}, share {share}");
        assert!(fast.points.len() > 30);
        if damage {
            assert!(fast.points.iter().any(|p| p.verdict == Verdict::Fail));
            assert!(!fast.disagreements.is_empty());
        } else {
            assert!(fast.disagreements.is_empty(), "{:?}", fast.disagreements);
            assert!(
                fast.points
                    .iter()
                    .skip(1)
                    .all(|p| p.verdict == Verdict::Pass)
            );
        }
        // The fast path reads far less than a whole verify per point.
        if !damage {
            assert!(
                fast.bytes_read < whole.bytes_read,
                "{} vs {}",
                fast.bytes_read,
                whole.bytes_read
            );
        }
    }
}

#[test]
fn drop_states_fail_where_an_acked_write_is_left_out_and_pass_otherwise() {
    let mut f = Fixture::new(1 << 20, 2);
    let log = busy_log(&mut f, false);
    let pass = f.pass(&log, false);
    let plans = drops::plan(&pass, &f.acks, 12, 42);
    assert_eq!(plans.len(), 12);
    assert_eq!(
        plans.iter().filter(|p| p.expected == Verdict::Fail).count(),
        6
    );
    let image = ScratchImage::create(&std::env::temp_dir(), 1 << 20, None).unwrap();
    let run_log = RunLog {
        files: Default::default(),
        descriptor: f.descriptor.clone(),
        acks: f.acks.clone(),
        events: vec![],
    };
    let open = || reader(&log);
    for p in &plans {
        let s =
            drops::run_plan(p, &open, &image, &pass, &run_log, Duration::from_secs(30)).unwrap();
        assert!(s.agrees, "{s:?}");
        if p.expected == Verdict::Fail {
            assert!(!s.expected_lost.is_empty());
            for lost in &s.expected_lost {
                assert!(s.found.iter().any(|x| x.contains(lost.as_str())), "{s:?}");
            }
        }
    }
    // The same seed, the same states.
    let again = drops::plan(&pass, &f.acks, 12, 42);
    assert_eq!(
        plans.iter().map(|p| p.dropped.clone()).collect::<Vec<_>>(),
        again.iter().map(|p| p.dropped.clone()).collect::<Vec<_>>()
    );
}

#[test]
fn mangled_logs_never_panic_the_reader_or_the_replay() {
    let mut f = Fixture::new(1 << 20, 2);
    let good = busy_log(&mut f, false);
    let mut rng = crate::rng::Rng::new(9);
    for _ in 0..100 {
        let mut v = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(4096.min(v.len() as u64)) as usize;
            v[at] = rng.next_u64() as u8;
        }
        if rng.chance(0.3) {
            v.truncate(rng.below(v.len() as u64) as usize);
        }
        let Ok(r) = reader(&v) else { continue };
        let image = ScratchImage::create(&std::env::temp_dir(), 1 << 20, None).unwrap();
        let _ = main_pass(
            r,
            &image,
            &f.descriptor,
            &f.acks,
            PassOptions {
                full_verify: false,
                for_drops: true,
                read_timeout: Duration::from_secs(30),
                part: None,
            },
        );
    }
}

#[test]
fn a_base_image_is_the_start_state_and_writes_past_the_device_are_refused() {
    let dir = std::env::temp_dir().join(format!("plugpull-base-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("base");
    std::fs::write(&base, vec![0x33u8; 8192]).unwrap();
    let img = ScratchImage::create(&dir, 16384, Some(&base)).unwrap();
    // The image has no name: however replay ends, nothing is left beside the base.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["base"]);
    let mut enc = LogEncoder::new(512);
    enc.write(512, &[0x44u8; 512], false);
    enc.discard(1024, 512);
    enc.write(16384, &[1u8; 512], false);
    let es = all(&enc.finish()).unwrap();
    img.apply(&es[0]).unwrap();
    img.apply(&es[1]).unwrap();
    let e = img.apply(&es[2]).unwrap_err().to_string();
    assert!(e.contains("past the end of the data device"), "{e}");
    let bytes = img.bytes();
    assert_eq!(bytes.len(), 16384);
    assert!(bytes[..512].iter().all(|&b| b == 0x33));
    assert!(bytes[512..1024].iter().all(|&b| b == 0x44));
    assert!(bytes[1024..1536].iter().all(|&b| b == 0));
    assert!(bytes[1536..8192].iter().all(|&b| b == 0x33));
    assert!(bytes[8192..].iter().all(|&b| b == 0));
    img.reset().unwrap();
    assert!(img.bytes()[512..1024].iter().all(|&b| b == 0x33));
    drop(img);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Acks in an order a writer sends: each stream's by seq, in the places its acks held,
/// even when the writer's clock stepped back mid-run (flush times going back).
#[test]
fn writer_order_is_by_seq_per_stream_whatever_the_clock_did() {
    let ack = |stream: u16, seq: u64, flushed_ns: u64| crate::model::Ack {
        record: crate::record::RecordId {
            stream,
            seq,
            offset: seq * 4096,
            sectors: 8,
            write_time_ns: flushed_ns,
        },
        flushed_ns,
    };
    // As a log can make them durable: stream 0's seq 3 before its seq 2; the clock
    // stepped back before stream 0's seq 4 and stream 1's seq 2.
    let acks = vec![
        ack(0, 1, 100),
        ack(1, 1, 110),
        ack(0, 3, 130),
        ack(0, 2, 120),
        ack(0, 4, 50),
        ack(1, 2, 60),
    ];
    let got = super::judge::in_writer_order(acks);
    let order: Vec<(u16, u64)> = got
        .iter()
        .map(|a| (a.record.stream, a.record.seq))
        .collect();
    assert_eq!(order, [(0, 1), (1, 1), (0, 2), (0, 3), (0, 4), (1, 2)]);
    // Each ack keeps its own times.
    assert!(got.iter().all(|a| a.flushed_ns == a.record.write_time_ns));
}

/// The descriptor of a run of `streams` streams writing records of `record_bytes`
/// (least, most) over `region_bytes` from offset 0 of a file: the replay tests' runs.
pub(super) fn run_descriptor(
    run: RunId,
    region_bytes: u64,
    record_bytes: (u64, u64),
    placement: &str,
    streams: u16,
) -> RunDescriptor {
    RunDescriptor {
        run_id: run,
        format_version: crate::record::FORMAT_VERSION,
        plugpull_version: "test".into(),
        host: "h".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        device: DeviceIdentity {
            target: "/dev/x".into(),
            kind: "file".into(),
            size_bytes: region_bytes,
            ..Default::default()
        },
        settings: WriterSettings {
            region_offset: 0,
            region_bytes,
            record_bytes_min: record_bytes.0,
            record_bytes_max: record_bytes.1,
            placement: placement.into(),
            streams,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
        },
        command: vec![],
        tree: None,
    }
}
