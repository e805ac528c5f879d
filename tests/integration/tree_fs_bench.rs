//! `plugpull bench DIR` (`--tree` or not): the untar-shaped tree timed once per flush method, through
//! the built binary on a small tree (docs/bench.md). Checked: one row per method in the
//! documented order, each row wrote the whole plan (the same files and bytes as
//! `write DIR` would), the ratio to `none` and the 53,000-file extrapolation follow from
//! the row's own elapsed time, the text labels the extrapolation, and nothing of the
//! bench is left in DIR. Needs no root: the directory is a temporary one.

use crate::common;

use plugpull::tree::plan::{TreeScale, plan};

const FILES: u32 = 40;
const SEED: u64 = 11;

/// A scratch directory on tmpfs when there is one (fast syncs keep the test short).
fn scratch() -> tempfile::TempDir {
    if std::path::Path::new("/dev/shm").is_dir() {
        tempfile::tempdir_in("/dev/shm").unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

fn bench(dir: &std::path::Path, extra: &[&str]) -> common::Run {
    let mut args = vec!["bench".to_string(), dir.display().to_string()];
    args.extend(
        [
            "--tree",
            "--files",
            &FILES.to_string(),
            "--seed",
            &SEED.to_string(),
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    common::run(args)
}

#[test]
fn bench_tree_json_has_a_row_per_method_and_the_extrapolation() {
    let dir = scratch();
    let r = bench(dir.path(), &["--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["format"], "plugpull-bench-tree/1", "{v}");
    assert_eq!(v["seed"], SEED);
    assert_eq!(v["files"], FILES);
    assert_eq!(v["untar_files"], 53_000);
    let p = plan(SEED, TreeScale::scaled_down(FILES));
    let versions = p.files().count() as u64;
    let rows = v["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().map(|r| r["flush"].as_str().unwrap()).collect();
    assert_eq!(names, ["none", "fsync", "fdatasync", "dsync"]);
    let none_s = rows[0]["elapsed_s"].as_f64().unwrap();
    for row in rows {
        assert!(row["error"].is_null(), "{row}");
        assert_eq!(
            row["files"], versions,
            "every file version of the plan: {row}"
        );
        assert_eq!(row["bytes"], p.bytes(), "{row}");
        let s = row["elapsed_s"].as_f64().unwrap();
        assert!(s > 0.0, "{row}");
        let x = row["untar_extrapolated_s"].as_f64().unwrap();
        assert!(
            (x - s * 53_000.0 / FILES as f64).abs() < 1e-6 * x.max(1.0),
            "extrapolated = elapsed x 53,000 / files: {row}"
        );
        let fps = row["files_per_s"].as_f64().unwrap();
        assert!(
            (fps - versions as f64 / s).abs() < 1e-6 * fps.max(1.0),
            "{row}"
        );
        match row["flush"].as_str().unwrap() {
            "none" => {
                assert!(row["ratio_to_none"].is_null(), "{row}");
                assert_eq!(
                    row["sync"]["latency_us_max"], 0.0,
                    "none syncs nothing: {row}"
                );
            }
            _ => {
                let ratio = row["ratio_to_none"].as_f64().unwrap();
                assert!((ratio - s / none_s).abs() < 1e-6 * ratio, "{row}");
                assert!(
                    row["sync"]["latency_us_max"].as_f64().unwrap() > 0.0,
                    "{row}"
                );
            }
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "bench left {left:?} in DIR");
}

#[test]
fn bench_tree_text_labels_the_extrapolation_and_reads_it() {
    let dir = scratch();
    let r = bench(dir.path(), &["--quiet"]);
    assert_eq!(r.code, 0, "{r:?}");
    for want in [
        "files/s",
        "MB/s",
        "sync p50",
        "sync p99",
        "x none",
        "53,000 files",
        "is extrapolated from 40 files",
        "took",
        "plugpull verify DIR",
    ] {
        assert!(r.stdout.contains(want), "no {want:?} in:\n{}", r.stdout);
    }
    for m in ["none", "fsync", "fdatasync", "dsync"] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(m)),
            "no {m} row:\n{}",
            r.stdout
        );
    }
}

#[test]
fn bench_tree_refuses_a_file_and_files_without_tree() {
    let dir = scratch();
    let f = dir.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    let r = common::run(["bench".as_ref(), f.as_os_str(), "--tree".as_ref()]);
    assert_eq!(r.code, 2, "a file is not a tree target: {r:?}");
    assert!(r.stderr.contains("not a directory"), "{r:?}");
    let r = common::run([
        "bench".as_ref(),
        f.as_os_str(),
        "--files".as_ref(),
        "5".as_ref(),
    ]);
    assert_eq!(r.code, 2, "--files on a file: {r:?}");
    assert!(r.stderr.contains("tree bench of a directory"), "{r:?}");
    let r = common::run(["bench".as_ref(), f.as_os_str(), "--in-file".as_ref()]);
    assert_eq!(r.code, 2, "--in-file on a file: {r:?}");
    assert!(r.stderr.contains("is for a directory target"), "{r:?}");
    assert_eq!(std::fs::read(&f).unwrap(), b"x", "the file is untouched");
}

/// A directory gets the tree bench without `--tree` (the untar timing is what a
/// directory is for); options of the device tables are refused with the flag that gives
/// them, before anything is written.
#[test]
fn a_directory_gets_the_tree_bench_by_default() {
    let dir = scratch();
    let r = common::run([
        "bench",
        &dir.path().display().to_string(),
        "--files",
        "12",
        "--seed",
        "3",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["format"], "plugpull-bench-tree/1", "{v}");
    assert_eq!(v["files"], 12);
    for table_flag in [
        &["--only", "sweep"][..],
        &["--iops"],
        &["--size", "16M"],
        &["--flush", "fsync"],
    ] {
        let mut args = vec!["bench".to_string(), dir.path().display().to_string()];
        args.extend(table_flag.iter().map(|s| s.to_string()));
        let r = common::run(args);
        assert_eq!(r.code, 2, "{table_flag:?}: {r:?}");
        assert!(
            r.stderr.contains(table_flag[0]) && r.stderr.contains("--in-file"),
            "{table_flag:?} names itself and the way to the tables: {r:?}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "bench left {left:?} in DIR");
}

#[test]
fn bench_tree_never_deletes_a_directory_it_did_not_create() {
    let dir = scratch();
    // The name an older build used (method and the process id, which `exec` keeps),
    // made in advance with someone's work in it.
    let script = format!(
        "mkdir -p \"$1\"/plugpull-bench-tree-fsync-$$/thesis && echo x > \
         \"$1\"/plugpull-bench-tree-fsync-$$/thesis/ch1.tex && echo $$ && \
         exec \"$2\" bench \"$1\" --tree --files {FILES} --seed {SEED} --quiet"
    );
    let o = std::process::Command::new("bash")
        .args(["-c", &script, "bash"])
        .arg(dir.path())
        .arg(common::bin())
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&o.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let mine = dir
        .path()
        .join(format!("plugpull-bench-tree-fsync-{pid}/thesis/ch1.tex"));
    assert_eq!(
        std::fs::read_to_string(&mine).ok().as_deref(),
        Some("x\n"),
        "{o:?}"
    );
    assert!(o.status.success(), "{o:?}");
    // Only the user's directory is left.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}
