//! SIGINT and SIGTERM at the moments a command holds temporary files: while a run is
//! fetched from a witness that hangs mid-fetch, and while verify judges. What is left in
//! TMPDIR (private to each test), in replay's `--scratch-dir` and beside `fetch -o FILE`.

use super::names_in;
use crate::common::*;
use crate::fetch_streamed::{device_ack, stalling_witness};
use nix::sys::signal::Signal;
use plugpull::model::Ack;
use plugpull::record::RunId;
use plugpull::wire::msg::Msg;
use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const RUN: RunId = RunId([0x5a; 16]);

fn spawn_in(args: &[&str], tmp: &Path) -> Child {
    Command::new(bin())
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

/// Waits until `dir` holds a file whose name ends with `suffix` (made by `child`).
fn wait_for_file(dir: &Path, suffix: &str, child: &mut Child) {
    eventually(Duration::from_secs(60), "the command's file", || {
        assert!(child.try_wait().unwrap().is_none(), "it ended first");
        names_in(dir).iter().any(|n| n.ends_with(suffix))
    });
}

/// The exit code and stderr after `sig`, and what `dirs` hold then.
fn stopped_by(child: Child, sig: Signal, dirs: &[&Path]) -> (Option<i32>, String, Vec<String>) {
    signal(&child, sig);
    let out = child.wait_with_output().unwrap();
    let left = dirs.iter().flat_map(|d| names_in(d)).collect();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        left,
    )
}

/// SIGTERM (what `kill`, systemd and a CI timeout send) while verify and replay fetch:
/// the temporary files go as on Ctrl-C, and the exit code says SIGTERM (143).
#[test]
fn sigterm_during_a_fetch_leaves_nothing_in_tmpdir() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("t.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    let mut enc = plugpull::logwrites::encode::LogEncoder::new(512);
    enc.write(0, &[0u8; 4096], false);
    enc.flush();
    let log = d.path().join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    let scratch = d.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let (t, l, s, run) = (
        target.to_str().unwrap(),
        log.to_str().unwrap(),
        scratch.to_str().unwrap(),
        RUN.hex(),
    );
    for (what, sig) in [("SIGTERM", Signal::SIGTERM), ("SIGINT", Signal::SIGINT)] {
        let addr = stalling_witness(RUN);
        let verify = [
            "verify",
            t,
            "--witness",
            &addr,
            "--run",
            &run,
            "--rehearsal",
        ];
        let addr2 = stalling_witness(RUN);
        let replay = [
            "replay",
            l,
            "--witness",
            &addr2,
            "--run",
            &run,
            "--scratch-dir",
            s,
        ];
        for (cmd, args) in [("verify", &verify[..]), ("replay", &replay[..])] {
            let tmp = tempfile::tempdir().unwrap();
            let mut child = spawn_in(args, tmp.path());
            wait_for_file(tmp.path(), ".part", &mut child);
            let (code, stderr, left) = stopped_by(child, sig, &[tmp.path(), &scratch]);
            let want = if sig == Signal::SIGTERM { 143 } else { 130 };
            assert_eq!(code, Some(want), "{cmd}, {what}: {stderr}");
            let said = if sig == Signal::SIGTERM {
                "terminated (SIGTERM)"
            } else {
                "interrupted (Ctrl-C)"
            };
            assert!(stderr.contains(said), "{cmd}, {what}: {stderr}");
            assert_eq!(
                left,
                Vec::<String>::new(),
                "{cmd}, {what}: left behind; {stderr}"
            );
        }
    }
}

/// Ctrl-C and SIGTERM once the fetch is done and verify judges the run (a region of
/// several GiB read whole): the fetched log goes too.
#[test]
fn a_signal_while_verify_judges_leaves_nothing_in_tmpdir() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("big.img");
    let wr = write(&w, &target, &["--size", "32G", "--count", "200"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let t = target.to_str().unwrap();
    let args = [
        "verify",
        t,
        "--witness",
        &w.addr,
        "--rehearsal",
        "--scan-region",
    ];
    for (sig, want) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = spawn_in(&args, tmp.path());
        // The fetch is done when the log has its own name (the part file renamed).
        wait_for_file(tmp.path(), ".acklog", &mut child);
        std::thread::sleep(Duration::from_millis(200));
        let (code, stderr, left) = stopped_by(child, sig, &[tmp.path()]);
        assert_eq!(
            code,
            Some(want),
            "{sig}: still judging when signalled? {stderr}"
        );
        assert_eq!(left, Vec::<String>::new(), "{sig}: left behind; {stderr}");
    }
}

