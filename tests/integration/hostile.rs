//! Hostile peers against the built `plugpull listen --key-file`, and hostile targets
//! against `plugpull verify`. Every witness case checks the same three things (design
//! guarantee 8): the peer gets a clear Error, the witness stays up and keeps serving a
//! live writer, and another run's log is byte-identical before and after.

use crate::common;

use common::{Listen, WitnessProc, run, test_descriptor};
use plugpull::model::{Ack, RunDescriptor, RunSelector};
use plugpull::record::{RecordId, RunId};
use plugpull::wire::auth::{Key, Session};
use plugpull::wire::frame::{self, FrameType};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::client::{AckSender, ClientOptions, fetch_with_key};
use plugpull::witness::store::layout::{LOG_EXTENSION, log_path};
use plugpull::witness::store::reader::read_log_file;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const SECRET: &[u8] = b"hostile-test-key-0123456789abcdef";

fn descriptor(run: u8) -> RunDescriptor {
    let mut id = [run; 16];
    id[0] = 0xb0;
    let mut d = test_descriptor(RunId(id));
    d.host = "hostile".into();
    d.started_at = format!("2025-01-01T00:00:{:02}Z", run % 60);
    d.device.target = "/tmp/h.img".into();
    d.device.serial = Some(format!("H{run}"));
    d
}

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: (i % 1000) * 4096,
            sectors: 8,
            write_time_ns: 1_000 + i,
        },
        flushed_ns: 2_000 + i,
    }
}

fn key() -> Key {
    Key::from_secret(SECRET).unwrap()
}

fn opts(key: Option<Key>) -> ClientOptions {
    ClientOptions {
        heartbeat: Duration::from_millis(200),
        reconnect_backoff_max: Duration::from_millis(200),
        key,
        ..Default::default()
    }
}

/// A keyed witness, one finished run whose log must never change, and a live writer
/// pushing acks for the whole test.
struct Harness {
    w: WitnessProc,
    addr: String,
    dir: PathBuf,
    done_log: PathBuf,
    done_bytes: Vec<u8>,
    live: Option<(
        Arc<AckSender>,
        Arc<AtomicBool>,
        std::thread::JoinHandle<u64>,
    )>,
}

