//! Integration tests of the witness: the built `plugpull listen` binary against the
//! library client. Each test checks a guarantee from the design brief (2 and 8) and can
//! fail: they compare exact ack sequences and exact file bytes.

use crate::common;

use common::{InProcessWitness, Listen, WitnessProc, free_port, test_descriptor};
use plugpull::model::{Ack, RunDescriptor, RunSelector};
use plugpull::record::{RecordId, RunId};
use plugpull::wire::frame::{self, FrameType};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::client::{AckSender, ClientOptions, fetch};
use plugpull::witness::store::layout::log_path;
use plugpull::witness::store::reader::read_log_file;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

fn descriptor(run: u8, host: &str) -> RunDescriptor {
    let mut id = [run; 16];
    id[0] = 0xa0;
    let mut d = test_descriptor(RunId(id));
    d.host = host.into();
    d.started_at = format!("2025-01-01T00:00:{:02}Z", run % 60);
    d.device.serial = Some("TESTSERIAL".into());
    d.settings.streams = 2;
    d.settings.seed = 42;
    d.command = vec!["plugpull".into(), "write".into()];
    d
}

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: (i % 2) as u16,
            seq: i / 2,
            offset: (i % 100_000) * 4096,
            sectors: 8,
            write_time_ns: 1_700_000_000_000_000_000 + i * 1000,
        },
        flushed_ns: 1_700_000_000_000_000_000 + i * 1000 + 500,
    }
}

fn opts() -> ClientOptions {
    ClientOptions {
        heartbeat: Duration::from_millis(200),
        reconnect_backoff_max: Duration::from_millis(200),
        ..Default::default()
    }
}

fn send_run(addr: &str, d: &RunDescriptor, n: u64) {
    let s = AckSender::connect(addr, d, opts()).unwrap();
    for i in 0..n {
        s.push(ack(i));
    }
    let st = s.finish(Duration::from_secs(30)).unwrap();
    assert_eq!((st.pushed, st.durable), (n, n));
}

