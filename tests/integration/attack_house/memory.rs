//! Without the memory for the read buffers (`PLUGPULL_TEST_NO_READ_BUFFERS`): the ways
//! of reading that `verify_no_read_buffers` does not try. Each is first judged with its
//! buffers, so a refusal below comes from their absence, and judged without the reads
//! ahead (`ahead`), which must change nothing in the report.

use super::run_cmd;
use crate::common::{self, *};
use plugpull::verify::scan::NO_READ_BUFFERS;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `plugpull ARGS`, without the read buffers `starved` names (`all`, `ahead`).
fn starved(args: &[&str], starved: Option<&str>) -> Run {
    let mut c = Command::new(bin());
    c.args(args);
    if let Some(which) = starved {
        c.env(NO_READ_BUFFERS, which);
    }
    run_cmd(&mut c)
}

/// Exit 2, the reason and what to do, no verdict, no panic.
fn assert_refused(r: &Run, what: &str) {
    assert_eq!(r.code, 2, "{what}: {r:?}");
    assert!(
        r.stderr.contains("so there is no verdict") && r.stderr.contains("free some memory"),
        "{what}: {r:?}"
    );
    assert!(!r.stderr.contains("panicked"), "{what}: {r:?}");
    for verdict in ["PASS", "FAIL", "INCONCLUSIVE"] {
        assert!(!r.stdout.contains(verdict), "{what}: {r:?}");
    }
}

/// With buffers it is judged (exit `judged_code`); without reads ahead, the same report;
/// without any buffer, refused.
fn judged_then_refused(args: &[&str], judged_code: i32, what: &str) {
    let judged = starved(args, None);
    assert_eq!(
        judged.code, judged_code,
        "{what}, with read buffers: {judged:?}"
    );
    let behind = starved(args, Some("ahead"));
    assert_eq!(
        behind.code, judged.code,
        "{what}, nothing read ahead: {behind:?}"
    );
    assert_eq!(
        untimed(&behind.stdout),
        untimed(&judged.stdout),
        "{what}, nothing read ahead"
    );
    assert_refused(&starved(args, Some("all")), what);
}

/// A report without the lines that time it (`verify_ms`, `judge_ms_per_point`: two runs
/// differ there).
fn untimed(report: &str) -> Vec<&str> {
    report.lines().filter(|l| !l.contains("_ms")).collect()
}

/// The run id of a `plugpull write` that finished (`run_id`; a tree's `run`).
fn written(w: &WitnessProc, t: &Path, args: &[&str]) -> String {
    let wr = write(w, t, args);
    assert_eq!(wr.code, 0, "{wr:?}");
    let j = wr.json();
    let id = j["run_id"].as_str().or_else(|| j["run"].as_str());
    id.unwrap_or_else(|| panic!("no run id: {wr:?}"))
        .to_string()
}

#[test]
fn verify_from_an_acks_file_and_with_scan_region_refuses_without_read_buffers() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let one = d.path().join("one.img");
    let run = written(&w, &one, &["--size", "8M", "--count", "600"]);
    let mixed = d.path().join("mixed.img");
    let sizes = ["--size", "8M", "--record-size", "4k-16k", "--count", "600"];
    written(&w, &mixed, &sizes);
    let sparse = d.path().join("sparse.img");
    written(&w, &sparse, &["--size", "2G", "--count", "20"]);
    let log = d.path().join("one.acklog");
    fetch_to(&w.addr, &run, &log);
    let (one, log) = (one.to_str().unwrap(), log.to_str().unwrap());
    let acks = ["verify", one, "--acks", log, "--rehearsal"];
    judged_then_refused(&acks, 0, "--acks FILE");
    let acks_json = ["verify", one, "--acks", log, "--rehearsal", "--json"];
    judged_then_refused(&acks_json, 0, "--acks FILE --json");
    for (what, t) in [
        ("one size", one),
        ("several sizes", mixed.to_str().unwrap()),
    ] {
        let whole = [
            "verify",
            t,
            "--witness",
            &w.addr,
            "--rehearsal",
            "--scan-region",
        ];
        judged_then_refused(&whole, 0, &format!("--scan-region, {what}"));
    }
    // A sparse run read whole: the region, not the records' blocks.
    let s = sparse.to_str().unwrap();
    let whole = [
        "verify",
        s,
        "--witness",
        &w.addr,
        "--rehearsal",
        "--scan-region",
    ];
    judged_then_refused(&whole, 0, "--scan-region, sparse");
    // Judged in parts from an acks file, its work files on another file system.
    if let Some(work) = crate::verify_budget::dir_on_another_fs(Path::new(one)) {
        let work = work.path().to_str().unwrap();
        let parts = [
            "verify",
            one,
            "--acks",
            log,
            "--rehearsal",
            "--memory",
            "64M",
            "--work-dir",
            work,
        ];
        judged_then_refused(&parts, 0, "in parts, --acks FILE");
    } else {
        common::skip_unless(false, "no second file system (/dev/shm) for the parts case");
    }
}

