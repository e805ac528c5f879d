//! `write --iodepth N` through the built binary: the io_uring engine to a file and a
//! loop device, verified record by record; with streams, random placement and a size
//! range; every flush method; bad values refused; a write failing at depth; Ctrl-C; and
//! power cuts of the simulated drive at depth (honest: PASS, lying: FAIL).

use crate::common;
use common::*;
use plugpull::model::RunSelector;
use plugpull::record::RunId;
use std::path::Path;
use std::process::{Command, Stdio};

/// The acks the witness holds of the run `wr` (a `write --json` run) wrote.
fn witness_acks(w: &WitnessProc, wr: &Run) -> Vec<plugpull::model::Ack> {
    let run = RunId::parse(wr.json()["run_id"].as_str().unwrap()).unwrap();
    plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run))
        .expect("fetching the run's acks")
        .acks
}

/// Verify judges every acknowledged record intact (none superseded: the runs here do
/// not wrap) and says PASS.
fn assert_all_intact(w: &WitnessProc, target: &Path, acked: u64) {
    let v = verify(w, target, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    assert_eq!(j["verdict"], "PASS", "{v:?}");
    assert_eq!(j["counts"]["intact"].as_u64(), Some(acked), "{v:?}");
}

#[test]
fn depth_32_to_a_file_keeps_every_record_and_names_the_engine() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = write(
        &w,
        &t,
        &["--size", "32M", "--count", "3000", "--iodepth", "32"],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    let j = wr.json();
    assert_eq!(j["records_acked"], 3000);
    assert_eq!(j["witness_durable"], 3000);
    assert_eq!(
        (
            &j["engine"],
            &j["iodepth"],
            &j["flush_every"],
            &j["flush_within_us"]
        ),
        (
            &serde_json::json!("io_uring"),
            &serde_json::json!(32),
            &serde_json::json!(32),
            &serde_json::json!(10_000)
        ),
        "{wr:?}"
    );
    assert!(
        wr.stderr
            .contains("io_uring, depth 32, a flush every 32 writes or 10 ms"),
        "{wr:?}"
    );
    assert_all_intact(&w, &t, 3000);
}

/// Four streams, each with its own ring, random placement over their shares and a
/// record-size range: every acknowledged record is on the drive (intact or superseded
/// by a later one of its stream).
#[test]
fn depth_with_four_streams_random_placement_and_a_size_range() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = write(
        &w,
        &t,
        &[
            "--size",
            "16M",
            "--count",
            "2000",
            "--iodepth",
            "16",
            "--streams",
            "4",
            "--placement",
            "random",
            "--record-size",
            "4k-32k",
            "--flush-every",
            "8",
        ],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    assert_eq!(wr.json()["records_acked"], 2000);
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    let c = &v.json()["counts"];
    assert_eq!(
        c["intact"].as_u64().unwrap() + c["superseded"].as_u64().unwrap(),
        2000,
        "{v:?}"
    );
    // Each stream's acks reached the witness in sequence order, none missing.
    let acks = witness_acks(&w, &wr);
    for stream in 0..4 {
        let seqs: Vec<u64> = acks
            .iter()
            .filter(|a| a.record.stream == stream)
            .map(|a| a.record.seq)
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
}

/// fsync, dsync (RWF_DSYNC, acked on completion) and none (the control run) at depth.
#[test]
fn every_flush_method_at_depth_verifies() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    for flush in ["fsync", "dsync", "none"] {
        let t = d.path().join(format!("{flush}.img"));
        let wr = write(
            &w,
            &t,
            &[
                "--size",
                "8M",
                "--count",
                "600",
                "--iodepth",
                "8",
                "--flush",
                flush,
            ],
        );
        assert_eq!(wr.code, 0, "{flush}: {wr:?}");
        let j = wr.json();
        assert_eq!(j["records_acked"], 600, "{flush}");
        // Only the flushing methods have a flush interval.
        assert_eq!(
            j["flush_every"].is_null(),
            flush != "fsync",
            "{flush}: {wr:?}"
        );
        let v = verify(&w, &t, &["--run", j["run_id"].as_str().unwrap()]);
        assert_eq!(v.code, 0, "{flush}: {v:?}");
        assert_eq!(v.json()["counts"]["intact"], 600, "{flush}: {v:?}");
    }
}

#[test]
fn depth_32_to_a_loop_device_keeps_every_record() {
    if !skip_unless(
        is_root() && have_tool("losetup"),
        "needs root and losetup (a loop device)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let backing = d.path().join("loop.img");
    std::fs::write(&backing, vec![0u8; 32 << 20]).unwrap();
    let lo = LoopDev::attach(&backing, true);
    let dev = Path::new(lo.dev());
    let wr = write(&w, dev, &["--count", "3000", "--iodepth", "32"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    assert_eq!(wr.json()["engine"], "io_uring");
    assert_all_intact(&w, dev, 3000);
}

/// Bad values are refused before anything exists: exit 2, a message naming the option,
/// no target file created.
#[test]
fn bad_depth_values_are_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("never.img");
    let cases: [(&[&str], &str); 7] = [
        (&["--iodepth", "0"], "0 is not in 1..=1024"),
        (&["--iodepth", "1025"], "1025 is not in 1..=1024"),
        (
            &["--iodepth", "deep"],
            "invalid value 'deep' for '--iodepth <N>'",
        ),
        (&["--iodepth", "4", "--batch", "4"], "cannot be used with"),
        (&["--flush-every", "4"], "--iodepth N (N > 1)"),
        (
            &["--iodepth", "4", "--flush", "dsync", "--flush-every", "2"],
            "apply to --flush fdatasync and fsync",
        ),
        (
            &["--iodepth", "4", "--flush-within", "0"],
            "--flush-within must be longer than 0",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["--size", "1M", "--count", "10"];
        all.extend_from_slice(args);
        let r = write(&w, &t, &all);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains(says),
            "{args:?} should say {says:?}: {r:?}"
        );
        assert!(!t.exists(), "{args:?}: the target was created");
    }
}

/// Stream 0's 200th write fails (EBADF, test support) while 31 others are in flight:
/// exit 4, the failure named, nothing of seq 200 or later acknowledged, the writes in
/// flight with it reaped and counted, and what was acknowledged is intact.
#[test]
fn a_write_failing_at_depth_acks_nothing_after_it() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let out = Command::new(bin())
        .args(["write"])
        .arg(&t)
        .args([
            "--witness",
            &w.addr,
            "--json",
            "--size",
            "32M",
            "--count",
            "5000",
        ])
        .args(["--iodepth", "32"])
        .env(plugpull::write::fault::URING_FAIL_AT_WRITE, "0:200")
        .output()
        .unwrap();
    let wr = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(wr.code, 4, "{wr:?}");
    let j = wr.json();
    let failure = j["failure"].as_str().unwrap();
    assert!(failure.starts_with("write of stream 0 seq 200 "), "{wr:?}");
    let acked = j["records_acked"].as_u64().unwrap();
    assert!(acked > 0, "nothing acknowledged before the failure: {wr:?}");
    assert!(
        j["writes_reaped_after_failure"].as_u64().unwrap() >= 1,
        "{wr:?}"
    );
    assert!(
        wr.stderr.contains("were reaped, none acknowledged"),
        "{wr:?}"
    );
    let acks = witness_acks(&w, &wr);
    assert_eq!(acks.len() as u64, acked);
    assert!(
        acks.iter().all(|a| a.record.seq < 200),
        "acked at or past the failure"
    );
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(v.json()["counts"]["intact"].as_u64(), Some(acked), "{v:?}");
}

/// Ctrl-C at depth: the writes in flight are finished and flushed, exit 130, the last
/// acknowledged record is named, and every ack the witness holds is intact.
#[test]
fn ctrl_c_at_depth_exits_130_naming_the_last_durable_record() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let mut child = Command::new(bin())
        .args(["write"])
        .arg(&t)
        .args([
            "--witness",
            &w.addr,
            "--json",
            "--size",
            "256M",
            "--iodepth",
            "32",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_durable_acks(&w, 500, &mut child);
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let wr = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(wr.code, 130, "{wr:?}");
    assert!(
        wr.stderr.contains("interrupted (Ctrl-C)")
            && wr.stderr.contains("Last acknowledged record: stream 0 seq"),
        "{wr:?}"
    );
    let acked = wr.json()["records_acked"].as_u64().unwrap();
    assert_eq!(witness_acks(&w, &wr).len() as u64, acked);
    assert_all_intact(&w, &t, acked);
}

/// The simulated drive cut while the writer runs at depth 32; returns verify's exit
/// code and JSON after the drive is powered on again.
fn cut_at_depth(profile: &str, seed: u64) -> (i32, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let mut drive = SimDrive::start(d.path(), profile, seed, 8);
    let target = drive.file();
    let mut writer = Command::new(bin())
        .arg("write")
        .arg(&target)
        .args(["--witness", &w.addr, "--size", "8M", "--json", "--quiet"])
        .args(["--iodepth", "32", "--seed", &seed.to_string()])
        .arg("--destroy-data-on")
        .arg(&target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_durable_acks(&w, 300, &mut writer);
    drive.cut();
    let out = writer.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{profile}: the writer should have seen the cut: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    drive.unmount();
    let again = SimDrive::start(d.path(), "honest", seed + 1, 8);
    let v = verify_as_after_a_cut(&w, &again.file(), &["--read-timeout", "10s"]);
    (v.code, v.json())
}

#[test]
fn a_cut_at_depth_of_an_honest_drive_passes_and_of_a_lying_one_fails() {
    if !skip_unless(
        can_mount_fuse(),
        "needs root and /dev/fuse (the simulated drive)",
    ) {
        return;
    }
    let (code, v) = cut_at_depth("honest", 41);
    assert_eq!(
        (code, &v["verdict"]),
        (0, &serde_json::json!("PASS")),
        "honest: {v}"
    );
    let (code, v) = cut_at_depth("lying", 42);
    assert_eq!(
        (code, &v["verdict"]),
        (1, &serde_json::json!("FAIL")),
        "lying: {v}"
    );
    assert!(v["counts"]["lost"].as_u64().unwrap_or(0) > 0, "lying: {v}");
}