impl Harness {
    fn start(extra: &[&str]) -> Harness {
        let w = Listen::temporary().key(SECRET).args(extra).start();
        let (addr, dir) = (w.addr.clone(), w.dir.clone());
        // The finished run.
        let d = descriptor(1);
        let s = AckSender::connect(&addr, &d, opts(Some(key()))).unwrap();
        for i in 0..5_000 {
            s.push(ack(i));
        }
        s.finish(Duration::from_secs(30)).unwrap();
        let done_log = log_path(&dir, d.run_id);
        // The Bye event is logged after the writer leaves, as the run's last frame: wait
        // until the file's own bytes end with it whole (read from a copy, so no journal
        // is overlaid). A loaded machine can hold the witness's append for seconds.
        let copy = tempfile::NamedTempFile::new().unwrap();
        let t0 = Instant::now();
        let done_bytes = loop {
            let now = std::fs::read(&done_log).unwrap();
            std::fs::write(copy.path(), &now).unwrap();
            let last = read_log_file(copy.path())
                .ok()
                .and_then(|l| l.events.last().cloned());
            if last.is_some_and(|e| e.kind == "bye") {
                break now;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the finished run's log has no bye after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        // The live writer.
        let sender =
            Arc::new(AckSender::connect(&addr, &descriptor(2), opts(Some(key()))).unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let h = {
            let (s, stop) = (sender.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    s.push(ack(i));
                    i += 1;
                    if i % 100 == 0 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                i
            })
        };
        Harness {
            w,
            addr,
            dir,
            done_log,
            done_bytes,
            live: Some((sender, stop, h)),
        }
    }

    fn log(&self) -> String {
        self.w.log()
    }

    /// The three promises, checked after each hostile case.
    fn check(self) {
        self.check_allowing(&[])
    }

    /// `check`, where the test itself started the runs in `allowed` on authenticated
    /// connections: their logs may be in the directory as well.
    fn check_allowing(mut self, allowed: &[u8]) {
        assert!(self.w.alive(), "witness died: {}", self.log());
        let (sender, stop, h) = self.live.take().unwrap();
        // Progress, not speed: a loaded CI disk can hold one journal fsync for seconds,
        // so wait up to 60 s for the next durable ack.
        let before = sender.stats().durable;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while sender.stats().durable <= before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            sender.stats().durable > before,
            "the live writer made no progress in 60 s: {:?}",
            sender.stats()
        );
        stop.store(true, Ordering::SeqCst);
        let pushed = h.join().unwrap();
        let st = Arc::into_inner(sender)
            .unwrap()
            .finish(Duration::from_secs(30))
            .unwrap();
        assert_eq!(st.durable, pushed);
        assert_eq!(st.reconnects, 0, "the live writer was disturbed: {st:?}");
        let got = fetch_with_key(
            &self.addr,
            &RunSelector::Run(descriptor(2).run_id),
            Some(&key()),
        )
        .unwrap();
        assert!(got.acks == (0..pushed).map(ack).collect::<Vec<_>>());
        assert_eq!(
            std::fs::read(&self.done_log).unwrap(),
            self.done_bytes,
            "another run's log changed"
        );
        assert!(self.w.alive(), "witness died: {}", self.log());
        self.check_dir(allowed);
    }

    /// Nothing a hostile peer sent made the witness create a file: the directory holds
    /// the logs of the harness's two runs (and of `allowed` runs) and no file named after
    /// any other run of this test.
    fn check_dir(&self, allowed: &[u8]) {
        let name = |r: u8| format!("{}.{LOG_EXTENSION}", descriptor(r).run_id.hex());
        let (mut logs, mut others) = (BTreeSet::new(), vec![]);
        for e in std::fs::read_dir(&self.dir).unwrap() {
            let n = e.unwrap().file_name().into_string().unwrap();
            if n.ends_with(&format!(".{LOG_EXTENSION}")) {
                logs.insert(n);
            } else {
                others.push(n);
            }
        }
        for r in [1, 2] {
            assert!(logs.contains(&name(r)), "run {r}'s log is gone: {logs:?}");
        }
        let legit: Vec<String> = [1, 2].iter().chain(allowed).map(|&r| name(r)).collect();
        for l in &logs {
            assert!(
                legit.contains(l),
                "a log for a run no test started: {l} (directory: {logs:?} {others:?})"
            );
        }
        for r in (3..=9).filter(|r| !allowed.contains(r)) {
            let hex = descriptor(r).run_id.hex();
            assert!(
                !others.iter().any(|o| o.contains(&hex)),
                "a file for hostile run {r}: {others:?}"
            );
        }
    }
}

/// Reads until EOF (or 15 s) and returns the message of the first Error frame.
fn read_error(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let mut off = 0;
    while off < got.len() {
        match frame::decode(&got[off..]) {
            frame::Decoded::Frame(f) => {
                off += f.len_bytes;
                if f.ty == FrameType::Error {
                    return String::from_utf8_lossy(f.payload).into_owned();
                }
            }
            other => panic!("bad reply {other:?}"),
        }
    }
    panic!("no Error frame in the reply ({} bytes)", got.len())
}

fn send_and_read_error(addr: &str, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    read_error(&mut s)
}

/// An authenticated raw connection: Auth sent, Challenge read, session ready.
fn raw_authenticated(addr: &str, key: &Key) -> (TcpStream, Session) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let nonce = plugpull::wire::auth::nonce();
    s.write_all(
        &Msg::Auth {
            version: PROTOCOL_VERSION,
            nonce,
        }
        .encode(),
    )
    .unwrap();
    let mut buf = Vec::new();
    loop {
        if let frame::Decoded::Frame(f) = frame::decode(&buf) {
            let Ok(Msg::Challenge { nonce: w }) = Msg::decode(&f) else {
                panic!("expected Challenge")
            };
            return (s, Session::client(key, &nonce, &w));
        }
        let mut c = [0u8; 256];
        let n = s.read(&mut c).unwrap();
        assert!(n > 0, "closed before Challenge");
        buf.extend_from_slice(&c[..n]);
    }
}

fn sealed(session: &mut Session, m: &Msg) -> Vec<u8> {
    let mut v = m.encode();
    session.sealer.seal(&mut v, 0);
    v
}

fn hello(run: u8) -> Msg {
    Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: descriptor(run),
    }
}