/// A target that is not there, named run: verify judges it through a device whose every
/// read fails (a dead device, FAIL), with the same read buffers, so without them there
/// is no verdict either: a machine short of memory never calls a drive dead.
#[test]
fn a_missing_target_without_read_buffers_is_refused_not_called_dead() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("gone.img");
    let run = written(&w, &t, &["--size", "1M", "--count", "40"]);
    std::fs::remove_file(&t).unwrap();
    let ts = t.to_str().unwrap();
    let args = [
        "verify",
        ts,
        "--witness",
        &w.addr,
        "--run",
        &run,
        "--rehearsal",
    ];
    judged_then_refused(&args, plugpull::exit::FAIL, "a missing target");
}

/// A tree target (`write DIR --files N`) reads each file whole into a buffer of its
/// size: without it, verify must stop as for a device, not call the files unreadable.
#[test]
fn a_tree_target_without_read_buffers_stops_with_a_clear_error() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let dir = d.path().join("tree");
    std::fs::create_dir(&dir).unwrap();
    written(&w, &dir, &["--files", "30"]);
    let ds = dir.to_str().unwrap();
    let args = ["verify", ds, "--witness", &w.addr, "--rehearsal"];
    judged_then_refused(&args, 0, "a tree");
}

/// dm-log-writes' log of run `run_id`'s writes at the witness, a flush after each.
pub(super) fn log_of_the_run(w: &WitnessProc, run_id: &str, into: &Path) -> PathBuf {
    use plugpull::logwrites::encode::LogEncoder;
    use plugpull::model::RunSelector;
    use plugpull::record::{RunId, RunKey, fill_record};
    let run_id = RunId::parse(run_id).unwrap();
    let run = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id)).unwrap();
    let key = RunKey::new(run_id);
    let mut enc = LogEncoder::new(512);
    for a in &run.acks {
        let mut buf = vec![0u8; a.record.len_bytes() as usize];
        fill_record(&mut buf, &key, run_id, &a.record);
        enc.write(a.record.offset, &buf, false);
        enc.flush();
    }
    let log = into.join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    log
}

/// `replay --full-verify` judges every state with a whole verify, `--drops N` judges
/// states with writes left out: without read buffers both stop (exit 2, no summary)
/// instead of counting disagreements.
#[test]
fn replay_full_verify_and_drops_stop_without_read_buffers() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let run = written(&w, &t, &["--size", "1M", "--count", "40"]);
    let log = log_of_the_run(&w, &run, d.path());
    let (l, scratch) = (log.to_str().unwrap(), d.path().to_str().unwrap());
    let base = ["replay", l, "--witness", &w.addr, "--scratch-dir", scratch];
    let cases: [(&str, &[&str]); 3] = [
        ("--full-verify", &["--full-verify"]),
        ("--drops 4", &["--drops", "4", "--seed", "1"]),
        (
            "--drops 4 --full-verify",
            &["--drops", "4", "--seed", "1", "--full-verify"],
        ),
    ];
    for (what, extra) in cases {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let fed = starved(&args, None);
        assert_eq!(fed.code, 0, "{what}: {fed:?}");
        let out = starved(&args, Some("all"));
        assert_eq!(out.code, 2, "{what}: {out:?}");
        assert!(
            out.stderr.contains("so there is no summary")
                && out.stderr.contains("free some memory")
                && !out.stderr.contains("panicked"),
            "{what}: {out:?}"
        );
        assert!(out.stdout.is_empty(), "{what}: {out:?}");
    }
}

/// A cycle (the demo runs one in-process, through the campaign's `cycle::fetched`)
/// without read buffers: recorded INCONCLUSIVE with the reason, not a verdict or a panic.
#[test]
fn a_cycle_without_read_buffers_is_inconclusive_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["demo", "--json", "--duration", "1s", "--seed", "3"];
    let mut c = Command::new(bin());
    c.args(args).env("TMPDIR", tmp.path());
    let fed = run_cmd(&mut c);
    assert_eq!(fed.code, 0, "{fed:?}");
    let out = run_cmd(c.env(NO_READ_BUFFERS, "all"));
    assert_eq!(out.code, plugpull::exit::INCONCLUSIVE, "{out:?}");
    let report: serde_json::Value = serde_json::from_str(&out.stdout).expect(&out.stderr);
    assert_eq!(report["verdict"], "INCONCLUSIVE", "{out:?}");
    assert!(out.stdout.contains("free some memory"), "{out:?}");
    assert!(!out.stderr.contains("panicked"), "{out:?}");
}

