//! Verify within a memory budget, through the binary: a run judged in parts
//! (`--memory` too small for the whole run) gets the same report as the whole run; bad
//! `--memory` and `--work-dir` values and a work directory without room are refused
//! with what to do, before the target is read.

use crate::common;

use plugpull::device::{FlushMethod, identity};
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, SECTOR, fill_record};
use plugpull::rng::Rng;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const REC_BYTES: u64 = 4096;
const SLOTS: u64 = 1 << 15; // 128 MiB
const ACKS: u64 = 40_000;

/// A random run over a sparse target, records rewritten many times over; some lost,
/// one corrupt, one torn. Returns (target, log).
fn damaged_run(dir: &Path) -> (PathBuf, PathBuf) {
    let (target, log) = (dir.join("t.img"), dir.join("t.acklog"));
    let run = RunId([0x33; 16]);
    let key = RunKey::new(run);
    let f = std::fs::File::create(&target).unwrap();
    f.set_len(SLOTS * REC_BYTES).unwrap();
    let mut rng = Rng::new(11);
    let mut acks = vec![];
    let mut latest = std::collections::HashMap::new();
    for i in 0..ACKS {
        let record = RecordId {
            stream: (i % 2) as u16,
            seq: i / 2 + 1,
            offset: (rng.next_u64() % SLOTS) * REC_BYTES,
            sectors: (REC_BYTES / SECTOR as u64) as u32,
            write_time_ns: 1_780_000_000_000_000_000 + i * 10_000,
        };
        latest.insert(record.offset, (i, record));
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 3_000 + rng.next_u64() % 20_000,
        });
    }
    for (&offset, &(i, record)) in &latest {
        let mut buf = vec![0u8; REC_BYTES as usize];
        fill_record(&mut buf, &key, run, &record);
        match i % 97 {
            0 => continue,            // lost
            1 => buf[100] ^= 1,       // corrupt
            2 => buf[2048..].fill(0), // torn
            _ => {}
        }
        f.write_all_at(&buf, offset).unwrap();
    }
    f.sync_all().unwrap();
    let d = RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(&target),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: SLOTS * REC_BYTES,
            record_bytes_min: REC_BYTES,
            record_bytes_max: REC_BYTES,
            placement: "random".into(),
            streams: 2,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 11,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
    };
    let mut stream = acks.iter().copied();
    plugpull::witness::store::export::write_log_file_from(&log, &d, &mut stream, &[], None)
        .unwrap();
    (target, log)
}

