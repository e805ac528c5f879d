//! `run` end to end on small logs and ack files: what is checked before the pass (the
//! run the acks are of, the memory the acks and the log's entries need) and what the
//! summary keeps of a pass where every point disagrees.

use super::encode::LogEncoder;
use super::replay::MAX_DISAGREEMENT_LINES;
use super::{ReplayError, ReplayOptions, ReplaySummary, run};
use crate::model::{Ack, RunDescriptor};
use crate::record::{RecordId, RunId, RunKey, fill_record};
use crate::verify::{AckSource, VerifyError};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Held by each test here: one looks at the temporary directory for the process's
/// temporary ack logs, which another's replay would make too.
static REPLAYING: Mutex<()> = Mutex::new(());

const RUN: RunId = RunId([0x4e; 16]);
const RECORD_BYTES: u64 = 4096;

fn descriptor(run: RunId, records: u64) -> RunDescriptor {
    let record = (RECORD_BYTES, RECORD_BYTES);
    super::tests::run_descriptor(run, records * RECORD_BYTES, record, "sequential", 1)
}

/// Ack i of a one-stream sequential run of 4 KiB records.
fn ack(i: u64) -> Ack {
    let record = RecordId {
        stream: 0,
        seq: i + 1,
        offset: i * RECORD_BYTES,
        sectors: (RECORD_BYTES / 512) as u32,
        write_time_ns: 1_000_000 + i * 10,
    };
    Ack {
        record,
        flushed_ns: record.write_time_ns + 5,
    }
}

/// A log of `acks` records of `RUN`, each written then flushed.
fn logged(acks: &[Ack]) -> LogEncoder {
    let key = RunKey::new(RUN);
    let mut enc = LogEncoder::new(512);
    for a in acks {
        let mut buf = vec![0u8; a.record.len_bytes() as usize];
        fill_record(&mut buf, &key, RUN, &a.record);
        enc.write(a.record.offset, &buf, false);
        enc.flush();
    }
    enc
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        Case {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// An ack file of `acks` for run `run`, as `plugpull fetch -o` writes it.
    fn ack_file(&self, run: RunId, acks: &[Ack]) -> PathBuf {
        let p = self.dir.path().join(format!("{}.acks", run.hex()));
        crate::witness::store::export::write_log_file_from(
            &p,
            &descriptor(run, acks.len() as u64),
            &mut acks.iter().copied(),
            &[],
            None,
        )
        .unwrap();
        p
    }

    fn options(&self, log: &Path, acks: AckSource, memory_bytes: u64) -> ReplayOptions {
        ReplayOptions {
            log: log.to_path_buf(),
            acks,
            key_file: None,
            run: Some(RUN),
            base: None,
            drops: 0,
            seed: 1,
            full_verify: false,
            scratch_dir: Some(self.dir.path().to_path_buf()),
            read_timeout: Duration::from_secs(30),
            memory_bytes,
            json: false,
        }
    }
}

const ENOUGH: u64 = 512 << 20;

fn replayed(o: &ReplayOptions) -> ReplaySummary {
    run(o).unwrap_or_else(|e| panic!("{e}: {e:?}"))
}

/// This process's temporary ack logs left in the temporary directory.
fn temp_ack_logs_left() -> Vec<PathBuf> {
    let mine = format!("plugpull-replay-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&mine) && name.ends_with(".acklog")
        })
        .collect()
}

