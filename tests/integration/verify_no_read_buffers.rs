//! Verify and replay on a machine without the memory for their reads, through the
//! binary: the read pipeline's buffers cannot be had (test support's
//! `PLUGPULL_TEST_NO_READ_BUFFERS`, which makes every chunk allocation fail as a full
//! machine would). Each way verify reads (the region summarised while the acks are
//! painted, the region read ahead, only the records' blocks, the run in parts) and a
//! replay must stop with exit 2 and an error that says what happened and what to do,
//! never a verdict, a panic (exit 101) or an abort.

use crate::common;
use crate::verify_budget::dir_on_another_fs;
use common::*;
use plugpull::verify::scan::NO_READ_BUFFERS;
use std::path::Path;
use std::process::Command;

/// `plugpull verify TARGET --witness W --rehearsal EXTRA...`, without the read buffers
/// `starved` names ([`NO_READ_BUFFERS`]: `all`, `ahead`).
fn verify_starved(w: &WitnessProc, target: &Path, extra: &[&str], starved: Option<&str>) -> Run {
    let mut c = Command::new(bin());
    c.args(["verify", target.to_str().unwrap(), "--witness", &w.addr])
        .arg("--rehearsal")
        .args(extra);
    if let Some(which) = starved {
        c.env(NO_READ_BUFFERS, which);
    }
    let out = c.output().expect("run plugpull");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The refusal: exit 2, the reason and what to do, the buffers named, no verdict, no
/// panic.
fn assert_refused(r: &Run, what: &str) {
    assert_eq!(r.code, 2, "{what}: {r:?}");
    assert!(
        r.stderr
            .contains("verify could not start reading the target, so there is no verdict")
            && r.stderr.contains("free some memory")
            && r.stderr.contains("verify cannot allocate its read buffers"),
        "{what}: {r:?}"
    );
    assert!(!r.stderr.contains("panicked"), "{what}: {r:?}");
    for verdict in ["PASS", "FAIL", "INCONCLUSIVE"] {
        assert!(!r.stdout.contains(verdict), "{what}: {r:?}");
    }
}

/// A finished run on a file target in `dir` (on a disk, so reads are O_DIRECT): `args`
/// given to `plugpull write`.
fn written(w: &WitnessProc, dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let t = dir.join(name);
    let wr = write(w, &t, args);
    assert_eq!(wr.code, 0, "{wr:?}");
    t
}

#[test]
fn every_way_verify_reads_stops_with_a_clear_error_without_read_buffers() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    // Records of one size over the whole region: summarised while the acks are painted.
    let one_size = written(&w, d.path(), "one.img", &["--size", "8M", "--count", "600"]);
    // Records of several sizes: the region read ahead, then scanned.
    let sizes = &["--size", "8M", "--record-size", "4k-16k", "--count", "600"];
    let mixed = written(&w, d.path(), "mixed.img", sizes);
    // A few records over a large region: only their blocks are read.
    let few = &["--size", "2G", "--count", "20"];
    let sparse = written(&w, d.path(), "sparse.img", few);
    let cases: Vec<(&str, &Path, Vec<String>)> = vec![
        ("one record size", &one_size, vec![]),
        ("several record sizes", &mixed, vec![]),
        ("sparse records", &sparse, vec![]),
    ];
    let mut cases = cases;
    // --memory 64M cannot hold the whole run's early reads: judged in parts, with its
    // work files away from the target's file system.
    let other = dir_on_another_fs(&one_size);
    if let Some(work) = &other {
        let work = work.path().display().to_string();
        let args = vec!["--memory".into(), "64M".into(), "--work-dir".into(), work];
        cases.push(("in parts", &one_size, args));
    } else {
        common::skip_unless(false, "no second file system (/dev/shm) for the parts case");
    }
    for (what, target, extra) in &cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        // With its buffers, each is judged: the refusal below comes from their absence.
        let judged = verify_starved(&w, target, &extra, None);
        assert_eq!(judged.code, 0, "{what}, with read buffers: {judged:?}");
        // Reading ahead is only faster: without its memory the run is judged all the same.
        let behind = verify_starved(&w, target, &extra, Some("ahead"));
        assert_eq!(behind.code, 0, "{what}, nothing read ahead: {behind:?}");
        assert_eq!(behind.stdout, judged.stdout, "{what}");
        let starved = verify_starved(&w, target, &extra, Some("all"));
        assert_refused(&starved, what);
    }
}

/// `plugpull replay` judges each replayed state with verify's scan: without its buffers
/// the replay stops with exit 2 instead of counting the states as disagreements.
#[test]
fn a_replay_without_read_buffers_stops_with_a_clear_error() {
    use plugpull::logwrites::encode::LogEncoder;
    use plugpull::model::RunSelector;
    use plugpull::record::{RunId, RunKey, fill_record};
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let wr = write(&w, &t, &["--size", "1M", "--count", "40"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let run_id = RunId::parse(wr.json()["run_id"].as_str().unwrap()).unwrap();
    let run = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id)).unwrap();
    // The run's writes as dm-log-writes logs them, a flush after each.
    let key = RunKey::new(run_id);
    let mut enc = LogEncoder::new(512);
    for a in &run.acks {
        let mut buf = vec![0u8; a.record.len_bytes() as usize];
        fill_record(&mut buf, &key, run_id, &a.record);
        enc.write(a.record.offset, &buf, false);
        enc.flush();
    }
    let log = d.path().join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    let replay = |starved: bool| {
        let mut c = Command::new(bin());
        c.args(["replay", log.to_str().unwrap(), "--witness", &w.addr])
            .arg("--scratch-dir")
            .arg(d.path());
        if starved {
            c.env(NO_READ_BUFFERS, "all");
        }
        c.output().expect("run plugpull")
    };
    let fed = replay(false);
    assert_eq!(fed.status.code(), Some(0), "{fed:?}");
    let out = replay(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("replay could not read back a replayed state, so there is no summary")
            && stderr.contains("free some memory")
            && stderr.contains("verify cannot allocate its read buffers")
            && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "{out:?}");
}
