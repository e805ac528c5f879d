//! `plugpull runs`: the runs a witness holds, newest first, with their acks and how far
//! they are durable, as text and JSON, with and without a key.

use crate::common;

use common::{Listen, WitnessProc};

fn write(addr: &str, target: &std::path::Path, count: &str, key: Option<&std::path::Path>) {
    let mut args = vec![
        "write".to_string(),
        target.display().to_string(),
        "--witness".into(),
        addr.into(),
        "--size".into(),
        "4M".into(),
        "--count".into(),
        count.into(),
        "--quiet".into(),
    ];
    if let Some(k) = key {
        args.extend(["--key-file".into(), k.display().to_string()]);
    }
    let r = common::run(args);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn runs_lists_every_run_newest_first() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let (a, b) = (d.path().join("a.img"), d.path().join("b.img"));
    write(&w.addr, &a, "100", None);
    write(&w.addr, &b, "50", None);

    let r = common::run(["runs", "--witness", &w.addr, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["format"], "plugpull-runs/1");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v:#}");
    // Newest first: b was written last.
    assert_eq!(runs[0]["acks"], 50, "{v:#}");
    assert_eq!(runs[1]["acks"], 100, "{v:#}");
    assert!(
        runs[0]["drive"].as_str().unwrap().contains("b.img"),
        "{v:#}"
    );
    assert!(runs[0]["durable_up_to_ns"].as_u64().unwrap() > 0);
    assert_eq!(runs[0]["log_damaged"], false);
    // Nothing was verified yet, so the list does not invent a verdict.
    assert!(runs[0]["verified"].is_null(), "{v:#}");
    assert!(runs[1]["verified"].is_null(), "{v:#}");

    let t = common::run(["runs", "--witness", &w.addr]);
    assert_eq!(t.code, 0, "{t:?}");
    let lines: Vec<&str> = t.stdout.lines().collect();
    assert!(lines[0].starts_with("run "), "{t:?}");
    assert!(
        lines[1].starts_with(runs[0]["run_id"].as_str().unwrap()),
        "{t:?}"
    );
    assert!(
        lines[2].starts_with(runs[1]["run_id"].as_str().unwrap()),
        "{t:?}"
    );
}

#[test]
fn runs_with_a_key_and_an_empty_witness() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = Listen::new(&d.path().join("w"))
        .key(b"0123456789abcdef0123456789abcdef")
        .start();
    let key = w.key_file();
    let r = common::run([
        "runs",
        "--witness",
        &w.addr,
        "--key-file",
        key.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "the witness holds no runs\n");
    write(&w.addr, &d.path().join("a.img"), "10", Some(&key));
    let r = common::run([
        "runs",
        "--witness",
        &w.addr,
        "--key-file",
        key.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["runs"][0]["acks"], 10);
    // Without the key the witness refuses.
    let r = common::run(["runs", "--witness", &w.addr]);
    assert_eq!(r.code, 2, "{r:?}");
}

/// verify tells the witness its verdict; `runs` shows the latest per run, and a run
/// nobody verified stays "not verified".
#[test]
fn runs_show_which_runs_were_verified_and_how() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let (a, b, c) = (
        d.path().join("a.img"),
        d.path().join("b.img"),
        d.path().join("c.img"),
    );
    write(&w.addr, &a, "40", None);
    write(&w.addr, &b, "40", None);
    write(&w.addr, &c, "40", None);
    let verify = |t: &std::path::Path| {
        common::run([
            "verify",
            t.to_str().unwrap(),
            "--rehearsal",
            "--witness",
            &w.addr,
            "--quiet",
        ])
    };
    let r = verify(&a);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("did not record"), "{r:?}");
    // b: PASS first, then the drive loses its records and verify says FAIL.
    assert_eq!(verify(&b).code, 0);
    std::fs::write(&b, vec![0u8; 4 << 20]).unwrap();
    assert_eq!(verify(&b).code, 1);

    let r = common::run(["runs", "--witness", &w.addr, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    let by_drive = |name: &str| {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["drive"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {v:#}"))
            .clone()
    };
    assert_eq!(by_drive("a.img")["verified"]["verdict"], "PASS", "{v:#}");
    assert_eq!(by_drive("a.img")["verified"]["failing"], 0, "{v:#}");
    assert_eq!(by_drive("b.img")["verified"]["verdict"], "FAIL", "{v:#}");
    assert_eq!(by_drive("b.img")["verified"]["failing"], 40, "{v:#}");
    assert!(by_drive("c.img")["verified"].is_null(), "{v:#}");

    let t = common::run(["runs", "--witness", &w.addr]);
    let line = |name: &str| {
        t.stdout
            .lines()
            .find(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("{name} missing: {t:?}"))
            .to_string()
    };
    assert!(
        t.stdout.lines().next().unwrap().contains("verified"),
        "{t:?}"
    );
    assert!(line("a.img").contains(" PASS "), "{t:?}");
    // The verdict's time carries its year (the header says UTC): "PASS 2026-12-02 02:52".
    let year = chrono::Utc::now().format("%Y").to_string();
    assert!(line("a.img").contains(&format!(" PASS {year}-")), "{t:?}");
    assert!(line("b.img").contains(" FAIL "), "{t:?}");
    assert!(line("c.img").contains("not verified"), "{t:?}");

    // verify from a fetched file (no witness) records nothing and says nothing about it.
    let acks = d.path().join("c.acks");
    let f = common::run([
        "fetch",
        "--witness",
        &w.addr,
        "--target",
        c.to_str().unwrap(),
        "-o",
        acks.to_str().unwrap(),
    ]);
    assert_eq!(f.code, 0, "{f:?}");
    let r = common::run([
        "verify",
        c.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        acks.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = common::run(["runs", "--witness", &w.addr, "--json"]).json();
    let c_run = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["drive"].as_str().unwrap().ends_with("c.img"))
        .unwrap()
        .clone();
    assert!(c_run["verified"].is_null(), "{v:#}");
}

/// A witness that cannot record the verdict costs a note on stderr, never the verdict or
/// its exit code; a verdict for a run the witness does not hold is refused.
#[test]
fn verify_keeps_its_verdict_when_the_witness_cannot_record_it() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let wdir = d.path().join("w");
    let w = WitnessProc::start(&wdir);
    let a = d.path().join("a.img");
    write(&w.addr, &a, "20", None);
    let v = common::run(["runs", "--witness", &w.addr, "--json"]).json();
    let run = v["runs"][0]["run_id"].as_str().unwrap().to_string();
    // A directory where the notes file should be: the append fails at the witness.
    std::fs::create_dir(wdir.join(format!("{run}.verdicts"))).unwrap();
    let r = common::run([
        "verify",
        a.to_str().unwrap(),
        "--rehearsal",
        "--witness",
        &w.addr,
        "--quiet",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("VERDICT: PASS"), "{r:?}");
    assert!(r.stderr.contains("the verdict stands"), "{r:?}");
    assert!(r.stderr.contains("did not record"), "{r:?}");

    let mark = plugpull::wire::msg::VerdictMark {
        run_id: "00".repeat(16),
        verdict: "PASS".into(),
        failing: 0,
        target: "x".into(),
        verified_at: "2026-11-30T00:00:00Z".into(),
    };
    let e = plugpull::witness::client::record_verdict(&w.addr, None, &mark).unwrap_err();
    assert!(format!("{e:#}").contains("does not hold"), "{e:#}");
    let mut big = mark.clone();
    big.run_id = run;
    big.target = "x".repeat(5000);
    let e = plugpull::witness::client::record_verdict(&w.addr, None, &big).unwrap_err();
    assert!(format!("{e:#}").contains("at most 4096"), "{e:#}");
}

/// `verify DIR` (the tree mode) tells the witness its verdict too.
#[test]
fn a_verified_tree_run_shows_as_verified() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let dir = d.path().join("tree");
    std::fs::create_dir(&dir).unwrap();
    let dir_s = dir.to_str().unwrap();
    let r = common::run(["write", dir_s, "--witness", &w.addr, "--files", "40", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = common::run(["verify", dir_s, "--rehearsal", "--witness", &w.addr]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("The storage under this directory"),
        "{r:?}"
    );
    let v = common::run(["runs", "--witness", &w.addr, "--json"]).json();
    assert_eq!(v["runs"][0]["verified"]["verdict"], "PASS", "{v:#}");
}

fn listed(addr: &str) -> Vec<serde_json::Value> {
    let r = common::run(["runs", "--witness", addr, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["runs"].as_array().unwrap().clone()
}

/// A listing goes on from where the last one stopped reading a clean log (an hour's log
/// took 31 s to list from the start), and still gives what reading it all would: the
/// count of a run that grows between listings, a log cut shorter than was read, and
/// damage appended after a listing.
#[test]
fn listing_again_reads_on_and_counts_what_a_full_read_would() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("g.img");
    let mut child = std::process::Command::new(common::bin())
        .arg("write")
        .arg(&target)
        .args([
            "--witness",
            &w.addr,
            "--size",
            "4M",
            "--duration",
            "3s",
            "--quiet",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    while child.try_wait().unwrap().is_none() {
        if let Some(r) = listed(&w.addr).first() {
            seen.push(r["acks"].as_u64().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let acked = serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["records_acked"]
        .as_u64()
        .unwrap();
    assert!(
        seen.windows(2).all(|p| p[0] <= p[1]),
        "counts of a growing run never shrink: {seen:?}"
    );
    let runs = listed(&w.addr);
    assert_eq!(runs[0]["acks"], acked, "listed while growing: {seen:?}");
    assert_eq!(runs[0]["log_damaged"], false);
    // The same again, read on from the end: nothing new, nothing counted twice.
    assert_eq!(listed(&w.addr)[0]["acks"], acked);

    let log = w
        .dir
        .join(format!("{}.acklog", runs[0]["run_id"].as_str().unwrap()));
    let len = std::fs::metadata(&log).unwrap().len();
    // Cut shorter than the listing read (mid-frame): read from the start again, the cut
    // frame a torn tail.
    let f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
    f.set_len(len / 2).unwrap();
    let cut = listed(&w.addr)[0]["acks"].as_u64().unwrap();
    assert!(cut > 0 && cut < acked, "{cut} of {acked} after the cut");
    // Damage appended after a listing is seen: more garbage than a torn commit leaves.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(&vec![0xA5; 33 << 20]).unwrap();
    drop(f);
    let r = &listed(&w.addr)[0];
    assert_eq!(r["acks"], cut, "{r}");
    assert_eq!(r["log_damaged"], true, "{r}");
}
