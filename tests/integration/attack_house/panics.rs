//! A stream thread that panics (`PLUGPULL_TEST_PANIC_AT_WRITE=STREAM:N`) in runs that
//! `writer_panic` does not try: four streams, a batch of 8 unconfirmed acks, the panic
//! at the stream's first write and late. Each time: plugpull's own failure reported
//! once, exit 2, no PoisonError cascade, and nothing of that stream acknowledged from
//! the panicking write on.

use crate::common::{InProcessWitness, bin};
use plugpull::model::RunSelector;
use plugpull::record::RunId;
use plugpull::write::fault::{PANIC_AT_WRITE, PANIC_TEXT};
use std::process::Command;

fn panicking_run(stream: u64, at: u64, extra: &[&str]) {
    let what = format!("stream {stream} panics at write {at}, {extra:?}");
    let dir = tempfile::tempdir().unwrap();
    let w = InProcessWitness::start(&dir.path().join("w"));
    let target = dir.path().join("target.img");
    let out = Command::new(bin())
        .env(PANIC_AT_WRITE, format!("{stream}:{at}"))
        .args(["write", target.to_str().unwrap(), "--witness", &w.addr])
        .args(["--json", "--quiet", "--streams", "4", "--size", "16M"])
        .args(["--record-size", "4k", "--count", "100000"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let why = format!("{what}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(out.status.code(), Some(plugpull::exit::ERROR), "{why}");
    let said = format!("plugpull: error: plugpull failed: a thread of stream {stream} panicked: ");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with(&said) && l.contains(PANIC_TEXT)),
        "{why}"
    );
    assert_eq!(stderr.matches("panicked at").count(), 1, "{why}");
    assert!(!stderr.contains("PoisonError"), "{why}");
    let summary: serde_json::Value = serde_json::from_str(&stdout).expect(&why);
    assert_eq!(summary["stopped_because"], "plugpull failed", "{why}");
    let run = RunId::parse(summary["run_id"].as_str().expect(&why)).expect(&why);
    let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run)).unwrap();
    assert_eq!(
        log.acks.len() as u64,
        summary["records_acked"].as_u64().unwrap(),
        "{why}"
    );
    let mine: Vec<u64> = log
        .acks
        .iter()
        .filter(|a| a.record.stream as u64 == stream)
        .map(|a| a.record.seq)
        .collect();
    // Acked records of the stream are a prefix of the ones before its panicked write.
    assert!(mine.iter().all(|&s| s < at), "{why}: {mine:?}");
    assert_eq!(mine, (1..=mine.len() as u64).collect::<Vec<_>>(), "{why}");
}

#[test]
fn a_panic_at_a_streams_first_write_among_four() {
    panicking_run(0, 1, &[]);
    panicking_run(3, 1, &[]);
}

#[test]
fn a_late_panic_among_four_streams() {
    panicking_run(2, 300, &[]);
}

#[test]
fn a_panic_with_a_batch_of_unconfirmed_acks() {
    panicking_run(1, 1, &["--batch", "8"]);
    panicking_run(1, 300, &["--batch", "8"]);
}