fn judged(r: &common::Run) -> serde_json::Value {
    let mut v = r.json();
    // What may differ: the time taken. The parts read what the whole run reads.
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn a_run_judged_in_parts_gets_the_whole_runs_report() {
    // A disk file system: O_DIRECT reads (tmpfs has none).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = damaged_run(dir.path());
    // Off the target's file system: verify refuses a work directory on the drive under
    // test (tests verify_budget).
    let Some(other) = crate::verify_budget::dir_on_another_fs(&target) else {
        common::skip_unless(false, "no second file system (/dev/shm) for the work files");
        return;
    };
    let work = other.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let w = work.to_str().unwrap();
    let whole = common::run([
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--memory",
        "4G",
    ]);
    assert_eq!(whole.code, 1, "{whole:?}");
    let r = whole.json();
    assert_eq!(r["verdict"], "FAIL");
    assert!(
        r["counts"]["superseded"].as_u64().unwrap() > 10_000,
        "{whole:?}"
    );
    for class in ["lost", "corrupt", "shorn"] {
        assert!(
            r["counts"][class].as_u64().unwrap() > 0,
            "{class}: {whole:?}"
        );
    }
    // 64 MiB is less than the whole run's early reads alone: judged in parts.
    let parts = common::run([
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--memory",
        "64M",
        "--work-dir",
        w,
    ]);
    assert_eq!(parts.code, 1, "{parts:?}");
    assert_eq!(judged(&parts), judged(&whole));
    // The work files are gone, named or not.
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
}

#[test]
fn bad_budgets_and_work_dirs_are_refused_before_reading() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = damaged_run(dir.path());
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let small = common::run(["verify", t, "--acks", l, "--rehearsal", "--memory", "1M"]);
    assert_eq!(small.code, 2, "{small:?}");
    assert!(small.stderr.contains("at least 64.0 MiB"), "{small:?}");
    let nonsense = common::run(["verify", t, "--acks", l, "--rehearsal", "--memory", "lots"]);
    assert_eq!(nonsense.code, 2, "{nonsense:?}");
    let missing = dir.path().join("no-such-dir");
    let m = missing.to_str().unwrap();
    let r = common::run([
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--memory",
        "64M",
        "--work-dir",
        m,
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--work-dir") && r.stderr.contains(m),
        "{r:?}"
    );
    assert!(
        !missing.exists(),
        "verify made the work directory it was given"
    );
}

#[test]
fn a_work_dir_without_room_is_refused_before_reading() {
    if !common::skip_unless(common::is_root(), "mounting a small tmpfs needs root") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = damaged_run(dir.path());
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success());
    let (t, l, s) = (
        target.to_str().unwrap(),
        log.to_str().unwrap(),
        small.to_str().unwrap(),
    );
    let r = common::run([
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--memory",
        "64M",
        "--work-dir",
        s,
    ]);
    common::umount(&small);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("too little") && r.stderr.contains("--work-dir"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("Nothing was read from the target"),
        "{r:?}"
    );
}

/// The work directory fills up while the target is being read (another program took
/// the space): verify stops with no verdict and says it stopped while reading, instead
/// of a report judged on part of the failures.
#[test]
fn a_work_dir_that_fills_up_while_reading_stops_verify_with_no_verdict() {
    if !common::skip_unless(common::is_root(), "mounting a small tmpfs needs root") {
        return;
    }
    use plugpull::device::Device;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = damaged_run(dir.path());
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=300m", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success());
    /// The target, filling the work directory at its first read.
    struct FillsUp {
        inner: plugpull::device::FileDevice,
        dir: PathBuf,
        filled: AtomicBool,
    }
    impl Device for FillsUp {
        fn size_bytes(&self) -> u64 {
            self.inner.size_bytes()
        }
        fn logical_block_bytes(&self) -> u32 {
            self.inner.logical_block_bytes()
        }
        fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
            panic!("verify must never write")
        }
        fn flush(&self) -> std::io::Result<()> {
            panic!("verify must never flush")
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            if !self.filled.swap(true, Ordering::SeqCst) {
                let hog = std::fs::File::create(self.dir.join("hog")).unwrap();
                let mut chunk = vec![0u8; 1 << 20];
                chunk[0] = 1;
                while std::io::Write::write_all(&mut &hog, &chunk).is_ok() {}
            }
            self.inner.read_at(buf, offset)
        }
    }
    let dev: Arc<dyn Device> = Arc::new(FillsUp {
        inner: plugpull::device::FileDevice::open_read(&target).unwrap(),
        dir: small.clone(),
        filled: AtomicBool::new(false),
    });
    let (run_log, _) = plugpull::witness::store::reader::read_log_file_checked(&log, None).unwrap();
    let budget = plugpull::verify::budget::Budget {
        memory_bytes: 64 << 20,
        work_dir: Some(small.clone()),
    };
    let judged = plugpull::verify::engine::verify_streamed_run(
        dev,
        &run_log.descriptor,
        plugpull::verify::scan::ScanRun::from(&run_log.descriptor),
        &run_log.acks,
        std::time::Duration::from_secs(10),
        false,
        &|_, _| {},
        &budget,
    );
    let hogged = std::fs::metadata(small.join("hog")).map(|m| m.len());
    common::umount(&small);
    assert!(hogged.unwrap() > 0, "the work directory was never filled");
    match judged {
        Err(
            e @ plugpull::verify::VerifyError::WorkDirFull {
                before_reading: false,
                ..
            },
        ) => {
            let text = e.to_string();
            assert!(
                text.contains("No verdict: verify stopped while it read the target"),
                "{text}"
            );
        }
        Err(e) => panic!("another error: {e}"),
        Ok(s) => panic!(
            "a verdict on a run whose failures could not be kept: {:?}",
            s.report.verdict
        ),
    }
}

