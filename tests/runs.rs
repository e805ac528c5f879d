//! `plugpull runs`: the runs a witness holds, newest first, with their acks and how far
//! they are durable, as text and JSON, with and without a key.

mod common;

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
    // The witness does not know verdicts, so the list does not invent one.
    assert!(runs[0].get("verdict").is_none());

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