#[test]
fn oversized_frame() {
    let h = Harness::start(&[]);
    let mut f = (64u32 << 20).to_le_bytes().to_vec();
    f.extend_from_slice(&[0x12; 1000]);
    let e = send_and_read_error(&h.addr, &f);
    assert!(e.contains("exceeds the maximum of 4194304 bytes"), "{e}");
    h.check();
}

#[test]
fn wrong_key_and_wrong_mac() {
    let h = Harness::start(&[]);
    // A writer with the wrong key: a clear error naming the key.
    let wrong = Key::from_secret(b"not the witness key at all!!").unwrap();
    let e = AckSender::connect(&h.addr, &descriptor(3), opts(Some(wrong.clone())))
        .err()
        .unwrap();
    let m = format!("{e:#}");
    assert!(
        m.contains("refused the run: authentication failed: MAC check failed")
            && m.contains("--key-file"),
        "{m}"
    );
    // A writer with no key at all.
    let e = AckSender::connect(&h.addr, &descriptor(3), opts(None))
        .err()
        .unwrap();
    let m = format!("{e:#}");
    assert!(m.contains("requires authentication"), "{m}");
    // A forged Acks frame for the live run on a correctly authenticated connection
    // whose MAC was tampered with.
    let (mut s, mut sess) = raw_authenticated(&h.addr, &key());
    let mut f = sealed(&mut sess, &hello(4));
    let n = f.len();
    f[n - frame::CRC_BYTES - 1] ^= 1; // last MAC byte
    let crc = crc32fast::hash(&f[..n - frame::CRC_BYTES]);
    f[n - frame::CRC_BYTES..].copy_from_slice(&crc.to_le_bytes());
    s.write_all(&f).unwrap();
    let e = read_error(&mut s);
    assert!(e.contains("MAC check failed"), "{e}");
    assert!(!log_path(&h.dir, descriptor(4).run_id).exists());
    assert!(h.log().contains("event=error"), "{}", h.log());
    assert!(h.log().contains("authentication failed"), "{}", h.log());
    h.check();
}

#[test]
fn replayed_frame_from_another_connection() {
    let h = Harness::start(&[]);
    // Connection A: a legitimate Hello and an Acks frame for run 5.
    let (mut a, mut sa) = raw_authenticated(&h.addr, &key());
    let hello_a = sealed(&mut sa, &hello(5));
    let acks_a = sealed(
        &mut sa,
        &Msg::Acks {
            first: 0,
            acks: (0..10).map(ack).collect(),
        },
    );
    a.write_all(&hello_a).unwrap();
    a.write_all(&acks_a).unwrap();
    drop(a);
    // Connection B replays A's frames verbatim after its own handshake.
    let (mut b, _sb) = raw_authenticated(&h.addr, &key());
    b.write_all(&hello_a).unwrap();
    let e = read_error(&mut b);
    assert!(
        e.contains("MAC check failed") && e.contains("replayed"),
        "{e}"
    );
    // And within one connection, a frame replayed where the next is due.
    let (mut c, mut sc) = raw_authenticated(&h.addr, &key());
    let f = sealed(&mut sc, &Msg::Heartbeat);
    c.write_all(&f).unwrap();
    c.write_all(&f).unwrap();
    let e = read_error(&mut c);
    assert!(e.contains("MAC check failed on frame 1"), "{e}");
    // Connection A started run 5 legitimately before it went away.
    h.check_allowing(&[5]);
}

