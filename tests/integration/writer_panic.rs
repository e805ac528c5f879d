//! A bug in the writer, end to end: one stream thread of a real `plugpull write` panics
//! (test support's `PLUGPULL_TEST_PANIC_AT_WRITE`). The command reports plugpull's own
//! failure with the panic's text, the witness holds nothing acknowledged after it, and
//! the exit code is the tool-error one, not a cascade of PoisonError panics.

use crate::common::{InProcessWitness, bin};
use plugpull::model::RunSelector;
use plugpull::record::RunId;
use plugpull::units::thousands;
use plugpull::write::fault::{PANIC_AT_WRITE, PANIC_TEXT};
use std::process::Command;

#[test]
fn a_stream_that_panics_stops_the_run_with_an_error_and_nothing_acked_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = InProcessWitness::start(&dir.path().join("w"));
    let target = dir.path().join("target.img");
    // Stream 1 panics at its 20th write; --count ends the run if the panic never came.
    let out = Command::new(bin())
        .env(PANIC_AT_WRITE, "1:20")
        .args(["write", target.to_str().unwrap(), "--witness", &w.addr])
        .args(["--json", "--quiet", "--streams", "2", "--size", "4M"])
        .args(["--record-size", "4k", "--count", "100000"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let why = format!("stdout:\n{stdout}\nstderr:\n{stderr}");

    assert_eq!(out.status.code(), Some(plugpull::exit::ERROR), "{why}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("plugpull: error: "))
        .unwrap_or_else(|| panic!("no error line; {why}"));
    assert!(
        error.starts_with("plugpull: error: plugpull failed: a thread of stream 1 panicked: "),
        "{why}"
    );
    assert!(error.contains(PANIC_TEXT), "{why}");
    assert!(error.contains("This is a bug in plugpull"), "{why}");
    // The panic itself, once; no other thread panicked on a poisoned lock.
    assert_eq!(stderr.matches("panicked at").count(), 1, "{why}");
    assert!(!stderr.contains("PoisonError"), "{why}");

    let summary: serde_json::Value = serde_json::from_str(&stdout).expect(&why);
    // Not the target's failure, which would mean a power cut to verify.
    assert_eq!(summary["stopped_because"], "plugpull failed", "{why}");
    let acked = summary["records_acked"].as_u64().expect(&why);
    assert!(
        error.contains(&format!("({} records were)", thousands(acked))),
        "the error and the summary disagree on the acks; {why}"
    );
    let run = RunId::parse(summary["run_id"].as_str().expect(&why)).expect(&why);
    let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run)).unwrap();
    assert_eq!(
        log.acks.len() as u64,
        acked,
        "the witness holds other acks; {why}"
    );
    // Stream 1 acknowledged the records before its panicked write, and none from it on.
    let one: Vec<u64> = log
        .acks
        .iter()
        .filter(|a| a.record.stream == 1)
        .map(|a| a.record.seq)
        .collect();
    assert_eq!(one, (1..20).collect::<Vec<u64>>(), "{why}");
}
