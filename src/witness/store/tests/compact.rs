//! The ack log with CompactAcks frames: what it costs per ack, that it reads
//! back exactly, and that logs written before it stay readable and appendable.

use crate::model::Ack;
use crate::wire::codec_tests::{Mix, sequential_acks};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::tests::sample_descriptor;
use crate::wire::msg::{LOG_VERSION, LOG_VERSION_COMPACT, LOG_VERSION_PLAIN};
use crate::witness::store::export::write_log_file;
use crate::witness::store::log::AckLog;
use crate::witness::store::reader::{read_log_file, read_log_file_checked};
use crate::witness::store::storage::FsStorage;
use std::path::{Path, PathBuf};

/// Every frame type in `bytes`, in order; panics on bytes that are not whole frames.
fn frame_types(mut bytes: &[u8]) -> Vec<FrameType> {
    let mut types = Vec::new();
    while !bytes.is_empty() {
        let Decoded::Frame(f) = frame::decode(bytes) else {
            panic!("not a whole frame");
        };
        types.push(f.ty);
        bytes = &bytes[f.len_bytes..];
    }
    types
}

/// Header version of a log file.
fn header_version(bytes: &[u8]) -> u16 {
    let Decoded::Frame(f) = frame::decode(bytes) else {
        panic!("no header");
    };
    crate::le::u16_at(f.payload, 8)
}

/// A log of `acks` appended and committed in batches of `batch` (what the witness does
/// with each writer's batch), its path, and the bytes the acks took.
fn log_of(dir: &Path, acks: &[Ack], batch: usize) -> (PathBuf, u64) {
    let mut log = AckLog::create(&FsStorage, dir, &sample_descriptor(9)).unwrap();
    let empty = log.durable_len_bytes();
    for c in acks.chunks(batch) {
        let first = log.appended_acks();
        log.append_acks(first, c).unwrap();
        assert_eq!(log.durable_acks(), first, "durable only after commit");
        assert_eq!(log.commit().unwrap(), first + c.len() as u64);
    }
    (log.path().to_path_buf(), log.durable_len_bytes() - empty)
}

/// The size promise: a sequential run's log costs at most 4 bytes per ack, and holds
/// exactly the acks, in the witness's log and in `fetch -o` output alike.
#[test]
fn sequential_run_log_costs_at_most_4_bytes_per_ack() {
    let dir = tempfile::tempdir().unwrap();
    let acks = sequential_acks(100_000, 1, &[8], 1 << 20, (2_000, 20_000), &mut Mix(11));
    let (path, bytes) = log_of(dir.path(), &acks, 500);
    let per_ack = bytes as f64 / acks.len() as f64;
    eprintln!("witness log: {per_ack:.3} bytes per ack");
    assert!(per_ack <= 4.0, "{per_ack:.3} bytes per ack");
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(header_version(&raw), LOG_VERSION);
    assert!(frame_types(&raw).contains(&FrameType::PackedAcks));
    let back = read_log_file(&path).unwrap();
    assert!(back.acks == acks, "the log reads back exactly");

    let out = dir.path().join("fetched.acklog");
    write_log_file(&out, &back).unwrap();
    let (fetched, whole) = read_log_file_checked(&out, None).unwrap();
    assert!(whole.whole, "{}", whole.how);
    assert!(fetched.acks == acks);
    let per_ack = std::fs::metadata(&out).unwrap().len() as f64 / acks.len() as f64;
    eprintln!("fetch -o file: {per_ack:.3} bytes per ack (whole file)");
    assert!(per_ack <= 4.0, "{per_ack:.3} bytes per ack");
}

/// The size promise in the witness's own log at its real pace: a commit holds what arrived
/// during one journal fdatasync, ~90 acks at ~90 000 acks/s, and each commit is its own
/// frame. Flushes of 4-20 us at nanosecond resolution: at most 4 bytes an ack
/// (CompactAcks frames, log format 2, took 4.37 measured).
#[test]
fn witness_commits_of_90_acks_cost_at_most_4_bytes_per_ack() {
    let dir = tempfile::tempdir().unwrap();
    let acks = sequential_acks(90_000, 1, &[8], 1 << 20, (4_000, 20_000), &mut Mix(13));
    let (path, bytes) = log_of(dir.path(), &acks, 90);
    let per_ack = bytes as f64 / acks.len() as f64;
    eprintln!("witness log, commits of 90: {per_ack:.3} bytes per ack");
    assert!(per_ack <= 4.0, "{per_ack:.3} bytes per ack");
    assert!(read_log_file(&path).unwrap().acks == acks);
}

/// Random placement has nothing to compact: plain frames, 40 bytes an ack and the frame.
#[test]
fn random_run_log_costs_what_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let mut mix = Mix(12);
    let mut acks = sequential_acks(10_000, 1, &[8], 1 << 20, (2_000, 20_000), &mut mix);
    for a in &mut acks {
        a.record.offset = mix.below(1 << 20) * 4096;
    }
    let (path, bytes) = log_of(dir.path(), &acks, 500);
    let per_ack = bytes as f64 / acks.len() as f64;
    eprintln!("witness log, random placement: {per_ack:.3} bytes per ack");
    assert!((40.0..40.5).contains(&per_ack), "{per_ack:.3}");
    assert!(read_log_file(&path).unwrap().acks == acks);
}

fn fixture(name: &str) -> PathBuf {
    fixture_of(1, name)
}