#[test]
fn truncated_frame() {
    let h = Harness::start(&[]);
    let (mut s, mut sess) = raw_authenticated(&h.addr, &key());
    let f = sealed(&mut sess, &hello(6));
    s.write_all(&f[..f.len() / 2]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let e = read_error(&mut s);
    assert!(e.contains("closed in the middle of a frame"), "{e}");
    h.check();
}

#[test]
fn random_bytes() {
    let h = Harness::start(&[]);
    let mut rng = plugpull::rng::Rng::new(99);
    for n in [1usize, 7, 100, 5000] {
        let junk: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        let mut s = TcpStream::connect(&h.addr).unwrap();
        let _ = s.write_all(&junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        // Either an Error frame, or (fewer bytes than a length prefix) a clean close.
        if n >= 4 {
            let frame::Decoded::Frame(f) = frame::decode(&got) else {
                panic!(
                    "{n} random bytes: no Error frame ({} bytes back)",
                    got.len()
                )
            };
            assert_eq!(f.ty, FrameType::Error);
        }
    }
    h.check();
}

/// A peer that sends its Hello a byte a second is cut at the handshake timeout, however
/// alive each byte keeps the connection: answered with the reason, then closed.
#[test]
fn one_byte_a_second() {
    let h = Harness::start(&["--handshake-timeout", "3s", "--idle-timeout", "3s"]);
    let (mut s, mut sess) = raw_authenticated(&h.addr, &key());
    let f = sealed(&mut sess, &hello(7));
    // The pause between bytes is a wait for the witness's answer, so the trickle stops
    // at that event. A witness that never cuts it is caught after 30 one-second waits,
    // ten times its timeout and long before the Hello's last byte (which would complete
    // the handshake) goes out; one that answers and keeps the socket open, likewise.
    let patience = 30;
    assert!(f.len() > patience, "a Hello of {} bytes", f.len());
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let (mut got, mut buf, mut sent, mut waits) = (Vec::new(), [0u8; 4096], 0, 0);
    let ended = loop {
        assert!(
            waits < patience,
            "{}",
            if got.is_empty() {
                format!("no answer to a peer trickling {sent} bytes (--handshake-timeout 3s)")
            } else {
                format!(
                    "the witness answered ({} bytes) but kept the connection open",
                    got.len()
                )
            }
        );
        if got.is_empty() && s.write_all(&f[sent..sent + 1]).is_ok() {
            sent += 1;
        }
        match s.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => waits += 1,
            Err(e) => break Err(e),
        }
    };
    let frame::Decoded::Frame(reply) = frame::decode(&got) else {
        panic!(
            "no Error frame before the connection ended ({ended:?}, {} bytes)",
            got.len()
        )
    };
    assert_eq!(reply.ty, FrameType::Error);
    let e = String::from_utf8_lossy(reply.payload);
    assert!(e.starts_with("no handshake within 3s"), "{e}");
    // Then closed by the witness (a reset too: it may close with bytes of ours unread).
    assert!(
        ended
            .as_ref()
            .map_or_else(|e| e.kind() == ErrorKind::ConnectionReset, |()| true),
        "{ended:?}"
    );
    h.check();
}

#[test]
fn a_thousand_abandoned_connections() {
    let h = Harness::start(&["--handshake-timeout", "5s"]);
    let mut conns = Vec::new();
    for i in 0..1000 {
        let mut s = TcpStream::connect(&h.addr).unwrap();
        // Some say something first, most say nothing.
        if i % 10 == 0 {
            let _ = s.write_all(&[0, 0]);
        }
        conns.push(s);
    }
    // The live writer (checked in `check`) must keep going while they hang; a fetch of
    // another run must work too.
    let got = fetch_with_key(
        &h.addr,
        &RunSelector::Run(descriptor(1).run_id),
        Some(&key()),
    )
    .unwrap();
    assert_eq!(got.acks.len(), 5000);
    // Then they are abandoned without a word.
    drop(conns);
    // And 1000 more that connect and vanish at once.
    for _ in 0..1000 {
        drop(TcpStream::connect(&h.addr).unwrap());
    }
    common::eventually(Duration::from_secs(20), "the witness logs a probe", || {
        h.log().contains("event=probe")
    });
    h.check();
}

#[test]
fn unkeyed_witness_refuses_a_keyed_writer_and_warns_on_public_bind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let mut w = common::WitnessProc::start(&dir);
    let e = AckSender::connect(&w.addr, &descriptor(8), opts(Some(key())))
        .err()
        .unwrap();
    let m = format!("{e:#}");
    assert!(m.contains("runs without a key"), "{m}");
    w.kill();
    // Bound to every address without a key: a warning says what to do.
    let text = Listen::new(&dir).bind("0.0.0.0:0").start().log();
    assert!(
        text.contains("event=warning") && text.contains("without --key-file"),
        "{text}"
    );
}

// ---- verify against hostile targets ------------------------------------------------