#[test]
fn round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let w = WitnessProc::start(&dir);
    let d = descriptor(1, "host-a");
    let n = 50_000;
    send_run(&w.addr, &d, n);
    let expect: Vec<Ack> = (0..n).map(ack).collect();

    // The witness logs the Bye after the writer has gone: a fetch right after finish()
    // may race it, so wait for the event (bounded; a fetch of 50,000 acks from a debug
    // build takes seconds on a loaded machine, and 10 s were seen to run out).
    let deadline = Instant::now() + Duration::from_secs(60);
    let got = loop {
        let got = fetch(&w.addr, &RunSelector::Run(d.run_id)).unwrap();
        if got.events.len() >= 2 || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(got.descriptor, d);
    assert!(got.acks == expect, "fetched acks differ");
    let kinds: Vec<_> = got.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["connect", "bye"]);

    let by_device = fetch(&w.addr, &RunSelector::LatestForDevice(d.device.key())).unwrap();
    assert_eq!(by_device.descriptor.run_id, d.run_id);

    let on_disk = read_log_file(&log_path(&dir, d.run_id)).unwrap();
    assert!(on_disk.acks == expect, "log file acks differ");

    // `plugpull fetch -o` writes the same format.
    let out = tmp.path().join("fetched.acklog");
    let st = Command::new(env!("CARGO_BIN_EXE_plugpull"))
        .args([
            "fetch",
            "--witness",
            &w.addr,
            "--run",
            &d.run_id.hex(),
            "-o",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(read_log_file(&out).unwrap().acks == expect);
}

#[test]
fn sigkill_under_load_loses_nothing_confirmed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut w = WitnessProc::start(&dir);
    let d = descriptor(2, "host-k");
    let sender = std::sync::Arc::new(AckSender::connect(&w.addr, &d, opts()).unwrap());
    let n: u64 = 400_000;
    // The kill lands while acks are flowing, whatever the machine's speed: the pusher
    // stops at a quarter of the run until the witness is killed (30,000 confirmed is
    // below that), then pushes the rest, which the restarted witness must take.
    let killed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pusher = {
        let s = sender.clone();
        let killed = killed.clone();
        std::thread::spawn(move || {
            for i in 0..n {
                if i == n / 4 {
                    while !killed.load(std::sync::atomic::Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                s.push(ack(i));
                if i % 1_000 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    // Kill while acks are flowing and some are confirmed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while sender.stats().durable < 30_000 {
        assert!(
            Instant::now() < deadline,
            "no progress: {:?}",
            sender.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let at_kill = sender.stats();
    let confirmed = at_kill.durable;
    w.kill();
    killed.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        at_kill.pushed < n,
        "the kill must land under load: {at_kill:?}"
    );
    let after_kill = read_log_file(&log_path(&dir, d.run_id)).unwrap();
    assert!(
        after_kill.acks.len() as u64 >= confirmed,
        "witness lost acks it confirmed: {} in the log, {confirmed} confirmed",
        after_kill.acks.len()
    );
    let expect: Vec<Ack> = (0..n).map(ack).collect();
    assert!(after_kill.acks[..] == expect[..after_kill.acks.len()]);

    // On the same address: the writer reconnects to where it was.
    let w2 = Listen::new(&dir).bind(&w.addr).start();
    let recovered = fetch(&w2.addr, &RunSelector::Run(d.run_id)).unwrap();
    assert!(recovered.acks.len() as u64 >= confirmed);
    assert!(recovered.acks[..] == expect[..recovered.acks.len()]);

    pusher.join().unwrap();
    let sender = std::sync::Arc::into_inner(sender).unwrap();
    let st = sender.finish(Duration::from_secs(60)).unwrap();
    assert_eq!((st.pushed, st.durable), (n, n));
    assert!(st.reconnects >= 1, "{st:?}");
    let all = fetch(&w2.addr, &RunSelector::Run(d.run_id)).unwrap();
    assert_eq!(all.acks.len() as u64, n, "exactly once");
    assert!(all.acks == expect, "in order");
    assert!(
        all.events
            .iter()
            .any(|e| e.kind == "connect" && e.detail.contains("resume=true")),
        "{:?}",
        all.events
    );
}

#[test]
fn torn_tail_is_truncated_on_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut w = WitnessProc::start(&dir);
    let d = descriptor(3, "host-t");
    send_run(&w.addr, &d, 1000);
    // The witness logs the Bye after the writer has gone: wait for it, so the log is
    // complete (a log whose connection is still open gets a restart event at start).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fetch(&w.addr, &RunSelector::Run(d.run_id))
        .unwrap()
        .events
        .iter()
        .any(|e| e.kind == "bye")
    {
        assert!(Instant::now() < deadline, "no bye event");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.kill();
    let path = log_path(&dir, d.run_id);
    let good = std::fs::read(&path).unwrap();

    // A partial Acks frame, as a crash mid-append leaves it.
    let mut torn = good.clone();
    let frame = Msg::Acks {
        first: 1000,
        acks: vec![ack(1000), ack(1001)],
    }
    .encode();
    torn.extend_from_slice(&frame[..frame.len() - 7]);
    std::fs::write(&path, &torn).unwrap();
    let w = WitnessProc::start(&dir);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        good,
        "torn frame not cut exactly"
    );
    let cut = format!(
        "recovered {}: cut a torn tail of {} bytes (",
        path.display(),
        torn.len() - good.len()
    );
    let line = w
        .log()
        .lines()
        .find(|l| l.contains(&cut))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no {cut:?} line:\n{}", w.log()));
    assert!(line.ends_with("; kept 1,000 acks"), "{line}");
    drop(w);

    // Garbage whose length prefix is absurd.
    let mut garbage = good.clone();
    garbage.extend_from_slice(&[0xff; 100]);
    std::fs::write(&path, &garbage).unwrap();
    let w = WitnessProc::start(&dir);
    assert_eq!(std::fs::read(&path).unwrap(), good);
    let got = fetch(&w.addr, &RunSelector::Run(d.run_id)).unwrap();
    assert_eq!(got.acks, (0..1000).map(ack).collect::<Vec<_>>());
}

/// Length of a log's header and descriptor frames: all that is fdatasync'd in the log
/// itself; later appends are made durable by the witness journal.
fn created_len(log: &[u8]) -> usize {
    let mut off = 0;
    for _ in 0..2 {
        match frame::decode(&log[off..]) {
            frame::Decoded::Frame(f) => off += f.len_bytes,
            _ => panic!("log lacks header and descriptor"),
        }
    }
    off
}

#[test]
fn power_loss_of_the_witness_host_loses_nothing_confirmed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut w = WitnessProc::start(&dir);
    let d = descriptor(4, "host-p");
    send_run(&w.addr, &d, 5000);
    // The run's connection ended before the loss (its Bye is durable): a log whose
    // connection is open gets a restart event at start, which this test is not about.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fetch(&w.addr, &RunSelector::Run(d.run_id))
        .unwrap()
        .events
        .iter()
        .any(|e| e.kind == "bye")
    {
        assert!(Instant::now() < deadline, "no bye event");
        std::thread::sleep(Duration::from_millis(20));
    }
    w.kill();
    // The host loses power: what was never fdatasync'd in the log itself is gone (the
    // run is far too small for a journal checkpoint to have synced it).
    let path = log_path(&dir, d.run_id);
    let log = std::fs::read(&path).unwrap();
    let expect: Vec<Ack> = (0..5000).map(ack).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(created_len(&log) as u64)
        .unwrap();
    // Reading the log in place already sees the journal...
    assert_eq!(read_log_file(&path).unwrap().acks, expect);
    // ...and the restarted witness has put every confirmed ack back into it.
    let w = WitnessProc::start(&dir);
    let replayed_line = w
        .log()
        .lines()
        .find(|l| l.contains("replayed "))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no replay line:\n{}", w.log()));
    // Into this run's log, nothing skipped.
    assert!(
        replayed_line.ends_with(" entries into 1 run logs"),
        "{replayed_line}"
    );
    // Replay restores what the journal confirmed, byte for byte. An event frame the
    // witness appended after the last commit (the writer's goodbye) was never synced, so
    // the replayed log may end before it: compare the bytes both have.
    let replayed = std::fs::read(&path).unwrap();
    let both = replayed.len().min(log.len());
    assert!(both > created_len(&log), "replay restored nothing");
    assert_eq!(replayed[..both], log[..both]);
    assert_eq!(read_log_file(&path).unwrap().acks, expect);
    let got = fetch(&w.addr, &RunSelector::Run(d.run_id)).unwrap();
    assert_eq!(got.acks, expect);
}

#[test]
fn a_second_witness_on_one_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let _w = WitnessProc::start(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_plugpull"))
        .args(["listen", "--bind", "127.0.0.1:0", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another plugpull witness is using"), "{err}");
}

/// Sends `bytes` on a fresh connection, optionally closes the write side, and returns
/// the Error message the witness answered with.
fn error_reply(addr: &str, bytes: &[u8], close_write: bool) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    if close_write {
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let mut off = 0;
    while off < got.len() {
        match frame::decode(&got[off..]) {
            frame::Decoded::Frame(f) => {
                off += f.len_bytes;
                if let Ok(Msg::Error { message }) = Msg::decode(&f) {
                    return message;
                }
            }
            other => panic!("bad reply {other:?}"),
        }
    }
    panic!("no Error frame in reply ({} bytes)", got.len())
}

#[test]
fn bad_input_gets_an_error_and_changes_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let w = WitnessProc::start(&dir);
    let a = descriptor(4, "host-a");
    send_run(&w.addr, &a, 500);
    let a_path = log_path(&dir, a.run_id);
    // The witness logs the Bye after the writer has gone; wait for it (as long as the
    // other tests here: a loaded machine can hold the witness's append for seconds).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !read_log_file(&a_path)
        .unwrap()
        .events
        .iter()
        .any(|e| e.kind == "bye")
    {
        assert!(Instant::now() < deadline, "no bye event");
        std::thread::sleep(Duration::from_millis(10));
    }
    let a_bytes = std::fs::read(&a_path).unwrap();

    // A live writer of another run, to show bad connections do not disturb it.
    let b = descriptor(5, "host-b");
    let live = AckSender::connect(&w.addr, &b, opts()).unwrap();
    for i in 0..100 {
        live.push(ack(i));
    }

    let mut bad_crc = Msg::Heartbeat.encode();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;

    let mut hello99 = Vec::new();
    let start = frame::begin_frame(&mut hello99, FrameType::Hello);
    hello99.extend_from_slice(&99u16.to_le_bytes());
    hello99.extend_from_slice(&[0, 0]);
    hello99.extend_from_slice(b"{}");
    frame::end_frame(&mut hello99, start);

    let acks_no_hello = Msg::Acks {
        first: 0,
        acks: vec![ack(0)],
    }
    .encode();
    let truncated = &acks_no_hello[..acks_no_hello.len() / 2];
    let oversized = u32::MAX.to_le_bytes();
    let mut forged = a.clone();
    forged.host = "mallory".into();
    let forged_hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: true,
        descriptor: forged,
    }
    .encode();
    let mut replay_new = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: a.clone(),
    }
    .encode();
    replay_new.extend_from_slice(&acks_no_hello);
    let mut gap = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: true,
        descriptor: descriptor(6, "host-c"),
    }
    .encode();
    gap.extend_from_slice(
        &Msg::Acks {
            first: 5,
            acks: vec![ack(5)],
        }
        .encode(),
    );

    let cases: [(&str, &[u8], bool, &str); 8] = [
        ("bad checksum", &bad_crc, false, "checksum"),
        ("wrong version", &hello99, false, "protocol version 99"),
        (
            "acks before hello",
            &acks_no_hello,
            false,
            "Acks before Hello",
        ),
        ("truncated frame", truncated, true, "middle of a frame"),
        ("oversized", &oversized, false, "exceeds the maximum"),
        (
            "forged descriptor",
            &forged_hello,
            false,
            "different run descriptor",
        ),
        (
            "replayed new run",
            &replay_new,
            false,
            "new run needs a new run id",
        ),
        ("gap", &gap, false, "gap"),
    ];
    for (name, bytes, close, want) in cases {
        let msg = error_reply(&w.addr, bytes, close);
        assert!(msg.contains(want), "{name}: got {msg:?}");
        assert_eq!(
            std::fs::read(&a_path).unwrap(),
            a_bytes,
            "{name} changed run A"
        );
        assert!(w.log().contains(want), "{name}: no log line:\n{}", w.log());
    }
    // The witness still serves: run A intact, the live writer finishes.
    let got = fetch(&w.addr, &RunSelector::Run(a.run_id)).unwrap();
    assert_eq!(got.acks, (0..500).map(ack).collect::<Vec<_>>());
    for i in 100..200 {
        live.push(ack(i));
    }
    let st = live.finish(Duration::from_secs(30)).unwrap();
    assert_eq!((st.durable, st.reconnects), (200, 0), "{st:?}");
    let got = fetch(&w.addr, &RunSelector::Run(b.run_id)).unwrap();
    assert_eq!(got.acks, (0..200).map(ack).collect::<Vec<_>>());
    // The gap run's log holds its connect and error but no ack.
    let c = read_log_file(&log_path(&dir, descriptor(6, "host-c").run_id)).unwrap();
    assert!(c.acks.is_empty());
    assert_eq!(std::fs::read(&a_path).unwrap(), a_bytes);
}

#[test]
fn unreachable_witness_gives_a_clear_error() {
    let port = free_port();
    let e = AckSender::connect(&format!("127.0.0.1:{port}"), &descriptor(7, "h"), opts())
        .err()
        .unwrap();
    let m = format!("{e:#}");
    assert!(m.contains("is `plugpull listen` running there?"), "{m}");
}

/// One witness process takes every kind of abuse in turn (junk, bad frames, a writer
/// that vanishes mid-frame, a writer that vanishes without a Bye, a burst of abandoned
/// connections); afterwards that same process (not a fresh one) is still running, still
/// in the foreground, and still serves a new writer and the runs it already held.
#[test]
fn witness_process_is_alive_after_all_that() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut w = WitnessProc::start(&dir);
    let a = descriptor(9, "host-alive");
    send_run(&w.addr, &a, 300);

    // Junk of every length, and frames that are wrong in each way.
    let mut rng = plugpull::rng::Rng::new(5);
    for n in [1usize, 3, 4, 17, 4096] {
        let junk: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        let mut s = TcpStream::connect(&w.addr).unwrap();
        let _ = s.write_all(&junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    }
    let mut bad_crc = Msg::Heartbeat.encode();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 1;
    assert!(error_reply(&w.addr, &bad_crc, false).contains("checksum"));
    assert!(error_reply(&w.addr, &u32::MAX.to_le_bytes(), false).contains("exceeds"));
    // A writer that dies in the middle of a frame, and one that dies without a Bye.
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: descriptor(10, "host-dies"),
    }
    .encode();
    let mut s = TcpStream::connect(&w.addr).unwrap();
    s.write_all(&hello[..hello.len() / 2]).unwrap();
    drop(s);
    let gone = AckSender::connect(&w.addr, &descriptor(11, "host-gone"), opts()).unwrap();
    for i in 0..50 {
        gone.push(ack(i));
    }
    drop(gone);
    // A burst of connections that say nothing and vanish.
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&w.addr).unwrap())
        .collect();
    drop(idle);

    // It still does its job: the run it held (a reply that comes after every attack
    // above was taken), and a new writer.
    let got = fetch(&w.addr, &RunSelector::Run(a.run_id)).unwrap();
    assert_eq!(got.acks, (0..300).map(ack).collect::<Vec<_>>());
    // And the process that answered is the one attacked.
    assert!(w.alive(), "the witness died: {}", w.log());
    assert_eq!(
        w.log().matches("listening on").count(),
        1,
        "the witness started more than once: {}",
        w.log()
    );
    let b = descriptor(12, "host-after");
    send_run(&w.addr, &b, 100);
    let got = fetch(&w.addr, &RunSelector::Run(b.run_id)).unwrap();
    assert_eq!(got.acks, (0..100).map(ack).collect::<Vec<_>>());
    assert!(w.alive(), "the witness died: {}", w.log());
}

