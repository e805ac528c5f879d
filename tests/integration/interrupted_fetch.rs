//! Ctrl-C while a run is being fetched from the witness into a temporary file (`verify
//! --witness`, `replay --witness`): the command exits 130 and leaves nothing in TMPDIR,
//! neither the log nor the file the fetch was writing (its part file). The signal
//! handler exits at once, so no `Drop` removes them: the handler must know both names.

use crate::common;
use crate::fetch_streamed::stalling_witness;
use common::*;
use plugpull::record::RunId;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const RUN: RunId = RunId([0x37; 16]);

/// Runs `plugpull ARGS` with TMPDIR set to `tmp`, waits until the fetch has made a file
/// there, sends SIGINT, and checks the exit code and that `tmp` is left empty.
fn interrupted_mid_fetch(args: &[&str], tmp: &Path, what: &str) {
    let child = Command::new(bin())
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "the fetch to make its file in TMPDIR",
        || std::fs::read_dir(tmp).unwrap().next().is_some(),
    );
    // What the signal interrupts: the fetch writing its part file, the log not yet in.
    let made: Vec<String> = names_in(tmp);
    assert!(
        made.len() == 1 && made[0].ends_with(".part"),
        "{what}: {made:?}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{what}: {stderr}");
    assert!(stderr.contains("interrupted (Ctrl-C)"), "{what}: {stderr}");
    assert_eq!(
        names_in(tmp),
        Vec::<String>::new(),
        "{what}: left in TMPDIR (it had made {made:?}); {stderr}"
    );
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn ctrl_c_during_verifys_fetch_leaves_nothing_in_tmpdir() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let target = d.path().join("t.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    let addr = stalling_witness(RUN);
    let (t, run) = (target.to_str().unwrap(), RUN.hex());
    let args = [
        "verify",
        t,
        "--witness",
        &addr,
        "--run",
        &run,
        "--rehearsal",
    ];
    interrupted_mid_fetch(&args, &tmp, "verify");
}

#[test]
fn ctrl_c_during_replays_fetch_leaves_nothing_in_tmpdir() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // A log of one write and a flush: replay counts its entries before it fetches.
    let mut enc = plugpull::logwrites::encode::LogEncoder::new(512);
    enc.write(0, &[0u8; 4096], false);
    enc.flush();
    let log = d.path().join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    let addr = stalling_witness(RUN);
    let (l, run, scratch) = (log.to_str().unwrap(), RUN.hex(), d.path().to_str().unwrap());
    let args = [
        "replay",
        l,
        "--witness",
        &addr,
        "--run",
        &run,
        "--scratch-dir",
        scratch,
    ];
    interrupted_mid_fetch(&args, &tmp, "replay");
    assert_eq!(names_in(d.path()), ["lw.log", "tmp"]);
}