fn fixture_of(version: u16, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/data/acklog-v{version}"))
        .join(name)
}

/// Logs written with CompactAcks (format version 2, tests/data/acklog-v2: a witness's own
/// log and `fetch -o` output of a 300-ack, 2-stream run by the plugpull before
/// PackedAcks) read as before; the fetched file still proves it is whole.
#[test]
fn version_2_logs_still_read() {
    for name in ["witness.acklog", "fetched.acklog"] {
        let path = fixture_of(LOG_VERSION_COMPACT, name);
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(header_version(&raw), LOG_VERSION_COMPACT, "{name}");
        assert!(
            frame_types(&raw).contains(&FrameType::CompactAcks),
            "{name}"
        );
        assert!(
            !frame_types(&raw).contains(&FrameType::PackedAcks),
            "{name}"
        );
        let (log, whole) = read_log_file_checked(&path, None).unwrap();
        assert_eq!(log.acks.len(), 300, "{name}");
        assert_eq!(
            whole.whole,
            name == "fetched.acklog",
            "{name}: {}",
            whole.how
        );
        for s in 0..2u16 {
            let seqs: Vec<u64> = log
                .acks
                .iter()
                .filter(|a| a.record.stream == s)
                .map(|a| a.record.seq)
                .collect();
            let from = seqs[0];
            let want: Vec<u64> = (from..from + seqs.len() as u64).collect();
            assert_eq!(seqs, want, "{name}");
        }
    }
    let witness = read_log_file(&fixture_of(2, "witness.acklog")).unwrap();
    let fetched = read_log_file(&fixture_of(2, "fetched.acklog")).unwrap();
    assert!(
        witness.acks == fetched.acks,
        "both files hold the same acks"
    );
}

/// A witness that opens a version 2 log appends CompactAcks frames, never PackedAcks,
/// so the plugpull that wrote it can still read it.
#[test]
fn version_2_log_is_appended_in_its_own_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.acklog");
    std::fs::copy(fixture_of(2, "witness.acklog"), &path).unwrap();
    let before = read_log_file(&path).unwrap();
    let (mut log, _) = AckLog::open(&FsStorage, &path).unwrap();
    assert_eq!(log.durable_acks(), 300);
    let last = *before.acks.iter().rfind(|a| a.record.stream == 0).unwrap();
    let more: Vec<Ack> = (1..=50u64)
        .map(|k| {
            let mut a = last;
            a.record.seq += k;
            a.record.offset += k * a.record.len_bytes();
            a.record.write_time_ns += k * 30_000;
            a.flushed_ns += k * 30_000;
            a
        })
        .collect();
    log.append_acks(300, &more).unwrap();
    log.commit().unwrap();
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(header_version(&raw), LOG_VERSION_COMPACT);
    assert!(!frame_types(&raw).contains(&FrameType::PackedAcks));
    let types = frame_types(&raw);
    assert_eq!(types.last(), Some(&FrameType::CompactAcks), "{types:?}");
    let after = read_log_file(&path).unwrap();
    assert_eq!(after.acks[..300], before.acks[..]);
    assert_eq!(after.acks[300..], more[..]);
}

/// Logs written before CompactAcks (format version 1, tests/data/acklog-v1: a witness's
/// own log and `fetch -o` output of a 300-ack, 2-stream run) read as before; the fetched
/// file still proves it is whole.
#[test]
fn version_1_logs_still_read() {
    for name in ["witness.acklog", "fetched.acklog"] {
        let raw = std::fs::read(fixture(name)).unwrap();
        assert_eq!(header_version(&raw), LOG_VERSION_PLAIN, "{name}");
        assert!(!frame_types(&raw).contains(&FrameType::CompactAcks));
        let (log, whole) = read_log_file_checked(&fixture(name), None).unwrap();
        assert_eq!(log.acks.len(), 300, "{name}");
        assert_eq!(
            whole.whole,
            name == "fetched.acklog",
            "{name}: {}",
            whole.how
        );
        for s in 0..2u16 {
            let seqs: Vec<u64> = log
                .acks
                .iter()
                .filter(|a| a.record.stream == s)
                .map(|a| a.record.seq)
                .collect();
            let from = seqs[0];
            assert_eq!(
                seqs,
                (from..from + seqs.len() as u64).collect::<Vec<_>>(),
                "{name}"
            );
        }
    }
}

/// A witness that opens a version 1 log (a run that began under an older plugpull)
/// appends plain Acks frames, so the plugpull that wrote it can still read it.
#[test]
fn version_1_log_is_appended_in_its_own_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.acklog");
    std::fs::copy(fixture("witness.acklog"), &path).unwrap();
    let before = read_log_file(&path).unwrap();
    let (mut log, _) = AckLog::open(&FsStorage, &path).unwrap();
    assert_eq!(log.durable_acks(), 300);
    let mut more = before.acks[298..].to_vec();
    for a in &mut more {
        a.record.seq += 1_000;
        a.record.offset += 4096;
    }
    log.append_acks(300, &more).unwrap();
    log.commit().unwrap();
    let raw = std::fs::read(&path).unwrap();
    assert_eq!(header_version(&raw), LOG_VERSION_PLAIN);
    assert!(!frame_types(&raw).contains(&FrameType::CompactAcks));
    let after = read_log_file(&path).unwrap();
    assert_eq!(after.acks[..300], before.acks[..]);
    assert_eq!(after.acks[300..], more[..]);
}