/// A real run through the built binary: witness, `write`, `fetch -o`. Returns the log
/// path and the target file.
fn real_run(tmp: &Path, name: &str, w: &common::WitnessProc) -> (PathBuf, PathBuf) {
    let target = tmp.join(format!("{name}.img"));
    let r = run([
        "write",
        target.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--size",
        "1M",
        "--count",
        "200",
        "--quiet",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    let log = tmp.join(format!("{name}.acklog"));
    let r = run([
        "fetch",
        "--witness",
        &w.addr,
        "--run",
        &run_id,
        "-o",
        log.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    (log, target)
}

fn verify_json(target: &Path, log: &Path) -> (i32, serde_json::Value, String) {
    // The hostile contents sit in another file than the run wrote to, most without a
    // stamp of the run: judging them against the run is asked for explicitly.
    let r = run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        log.to_str().unwrap(),
        "--json",
        "--allow-identity-mismatch",
    ]);
    assert!(
        !r.stderr.contains("panicked"),
        "verify panicked: {}",
        r.stderr
    );
    (r.code, r.json(), r.stderr)
}

#[test]
fn verify_against_hostile_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let w = common::WitnessProc::start(&tmp.path().join("w"));
    let (log_a, target_a) = real_run(tmp.path(), "a", &w);
    let (_log_b, target_b) = real_run(tmp.path(), "b", &w);
    let (code, j, _) = verify_json(&target_a, &log_a);
    assert_eq!((code, j["verdict"].as_str()), (0, Some("PASS")), "{j}");
    let size = std::fs::metadata(&target_a).unwrap().len() as usize;

    let mut rng = plugpull::rng::Rng::new(3);
    let random: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
    let original = std::fs::read(&target_a).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("random bytes", random, "lost"),
        ("zeros", vec![0; size], "lost"),
        (
            "another run's records",
            std::fs::read(&target_b).unwrap(),
            "stale",
        ),
        ("truncated file", original[..size / 2].to_vec(), ""),
        ("smaller than the region", original[..4096].to_vec(), ""),
    ];
    for (name, bytes, class) in cases {
        let t = tmp.path().join("hostile.img");
        std::fs::write(&t, &bytes).unwrap();
        let (code, j, stderr) = verify_json(&t, &log_a);
        assert_eq!(code, 1, "{name}: exit {code}, {j}\n{stderr}");
        assert_eq!(j["verdict"], "FAIL", "{name}: {j}");
        let acked = j["acked_records"].as_u64().unwrap();
        assert_eq!(acked, 200, "{name}");
        assert!(
            j["counts"]["intact"].as_u64().unwrap_or(0) < acked,
            "{name}: {j}"
        );
        if !class.is_empty() {
            assert!(
                j["counts"][class].as_u64().unwrap_or(0) > 0,
                "{name}: expected {class} findings: {}",
                j["counts"]
            );
        }
        eprintln!("{name}: exit {code}, counts {}", j["counts"]);
    }
    // And verify never wrote to the target.
    assert_eq!(std::fs::read(&target_a).unwrap(), original);
}

/// A device whose reads fail with EIO past a point: the records there are unreadable,
/// the rest is judged normally, nothing panics.
#[test]
fn verify_on_a_device_that_returns_eio() {
    use plugpull::device::Device;
    use plugpull::device::mem::MemDevice;
    struct Eio {
        inner: MemDevice,
        bad_from: u64,
    }
    impl Device for Eio {
        fn size_bytes(&self) -> u64 {
            self.inner.size_bytes()
        }
        fn logical_block_bytes(&self) -> u32 {
            512
        }
        fn write_at(&self, b: &[u8], o: u64) -> std::io::Result<()> {
            self.inner.write_at(b, o)
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn read_at(&self, b: &mut [u8], o: u64) -> std::io::Result<()> {
            if o + b.len() as u64 > self.bad_from {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            self.inner.read_at(b, o)
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = common::WitnessProc::start(&tmp.path().join("w"));
    let (log, target) = real_run(tmp.path(), "e", &w);
    let run_log = plugpull::witness::store::reader::read_log_file(&log).unwrap();
    let bytes = std::fs::read(&target).unwrap();
    let inner = MemDevice::new(bytes.len());
    inner.write_at(&bytes, 0).unwrap();
    let dev = Arc::new(Eio {
        inner,
        bad_from: 100 * 4096,
    });
    let report = plugpull::verify::verify_device(dev, &run_log, Duration::from_secs(10));
    let j = serde_json::to_value(&report).unwrap();
    assert_eq!(j["verdict"], "FAIL", "{j}");
    assert!(
        j["counts"]["unreadable"].as_u64().unwrap() > 0,
        "{}",
        j["counts"]
    );
    assert!(
        j["counts"]["intact"].as_u64().unwrap() > 0,
        "{}",
        j["counts"]
    );
    assert_eq!(report.verdict.exit_code(), 1);
}
