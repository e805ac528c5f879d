//! The writer off a terminal and on Ctrl-C (issue 16, "never wonder what happened"): with
//! stderr a pipe, `write` prints a timestamped line for every change of state, in order;
//! SIGINT stops it with exit 130 and names the last record durable at the witness.

mod common;

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

/// Whether `line` starts with a `YYYY-MM-DD HH:MM:SS.mmm ` timestamp.
fn timestamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 24
        && b[..23].iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            19 => *c == b'.',
            _ => c.is_ascii_digit(),
        })
        && b[23] == b' '
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
