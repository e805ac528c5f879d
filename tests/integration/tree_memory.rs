//! `plugpull verify DIR` within `--memory`: a tree holds every planned file and ack at
//! once (`tree::budget`), so a tree too big for the budget is refused before its acks
//! are loaded or a file is read, with the `--memory` that fits; one that fits stays
//! under the budget it was checked against (peak RSS measured).

use crate::common;
use crate::fetch_streamed::peak_rss_kib_to;
use common::*;
use plugpull::model::TreeSettings;
use plugpull::record::RunId;
use plugpull::witness::client::{AckSender, ClientOptions};
use std::path::Path;
use std::time::Duration;

/// A tree run's descriptor planning `files` files, as a writer under `dir` would send it.
fn tree_descriptor(run: RunId, files: u32) -> plugpull::model::RunDescriptor {
    let mut d = test_descriptor(run);
    d.settings.record_bytes_min = 512;
    d.settings.record_bytes_max = 8 << 20;
    d.tree = Some(TreeSettings {
        plan_version: plugpull::tree::PLAN_VERSION,
        seed: 5,
        files,
        total_bytes: files as u64 * 10_000,
        root: format!("plugpull-{}", run.hex()),
        flush: "fsync".into(),
    });
    d
}

fn assert_refused(r: &Run, what: &str) {
    assert_eq!(r.code, 2, "{what}: {r:?}");
    assert!(
        r.stderr.contains(
            "verifying this tree of 10,200,000 planned files (0 acknowledged) needs about"
        ) && r
            .stderr
            .contains("more than --memory 512.0 MiB: pass --memory 6258M")
            && r.stderr.contains("Nothing was read from the tree"),
        "{what}: {r:?}"
    );
}

/// Ten million planned files need some 6 GiB: refused under the default `--memory`,
/// from an ack file and from the witness, before the acks are loaded; given the
/// `--memory` the refusal names, the same run is judged.
#[test]
fn a_tree_too_big_for_memory_is_refused_before_reading() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x7e; 16]);
    let desc = tree_descriptor(run, 10_000_000);
    let s = AckSender::connect(&w.addr, &desc, ClientOptions::default()).unwrap();
    s.finish(Duration::from_secs(30)).unwrap();
    let dir = d.path().join("tree");
    std::fs::create_dir(&dir).unwrap();
    let t = dir.to_str().unwrap();
    let (run, log) = (run.hex(), d.path().join("run.acklog"));
    fetch_to(&w.addr, &run, &log);
    let by_witness = [
        "verify",
        t,
        "--witness",
        &w.addr,
        "--run",
        &run,
        "--rehearsal",
    ];
    assert_refused(&common::run(by_witness), "from the witness");
    let by_file = ["verify", t, "--acks", log.to_str().unwrap(), "--rehearsal"];
    assert_refused(&common::run(by_file), "from a file");
    // Judged when it fits: no acks, and the root was never made, so no tree to judge.
    let mut enough = by_file.to_vec();
    enough.extend(["--memory", "6258M"]);
    let r = common::run(&enough);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is not there"), "{r:?}");
}

/// A real tree of 30,000 files under `--memory 64M` (the check reckons about 51 MiB):
/// judged PASS, peaking under the budget.
#[test]
fn a_tree_that_fits_stays_under_its_budget() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let tree = tempfile::tempdir_in("/dev/shm").unwrap();
    let t = tree.path().to_str().unwrap();
    let wr = run([
        "write",
        t,
        "--witness",
        &w.addr,
        "--files",
        "30000",
        "--json",
    ]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let out = d.path().join("verify.json");
    let args = [
        "verify",
        t,
        "--witness",
        &w.addr,
        "--rehearsal",
        "--json",
        "--memory",
        "64M",
    ];
    let (rss_kib, code) = peak_rss_kib_to(&args, &out, Path::new("/dev/null"));
    let report = std::fs::read_to_string(&out).unwrap();
    assert_eq!(code, 0, "{report}");
    let j: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["tree"]["files_acked"], 30_600);
    assert!(rss_kib < 64 << 10, "peaked at {rss_kib} KiB");
}
