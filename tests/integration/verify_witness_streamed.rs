//! `verify --witness` streams the witness's fetch reply into a temporary log file and
//! judges it as `verify --acks FILE` does (memory that does not grow with the
//! run). Differential: on damaged targets, and on a run whose witness log is damaged,
//! the report from the witness equals the report from the `fetch -o` file, field by
//! field, except where it names its source.

use crate::common;
use common::*;
use std::fs;
use std::path::Path;

/// The report without the fields that name where the acks came from, and the time it
/// took.
fn comparable(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    v.as_object_mut().unwrap().remove("verify_ms");
    let log = v["ack_log"].as_object_mut().expect("ack_log in the report");
    log.remove("source");
    log.remove("wholeness");
    v
}

/// Both ways of verifying `t`: from the witness (by run id and by the drive's latest
/// run) and from a `fetch -o` file; returns the exit code and the comparable report.
fn both_ways(w: &WitnessProc, d: &Path, t: &Path, run_id: &str) -> (i32, serde_json::Value) {
    let file = d.join(format!("{run_id}.acklog"));
    fetch_to(&w.addr, run_id, &file);
    let by_file = run([
        "verify",
        t.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        file.to_str().unwrap(),
        "--json",
    ]);
    let by_run = verify(w, t, &["--run", run_id]);
    let latest = verify(w, t, &[]);
    for r in [&by_run, &latest] {
        assert_eq!(r.code, by_file.code, "{r:?}\n{by_file:?}");
        assert_eq!(
            comparable(&r.json()),
            comparable(&by_file.json()),
            "witness path and file path differ"
        );
        assert_eq!(
            r.json()["ack_log"]["source"],
            format!("witness {}", w.addr),
            "the report names the witness"
        );
    }
    (by_file.code, comparable(&by_file.json()))
}

fn written(w: &WitnessProc, t: &Path) -> String {
    let wr = write(
        w,
        t,
        &["--size", "1M", "--count", "1500", "--record-size", "4K"],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    wr.json()["run_id"].as_str().unwrap().to_string()
}

/// A name and what it does to a target.
type Damage = (&'static str, fn(&Path));

#[test]
fn witness_path_equals_file_path_on_damaged_runs() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    // Undamaged, then each kind of damage on its own run (all of a 1 MiB ring).
    let damages: [Damage; 4] = [
        ("none", |_| {}),
        ("zeroed records", |t| {
            edit(t, 40 * 4096, 3 * 4096, |b| b.fill(0))
        }),
        ("flipped bit", |t| {
            edit(t, 100 * 4096 + 777, 1, |b| b[0] ^= 4)
        }),
        ("torn record", |t| {
            edit(t, 200 * 4096 + 2048, 2048, |b| b.fill(0xa5))
        }),
    ];
    let mut codes = vec![];
    for (i, (what, damage)) in damages.iter().enumerate() {
        let t = d.path().join(format!("t{i}.img"));
        let run_id = written(&w, &t);
        damage(&t);
        let (code, report) = both_ways(&w, d.path(), &t, &run_id);
        eprintln!("{what}: exit {code}, counts {}", report["counts"]);
        codes.push(code);
    }
    assert_eq!(codes, [0, 1, 1, 1], "PASS undamaged, FAIL damaged");
}

/// A witness log with a damaged frame in the middle: both paths name the damage and
/// judge the same acks.
#[test]
fn witness_path_equals_file_path_on_a_damaged_witness_log() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let run_id = written(&w, &t);
    let log = d.path().join("w").join(format!("{run_id}.acklog"));
    let len = fs::metadata(&log).unwrap().len();
    edit(&log, len / 2, 1, |b| b[0] ^= 0x10);
    let (code, report) = both_ways(&w, d.path(), &t, &run_id);
    assert_ne!(code, 0, "a damaged log is never a PASS");
    assert!(
        !report["ack_log"]["damage"].as_array().unwrap().is_empty(),
        "{report}"
    );
}