/// A super block whose entry count is damaged (2^50) is the pass's to report, where the
/// log ends, as before there was a memory check: not a refusal asking for a --memory of
/// petabytes. A count of 0, or below the log's entries, replays only what it counts.
#[test]
fn a_damaged_entry_count_is_reported_as_damage_not_as_memory() {
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let acks: Vec<Ack> = (0..3).map(ack).collect();
    let acks_file = c.ack_file(RUN, &acks);
    let bytes = logged(&acks).finish();
    let with_count = |n: u64| {
        let mut b = bytes.clone();
        b[16..24].copy_from_slice(&n.to_le_bytes());
        c.file(&format!("count-{n}.log"), &b)
    };
    let o = c.options(
        &with_count(1 << 50),
        AckSource::File(acks_file.clone()),
        ENOUGH,
    );
    match run(&o) {
        Err(ReplayError::Format { source, .. }) => {
            let text = source.to_string();
            assert!(text.contains("truncated"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    let s = replayed(&c.options(&with_count(0), AckSource::File(acks_file.clone()), ENOUGH));
    assert_eq!((s.entries, s.durable_points, s.disagreements), (0, 0, 0));
    assert!(
        s.notes.iter().any(|n| n.contains("more entries follow")),
        "{:?}",
        s.notes
    );
    let s = replayed(&c.options(&with_count(4), AckSource::File(acks_file), ENOUGH));
    assert_eq!(
        (s.entries, s.durable_points, s.acks_durable_in_log),
        (4, 2, 2)
    );
    assert!(
        s.notes.iter().any(|n| n.contains("more entries follow")),
        "{:?}",
        s.notes
    );
}

/// An ack file of another run is refused as that, before its acks are counted against
/// --memory: a refusal for size would name a --memory that only leads to this one.
#[test]
fn an_ack_file_of_another_run_is_refused_as_such_before_the_memory_check() {
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let acks: Vec<Ack> = (0..3).map(ack).collect();
    let other = RunId([0x77; 16]);
    let log = c.file("lw.log", &logged(&acks).finish());
    let o = c.options(&log, AckSource::File(c.ack_file(other, &acks)), 1);
    match run(&o) {
        Err(ReplayError::Acks(VerifyError::WrongRun { found, asked })) => {
            assert_eq!((found, asked), (other, RUN));
        }
        other => panic!("{other:?}"),
    }
    // The run's own file is then checked against the budget (too small even for parts).
    let o = c.options(&log, AckSource::File(c.ack_file(RUN, &acks)), 1);
    assert!(matches!(run(&o), Err(ReplayError::PartsMemory(_))));
}

/// A witness that answers one fetch, whatever run it asks for, with `sent`'s descriptor
/// and `acks`. Returns its address.
fn witness_that_sends(sent: RunId, acks: Vec<Ack>) -> String {
    use crate::wire::frame::{self, Decoded};
    use crate::wire::msg::Msg;
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        let mut b = [0u8; 4096];
        while !matches!(frame::decode(&buf), Decoded::Frame(_)) {
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "the fetcher sent no whole frame");
            buf.extend_from_slice(&b[..n]);
        }
        let n = acks.len() as u64;
        s.write_all(&Msg::FetchRun(descriptor(sent, n)).encode())
            .unwrap();
        s.write_all(&Msg::Acks { first: 0, acks }.encode()).unwrap();
        s.write_all(&Msg::FetchEnd { acks: n }.encode()).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.read_to_end(&mut Vec::new());
    });
    addr
}

/// As verify: a witness that sends another run than the one asked for (one that mixed
/// up its runs, a hostile one) is refused as such, not for the size of what it sent,
/// and its fetch leaves no temporary file; the run asked for is then fetched, counted
/// and checked against --memory.
#[test]
fn a_witness_that_sends_another_run_is_refused_before_the_memory_check() {
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let acks: Vec<Ack> = (0..3).map(ack).collect();
    let log = c.file("lw.log", &logged(&acks).finish());
    let other = RunId([0x78; 16]);
    let o = c.options(
        &log,
        AckSource::Witness(witness_that_sends(other, acks.clone())),
        1,
    );
    match run(&o) {
        Err(ReplayError::Acks(VerifyError::Fetch(e))) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!("for run {RUN} and it sent run {other}")),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(temp_ack_logs_left(), Vec::<PathBuf>::new());
    let o = c.options(
        &log,
        AckSource::Witness(witness_that_sends(RUN, acks.clone())),
        1,
    );
    match run(&o) {
        Err(ReplayError::PartsMemory(m)) => assert_eq!(m.total_acks, 3),
        other => panic!("{other:?}"),
    }
    assert_eq!(temp_ack_logs_left(), Vec::<PathBuf>::new());
    let o = c.options(
        &log,
        AckSource::Witness(witness_that_sends(RUN, acks)),
        ENOUGH,
    );
    let s = replayed(&o);
    assert_eq!((s.acks, s.acks_durable_in_log, s.disagreements), (3, 3, 0));
    assert_eq!(temp_ack_logs_left(), Vec::<PathBuf>::new());
}

/// A log in a witness directory with a journal, whose acks only the journal holds (the
/// log's appends lost with the page cache), is replayed with the journal overlaid, is
/// counted against --memory with them, and leaves no copy behind.
#[test]
fn a_journaled_witness_directory_log_is_replayed_and_counted_with_its_journal() {
    use crate::witness::store::journal::{Journal, JournalOptions};
    use crate::witness::store::log::AckLog;
    use crate::witness::store::storage::FsStorage;
    use std::sync::Arc;
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let wdir = c.dir.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let acks: Vec<Ack> = (0..40).map(ack).collect();
    let j = Arc::new(Journal::open(FsStorage::shared(), &wdir, JournalOptions::default()).unwrap());
    let mut l = AckLog::create(&FsStorage, &wdir, &descriptor(RUN, 40))
        .unwrap()
        .with_journal(j.clone());
    let created = l.durable_len_bytes();
    l.append_acks(0, &acks).unwrap();
    l.commit().unwrap();
    drop(l);
    drop(j);
    let path = crate::witness::store::layout::log_path(&wdir, RUN);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(created)
        .unwrap();
    assert!(!crate::witness::store::reader::streamable(&path));
    let log = c.file("lw.log", &logged(&acks).finish());
    let s = replayed(&c.options(&log, AckSource::File(path.clone()), ENOUGH));
    assert_eq!(
        (s.acks, s.acks_durable_in_log, s.durable_points),
        (40, 40, 40)
    );
    assert_eq!(s.disagreements, 0, "{:?}", s.disagreement_lines);
    match run(&c.options(&log, AckSource::File(path), 1)) {
        Err(ReplayError::PartsMemory(m)) => assert_eq!(m.total_acks, 40),
        other => panic!("{other:?}"),
    }
    assert_eq!(temp_ack_logs_left(), Vec::<PathBuf>::new());
}

/// Once an acked record is lost (here discarded) every later durable point disagrees:
/// the count says how many, but only the first lines are kept, and one more line counts
/// the rest, so a long log of disagreeing points stays within the memory it was
/// checked against.
#[test]
fn disagreeing_points_are_all_counted_and_the_first_are_described() {
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let acks: Vec<Ack> = (0..3).map(ack).collect();
    let mut enc = logged(&acks);
    enc.discard(0, RECORD_BYTES);
    let more = MAX_DISAGREEMENT_LINES + 250;
    for _ in 0..more {
        enc.flush();
    }
    let log = c.file("lw.log", &enc.finish());
    let s = replayed(&c.options(&log, AckSource::File(c.ack_file(RUN, &acks)), ENOUGH));
    assert_eq!(s.durable_points, 3 + more);
    assert_eq!(s.durable_points_as_expected, 3);
    assert_eq!(s.disagreements, more);
    assert_eq!(s.disagreement_lines.len(), MAX_DISAGREEMENT_LINES + 1);
    assert!(
        s.disagreement_lines[0]
            .starts_with("durable point 3 (log entry 7, 3 acks): expected PASS, verify says FAIL"),
        "{}",
        s.disagreement_lines[0]
    );
    assert_eq!(
        s.disagreement_lines[MAX_DISAGREEMENT_LINES],
        "250 more durable points disagree, not listed (the first 1000 are)"
    );
    assert!(
        s.line().ends_with(&format!(": {more} disagreements")),
        "{}",
        s.line()
    );
}

/// A log of many marks with long names (what fits a 4 KiB entry sector) keeps the first
/// names and counts the rest in a note, instead of holding every name where the memory
/// check reckons 24 bytes an entry.
#[test]
fn many_marks_are_counted_and_the_first_are_named() {
    let _one = REPLAYING.lock().unwrap_or_else(|e| e.into_inner());
    let c = Case::new();
    let acks: Vec<Ack> = (0..2).map(ack).collect();
    let mut enc = logged(&acks);
    let long = "m".repeat(400);
    let many = super::replay::MAX_MARKS + 30;
    for _ in 0..many {
        enc.mark(&long);
    }
    let log = c.file("lw.log", &enc.finish());
    let s = replayed(&c.options(&log, AckSource::File(c.ack_file(RUN, &acks)), ENOUGH));
    assert_eq!(s.marks.len(), super::replay::MAX_MARKS);
    assert_eq!(s.marks[0], long);
    assert_eq!(s.entries, 4 + many as u64);
    let note = format!(
        "the log has 1,030 marks; the first {} are listed",
        s.marks.len()
    );
    assert!(s.notes.contains(&note), "{:?}", s.notes);
}