/// `plugpull fetch -o FILE` stopped mid-fetch: nothing beside FILE (no partial output
/// under FILE's name or another), nothing in TMPDIR.
#[test]
fn a_signal_during_fetch_to_a_file_leaves_nothing_beside_it() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let d = tempfile::tempdir().unwrap();
        let (tmp, out_dir) = (d.path().join("tmp"), d.path().join("out"));
        std::fs::create_dir(&tmp).unwrap();
        std::fs::create_dir(&out_dir).unwrap();
        let out = out_dir.join("run.acklog");
        let addr = stalling_witness(RUN);
        let (o, run) = (out.to_str().unwrap(), RUN.hex());
        let args = ["fetch", "--witness", &addr, "--run", &run, "-o", o];
        let mut child = spawn_in(&args, &tmp);
        eventually(Duration::from_secs(60), "the fetch's file", || {
            assert!(child.try_wait().unwrap().is_none(), "it ended first");
            !names_in(&out_dir).is_empty()
        });
        let (code, stderr, left) = stopped_by(child, sig, &[&tmp, &out_dir]);
        assert!(code != Some(0), "{sig}: {stderr}");
        assert_eq!(left, Vec::<String>::new(), "{sig}: left behind; {stderr}");
    }
}

/// Ctrl-C and SIGTERM while verify (no `--run`: the run chosen by the target's stamps)
/// fetches a later run of the same drive to see whether the target carries it
/// (`verify::witnessed::newest_carried`): the run it holds and the later one's part
/// file both go. The witness sends run X whole, listing a later run Y, and hangs in
/// the middle of Y.
#[test]
fn a_signal_while_a_later_run_is_fetched_leaves_nothing_in_tmpdir() {
    use plugpull::model::{RunLog, RunSelector, WitnessEvent};
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let wr = write(&w, &target, &["--size", "4M", "--count", "200"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let x = RunId::parse(wr.json()["run_id"].as_str().unwrap()).unwrap();
    let log: RunLog = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(x)).unwrap();
    let y = RunId([0x6b; 16]);
    let end_ns = log.events.iter().map(|e| e.at_ns).max().unwrap_or(0);
    let later = WitnessEvent {
        at_ns: end_ns + 1_000_000,
        kind: plugpull::model::LATER_RUN_EVENT.into(),
        peer: String::new(),
        durable_acks: 0,
        last_ack_at_ns: None,
        last_frame_at_ns: None,
        detail: y.hex(),
    };
    let mut whole_x = Msg::FetchRun(log.descriptor.clone()).encode();
    whole_x.extend(
        Msg::Acks {
            first: 0,
            acks: log.acks.clone(),
        }
        .encode(),
    );
    for e in log.events.iter().chain([&later]) {
        whole_x.extend(Msg::Event(e.clone()).encode());
    }
    whole_x.extend(
        Msg::FetchEnd {
            acks: log.acks.len() as u64,
        }
        .encode(),
    );
    for (sig, want) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let (whole_x, descriptor) = (whole_x.clone(), log.descriptor.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut s) = conn else { return };
                let asked = crate::verify_streamed_attacks::read_msg(&mut s);
                let reply = match asked {
                    Some(Msg::Fetch(RunSelector::Run(r))) if r == x => whole_x.clone(),
                    Some(Msg::Fetch(RunSelector::Run(r))) if r == y => {
                        // Y's descriptor and a frame of acks, then nothing: hung.
                        let mut d = descriptor.clone();
                        d.run_id = y;
                        let mut part = Msg::FetchRun(d).encode();
                        let acks: Vec<Ack> = (1..4097).map(device_ack).collect();
                        part.extend(Msg::Acks { first: 1, acks }.encode());
                        let _ = s.write_all(&part);
                        std::thread::sleep(Duration::from_secs(120));
                        continue;
                    }
                    _ => crate::verify_streamed_attacks::no_run_for_device(),
                };
                let _ = s.write_all(&reply);
            }
        });
        let tmp = tempfile::tempdir().unwrap();
        let t = target.to_str().unwrap();
        let mut child = spawn_in(
            &["verify", t, "--witness", &addr, "--rehearsal"],
            tmp.path(),
        );
        // X's log whole and Y's part file begun.
        eventually(Duration::from_secs(60), "the later run's part file", || {
            assert!(child.try_wait().unwrap().is_none(), "it ended first");
            let names = names_in(tmp.path());
            names
                .iter()
                .any(|n| n.contains("-later-") && n.ends_with(".part"))
                && names
                    .iter()
                    .any(|n| n.contains("-verify-") && n.ends_with(".acklog"))
        });
        let (code, stderr, left) = stopped_by(child, sig, &[tmp.path()]);
        assert_eq!(code, Some(want), "{sig}: {stderr}");
        assert_eq!(left, Vec::<String>::new(), "{sig}: left behind; {stderr}");
    }
}