/// One writer pushing as fast as it can: every ack ends up durable, none lost or
/// duplicated by the batching (the rate it prints is informational; the witness
/// benchmark proper is scripts/bench-witness.sh).
#[test]
fn perf_push_rate() {
    let tmp = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&tmp.path().join("w"));
    let d = descriptor(8, "host-p");
    let s = AckSender::connect(&w.addr, &d, opts()).unwrap();
    let n = 300_000u64;
    let t = Instant::now();
    for i in 0..n {
        s.push(ack(i));
    }
    let push_s = t.elapsed().as_secs_f64();
    let st = s.finish(Duration::from_secs(120)).unwrap();
    let all_s = t.elapsed().as_secs_f64();
    eprintln!(
        "pushed {n} acks in {push_s:.2}s ({:.0}/s); all durable after {all_s:.2}s ({:.0}/s)",
        n as f64 / push_s,
        n as f64 / all_s
    );
    assert_eq!(st.durable, n);
}

/// Reads frames from a raw connection until one arrives (or EOF).
fn next_msg(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Msg> {
    loop {
        if let frame::Decoded::Frame(f) = frame::decode(buf) {
            let n = f.len_bytes;
            let m = Msg::decode(&f).unwrap();
            buf.drain(..n);
            return Some(m);
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
}

#[test]
fn in_process_takeover_and_silent_writer_events() {
    let tmp = tempfile::tempdir().unwrap();
    let w = InProcessWitness::start(tmp.path());
    let addr = w.addr.clone();
    let d = descriptor(9, "host-x");
    let hello = |resume| {
        Msg::Hello {
            version: PROTOCOL_VERSION,
            resume,
            descriptor: d.clone(),
        }
        .encode()
    };
    let acks = |first: u64, n: u64| {
        Msg::Acks {
            first,
            acks: (first..first + n).map(ack).collect(),
        }
        .encode()
    };

    let mut c1 = TcpStream::connect(&addr).unwrap();
    c1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b1 = Vec::new();
    c1.write_all(&hello(false)).unwrap();
    assert!(matches!(
        next_msg(&mut c1, &mut b1),
        Some(Msg::Welcome {
            durable_acks: 0,
            ..
        })
    ));
    c1.write_all(&acks(0, 10)).unwrap();
    assert_eq!(
        next_msg(&mut c1, &mut b1),
        Some(Msg::Durable { durable_acks: 10 })
    );

    // The writer "reconnects" while c1 is still open: c2 takes over, c1 is closed.
    let mut c2 = TcpStream::connect(&addr).unwrap();
    c2.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b2 = Vec::new();
    c2.write_all(&hello(true)).unwrap();
    assert!(matches!(
        next_msg(&mut c2, &mut b2),
        Some(Msg::Welcome {
            durable_acks: 10,
            ..
        })
    ));
    assert_eq!(next_msg(&mut c1, &mut b1), None, "old connection closed");
    // Resend overlapping what is durable, plus new acks: deduplicated.
    c2.write_all(&acks(5, 15)).unwrap();
    assert_eq!(
        next_msg(&mut c2, &mut b2),
        Some(Msg::Durable { durable_acks: 20 })
    );
    // The writer falls silent without Bye (its host lost power).
    drop(c2);
    let closed = || {
        let got = fetch(&addr, &RunSelector::Run(d.run_id)).unwrap();
        got.events.last().is_some_and(|e| e.kind == "disconnect")
    };
    common::eventually(
        Duration::from_secs(20),
        "the witness logs the disconnect",
        closed,
    );

    let got = fetch(&addr, &RunSelector::Run(d.run_id)).unwrap();
    assert_eq!(got.acks, (0..20).map(ack).collect::<Vec<_>>());
    let last = got.events.last().unwrap();
    assert_eq!(last.kind, "disconnect", "{:?}", got.events);
    assert_eq!(last.durable_acks, 20);
    assert!(last.last_ack_at_ns.is_some());
    assert!(
        got.events.iter().any(|e| e.detail.contains("took over")),
        "{:?}",
        got.events
    );
    drop(w);
}

#[test]
fn many_writers_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let w = InProcessWitness::start(tmp.path());
    let addr = w.addr.clone();
    let runs: Vec<RunDescriptor> = (20..28).map(|r| descriptor(r, "host-m")).collect();
    std::thread::scope(|sc| {
        for (k, d) in runs.iter().enumerate() {
            let addr = &addr;
            sc.spawn(move || send_run(addr, d, 20_000 + k as u64));
        }
    });
    let mut heard = vec![];
    for (k, d) in runs.iter().enumerate() {
        let got = fetch(&addr, &RunSelector::Run(d.run_id)).unwrap();
        assert_eq!(got.descriptor, *d);
        assert!(got.acks == (0..20_000 + k as u64).map(ack).collect::<Vec<_>>());
        assert_eq!(got.events[0].kind, "connect");
        heard.push((got.events[0].at_ns, d.run_id.hex(), d.run_id));
    }
    // Latest for the device: the run whose first Hello the witness received last (its
    // own clock; the writers' started_at are not used), ties to the larger run id.
    let newest = heard.iter().max().unwrap().2;
    let latest = fetch(&addr, &RunSelector::LatestForDevice(runs[0].device.key())).unwrap();
    assert_eq!(latest.descriptor.run_id, newest);
    drop(w);
}

/// A batch bigger than the room left under `max_unconfirmed` must not wait for the
/// sender's next heartbeat: the acks queued before the pusher blocks are sent at once, so
/// Durable replies make room. (With a 30 s heartbeat, 40 batches of 8 under a limit of 4
/// took minutes when the sender was woken only after a whole batch.)
#[test]
fn a_batch_over_the_unconfirmed_limit_does_not_wait_for_heartbeats() {
    let tmp = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&tmp.path().join("w"));
    let d = descriptor(9, "host-batch");
    // A heartbeat no test waits for: a sender woken only by it sends nothing for 10
    // minutes, while 320 acks take a second or two on a loaded machine.
    let heartbeat = Duration::from_secs(600);
    let o = ClientOptions {
        heartbeat,
        max_unconfirmed: 4,
        ..Default::default()
    };
    let addr = w.addr.clone();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let s = AckSender::connect(&addr, &d, o).unwrap();
        let acks: Vec<Ack> = (0..320).map(ack).collect();
        for batch in acks.chunks(8) {
            s.push_all(batch);
        }
        let _ = done_tx.send(s.finish(Duration::from_secs(60)));
    });
    // A watchdog, not a measurement: 60 s is far above the run's own time and a tenth
    // of one heartbeat, which a pusher that waits for heartbeats needs 40 of.
    let st = match done.recv_timeout(Duration::from_secs(60)) {
        Ok(st) => st.unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "320 acks not durable within 60 s: the pusher waits for heartbeats ({heartbeat:?})"
            )
        }
        Err(e) => panic!("the pushing thread failed: {e}"),
    };
    assert_eq!((st.pushed, st.durable), (320, 320));
}
