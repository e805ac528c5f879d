//! Small command-line behaviours of issue 16: `fetch` names both ways to say which run,
//! `listen` without `--dir` uses a fixed, documented state directory.

mod common;

#[test]
fn fetch_without_run_or_target_names_both() {
    let r = common::run(["fetch", "--witness", "127.0.0.1:1", "-o", "/nonexistent/x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--run"), "{r:?}");
    assert!(r.stderr.contains("--target"), "{r:?}");
}