/// A log of 2 M acks of one sector each (80 MB as acks), sequential over `written_to`
/// (created, sparse), in `log`.
pub(crate) fn two_million_acks(written_to: &Path, log: &Path) -> u64 {
    let slots: u64 = 2 << 20;
    std::fs::File::create(written_to)
        .unwrap()
        .set_len(slots * 512)
        .unwrap();
    let d = RunDescriptor {
        run_id: RunId([0x5c; 16]),
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(written_to),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: slots * 512,
            record_bytes_min: 512,
            record_bytes_max: 512,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
    };
    let mut stream = (0..slots).map(|i| {
        let record = RecordId {
            stream: 0,
            seq: i + 1,
            offset: i * 512,
            sectors: 1,
            write_time_ns: 1_780_000_000_000_000_000 + i * 10_000,
        };
        Ack {
            record,
            flushed_ns: record.write_time_ns + 3_000,
        }
    });
    plugpull::witness::store::export::write_log_file_from(log, &d, &mut stream, &[], None).unwrap();
    slots
}

/// A copy of the run's drive (another medium, as `dd` of the drive to an image makes)
/// is judged with the acks streamed from the log, never held: 2 M acks (80 MB as acks)
/// stay under `--memory 64M`.
#[test]
fn a_copy_of_the_drive_is_judged_without_holding_the_acks() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (written_to, target, log) = (
        dir.path().join("drive.img"),
        dir.path().join("copy.img"),
        dir.path().join("t.acklog"),
    );
    let slots = two_million_acks(&written_to, &log);
    std::fs::File::create(&target)
        .unwrap()
        .set_len(slots * 512)
        .unwrap();
    let Some(other) = crate::verify_budget::dir_on_another_fs(&target) else {
        common::skip_unless(false, "no second file system (/dev/shm) for the work files");
        return;
    };
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let w = other.path().to_str().unwrap();
    let args = [
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--allow-identity-mismatch",
        "--memory",
        "64M",
        "--work-dir",
        w,
    ];
    let err = dir.path().join("err");
    let (rss_kib, code) = crate::fetch_streamed::peak_rss_kib(&args, &err);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    // A blank copy: every record lost.
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("verifying anyway (--allow-identity-mismatch)"),
        "{stderr}"
    );
    assert!(
        rss_kib < 64 << 10,
        "peak RSS {rss_kib} KiB over --memory 64M"
    );
}

/// A drive that did not come back is judged ack by ack by the same engine, the acks
/// streamed from the log, never held: 2 M acks (80 MB as acks) stay under
/// `--memory 64M`, every one unreadable, the verdict FAIL.
#[test]
fn a_gone_drive_is_judged_without_holding_the_acks() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = (dir.path().join("drive.img"), dir.path().join("t.acklog"));
    let slots = two_million_acks(&target, &log);
    std::fs::remove_file(&target).unwrap();
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let args = [
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--memory",
        "64M",
    ];
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let (rss_kib, code) = crate::fetch_streamed::peak_rss_kib_to(&args, &out, &err);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code, 1, "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(report["verdict"], "FAIL", "{stderr}");
    assert_eq!(report["counts"]["unreadable"], slots, "{stderr}");
    assert!(
        report["dead_device"]
            .as_str()
            .unwrap()
            .contains("does not exist any more"),
        "{report}"
    );
    assert!(
        rss_kib < 64 << 10,
        "peak RSS {rss_kib} KiB over --memory 64M"
    );
}