/// The memory that runs out part way (`after:N`: the first N read buffers are had, no
/// more): for every N the command either gives the report it gives with memory or is
/// refused, never a partial verdict, a panic or disagreements. N0, the fewest buffers
/// the command needs, is found by bisection (more memory never fails); N0 - 1 runs out
/// at the very last buffer, in the last thing read (a replay's last drop state, a run's
/// last part), and a spread of N below it elsewhere.
fn out_of_memory_part_way(args: &[&str], judged_code: i32, refused: fn(&Run, &str), what: &str) {
    let judged = starved(args, None);
    assert_eq!(
        judged.code, judged_code,
        "{what}, with read buffers: {judged:?}"
    );
    let after = |n: u64| starved(args, Some(&format!("after:{n}")));
    let fits = |n: u64| {
        let r = after(n);
        assert!(
            r.code == 2 || r.code == judged.code,
            "{what}, {n} read buffers: {r:?}"
        );
        r.code != 2
    };
    let mut high = 1;
    while !fits(high) {
        high *= 2;
        assert!(high < 1 << 20, "{what}: refused with {high} read buffers");
    }
    let mut low = 0;
    while low < high {
        let mid = (low + high) / 2;
        match fits(mid) {
            true => high = mid,
            false => low = mid + 1,
        }
    }
    let n0 = low;
    assert!(n0 > 0, "{what}: reads nothing");
    let mut probes: Vec<u64> = vec![0, 1, 2, n0 / 4, n0 / 2, 3 * n0 / 4, n0 - 2, n0 - 1, n0];
    probes.retain(|&n| n <= n0);
    probes.dedup();
    for n in probes {
        let r = after(n);
        let what = format!("{what}, {n} of the {n0} read buffers it needs");
        if r.code == 2 {
            refused(&r, &what);
        } else {
            assert_eq!(r.code, judged.code, "{what}: {r:?}");
            let (got, want) = (untimed(&r.stdout), untimed(&judged.stdout));
            let differ: Vec<_> = got.iter().zip(&want).filter(|(a, b)| a != b).collect();
            assert!(
                got.len() == want.len() && differ.is_empty(),
                "{what}: {differ:?}"
            );
        }
        if n == n0 - 1 {
            assert_eq!(r.code, 2, "{what}: the last buffer is needed");
        }
    }
}

fn replay_refused(r: &Run, what: &str) {
    assert!(
        r.stderr.contains("so there is no summary")
            && r.stderr.contains("free some memory")
            && !r.stderr.contains("panicked"),
        "{what}: {r:?}"
    );
    assert!(r.stdout.is_empty(), "{what}: {r:?}");
}

#[test]
fn verify_and_replay_refuse_when_memory_runs_out_part_way() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let one = d.path().join("one.img");
    let run = written(&w, &one, &["--size", "8M", "--count", "600"]);
    let mixed = d.path().join("mixed.img");
    let sizes = ["--size", "8M", "--record-size", "4k-16k", "--count", "600"];
    written(&w, &mixed, &sizes);
    let dir = d.path().join("tree");
    std::fs::create_dir(&dir).unwrap();
    written(&w, &dir, &["--files", "30"]);
    for (what, t) in [
        ("one size", one.to_str().unwrap()),
        ("several sizes", mixed.to_str().unwrap()),
        ("a tree", dir.to_str().unwrap()),
    ] {
        let args = ["verify", t, "--witness", &w.addr, "--rehearsal", "--json"];
        out_of_memory_part_way(&args, 0, assert_refused, what);
    }
    if let Some(work) = crate::verify_budget::dir_on_another_fs(&one) {
        let (o, work) = (one.to_str().unwrap(), work.path().to_str().unwrap());
        let parts = [
            "verify",
            o,
            "--witness",
            &w.addr,
            "--rehearsal",
            "--json",
            "--memory",
            "64M",
            "--work-dir",
            work,
        ];
        out_of_memory_part_way(&parts, 0, assert_refused, "in parts");
    } else {
        common::skip_unless(false, "no second file system (/dev/shm) for the parts case");
    }
    let small = d.path().join("small.img");
    let run_small = written(&w, &small, &["--size", "1M", "--count", "40"]);
    let _ = run;
    let log = log_of_the_run(&w, &run_small, d.path());
    let (l, scratch) = (log.to_str().unwrap(), d.path().to_str().unwrap());
    let base = [
        "replay",
        l,
        "--witness",
        &w.addr,
        "--scratch-dir",
        scratch,
        "--json",
    ];
    let drops = ["--drops", "4", "--seed", "1"];
    for (what, extra) in [
        ("--drops 4", &drops[..]),
        ("--full-verify", &["--full-verify", "--seed", "1"][..]),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        out_of_memory_part_way(&args, 0, replay_refused, what);
    }
}
