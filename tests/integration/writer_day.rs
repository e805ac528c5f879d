//! The writer off a terminal and on Ctrl-C ("never wonder what happened"): with
//! stderr a pipe, `write` prints a timestamped line for every change of state, in order;
//! SIGINT stops it with exit 130 and names the last record durable at the witness.

use crate::common;

use common::{WitnessProc, bin};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A writer on `target` with its stderr in `log` (a file: not a terminal).
fn start_writer(w: &WitnessProc, target: &Path, log: &Path, extra: &[&str]) -> Child {
    Command::new(bin())
        .arg("write")
        .arg(target)
        .args(["--witness", &w.addr, "--size", "64M"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// Waits until `log` contains `what`; panics with the log after 60 s.
fn wait_for(log: &Path, what: &str) {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(what) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no {what:?} within 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `line` starts with a `YYYY-MM-DD HH:MM:SS.mmm +HH:MM ` timestamp (local
/// time, the zone named).
fn timestamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 31
        && b[..30].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 | 23 => *c == b' ',
            13 | 16 | 27 => *c == b':',
            19 => *c == b'.',
            24 => *c == b'+' || *c == b'-',
            _ => c.is_ascii_digit(),
        })
        && b[30] == b' '
}

#[test]
fn off_a_terminal_the_writer_logs_every_state_change_in_order() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let log = d.path().join("write.log");
    let mut writer = start_writer(
        &w,
        &target,
        &log,
        &["--max-unconfirmed", "500", "--duration", "5m"],
    );
    common::wait_for_durable_acks(&w, 100, &mut writer);
    w.kill();
    wait_for(&log, "writes paused");
    w.restart();
    wait_for(&log, "writes resumed");
    kill(Pid::from_raw(writer.id() as i32), Signal::SIGTERM).unwrap();
    let status = writer.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{text}");
    for line in text.lines() {
        assert!(
            timestamped(line),
            "a line without a timestamp: {line:?}\n{text}"
        );
    }
    let order = [
        "plugpull write: started run ",
        "plugpull write: witness lost (",
        "plugpull write: reconnecting to the witness at ",
        "plugpull write: writes paused: ",
        "plugpull write: witness back at ",
        "plugpull write: writes resumed: ",
        "plugpull write: stopped (interrupted): ",
    ];
    let mut at = 0;
    for what in order {
        let found = text[at..]
            .find(what)
            .unwrap_or_else(|| panic!("no {what:?} after byte {at}:\n{text}"));
        at += found + what.len();
    }
    assert!(text.contains("durable at the witness"), "{text}");
}

/// The run id in the writer's "started run ID" line.
fn run_id(log: &str) -> plugpull::record::RunId {
    let rest = &log[log.find("started run ").expect("a started line") + 12..];
    plugpull::record::RunId::parse(&rest[..32]).expect("a run id")
}

#[test]
fn ctrl_c_stops_the_writer_with_130_and_names_the_last_durable_record() {
    use plugpull::model::RunSelector;
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let log = d.path().join("write.log");
    let mut writer = start_writer(&w, &target, &log, &["--duration", "5m"]);
    common::wait_for_durable_acks(&w, 50, &mut writer);
    kill(Pid::from_raw(writer.id() as i32), Signal::SIGINT).unwrap();
    let status = writer.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(130), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("interrupted (Ctrl-C): stopped writing"))
        .unwrap_or_else(|| panic!("no interrupted line:\n{text}"));
    let held = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id(&text))).unwrap();
    let last = held.acks.last().expect("the witness holds acks");
    let named = format!(
        "Last acknowledged record: stream {} seq {} at offset {} ",
        last.record.stream, last.record.seq, last.record.offset
    );
    assert!(line.contains(&named), "{named:?} not in {line:?}");
    assert!(line.contains("), durable at the witness."), "{line:?}");
}

/// Ctrl-C while the witness is away: the writer stops within seconds (not after the
/// normal 30 s wait), exits 130, and says how much the witness holds.
#[test]
fn ctrl_c_with_the_witness_away_stops_promptly_and_says_what_the_witness_holds() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let log = d.path().join("write.log");
    let mut writer = start_writer(
        &w,
        &target,
        &log,
        &["--max-unconfirmed", "200", "--duration", "5m"],
    );
    common::wait_for_durable_acks(&w, 50, &mut writer);
    w.kill();
    wait_for(&log, "writes paused");
    let t0 = std::time::Instant::now();
    kill(Pid::from_raw(writer.id() as i32), Signal::SIGINT).unwrap();
    let status = writer.wait().unwrap();
    let took = t0.elapsed();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(130), "{text}");
    // Ctrl-C waits at most 5 s for the witness; without it the writer would wait the
    // normal 30 s. 15 s is three times the one and half the other: a loaded machine
    // stretches the 5 s wait by seconds, not by 10.
    assert!(took < Duration::from_secs(15), "took {took:?}:\n{text}");
    let line = text
        .lines()
        .find(|l| l.contains("interrupted (Ctrl-C): stopped writing"))
        .unwrap_or_else(|| panic!("no interrupted line:\n{text}"));
    assert!(line.contains("the witness confirmed only "), "{line}");
    assert!(line.contains("verify judges only those"), "{line}");
}

#[test]
fn ctrl_c_stops_verify_with_130_and_says_there_is_no_verdict() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = d.path().join("t.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    // A "witness" that accepts and never answers keeps verify waiting for its acks.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let verify = Command::new(bin())
        .arg("verify")
        .arg(&target)
        .arg("--rehearsal")
        .args(["--witness", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut conn, _) = silent.accept().unwrap();
    // The event: verify's request has arrived, so verify is waiting for the answer (its
    // Ctrl-C handler is installed before it connects).
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut conn, &mut first).expect("verify sent no request");
    kill(Pid::from_raw(verify.id() as i32), Signal::SIGINT).unwrap();
    let out = verify.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("plugpull verify: interrupted (Ctrl-C): no verdict"),
        "{stderr}"
    );
}

/// Ctrl-C while the target file is being preallocated: exit 130 and "nothing was
/// written", the half-made file removed (so a retry is not refused as a foreign file).
#[test]
fn ctrl_c_during_preallocation_exits_130_and_removes_the_new_file() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let writer = Command::new(bin())
        .arg("write")
        .arg(&target)
        .args(["--witness", &w.addr, "--size", "2G", "--duration", "10s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The event: the writer has made its file, so preallocation is under way.
    let t0 = std::time::Instant::now();
    while !target.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the writer never made {}",
            target.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let size_at_signal = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
    kill(Pid::from_raw(writer.id() as i32), Signal::SIGINT).unwrap();
    let out = writer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{size_at_signal} bytes at SIGINT: {stderr}"
    );
    if stderr.contains("interrupted before the first record") {
        assert!(
            !target.exists(),
            "the half-made file is still there: {stderr}"
        );
    } else {
        // The 2 GiB fill finished before the signal (a very fast disk): a normal
        // interrupted run, still 130.
        assert!(stderr.contains("interrupted (Ctrl-C)"), "{stderr}");
    }
}
