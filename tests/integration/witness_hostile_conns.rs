//! Idle sockets must not lock writers out. The witness once spawned a thread per
//! connection before any authentication, so 1,100 idle sockets made it refuse new writers and every fetch
//! until the handshake timeout (keyed witness included; 1,028 threads, 293 MB RSS).
//!
//! These tests run the built `plugpull listen` and attack it with idle sockets and a
//! peer that trickles bytes, then check that a real writer and a fetch get through
//! before the idle sockets' handshake timeout (a starved writer waits for it) and that
//! the witness's thread count stays within what its caps allow (read from
//! /proc/PID/status) all through the attack.

use crate::common;

use common::{Listen, WitnessProc, test_descriptor};
use plugpull::model::{Ack, RunDescriptor, RunSelector};
use plugpull::record::{RecordId, RunId};
use plugpull::wire::auth::Key;
use plugpull::wire::frame;
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::client::error::ClientError;
use plugpull::witness::client::{AckSender, ClientOptions, fetch_with_key};
use plugpull::witness::server::{FETCH_CONNECTIONS, MAX_PENDING_HANDSHAKES};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const SECRET: &[u8] = b"hostile-conns-key-0123456789abcdef";
/// Idle sockets of the attack, as in the issue.
const IDLE_SOCKETS: usize = 1_100;
/// `--max-connections` of the witness under attack.
const WRITER_CAP: usize = 8;

/// File descriptors enough for the attack in this process and the witness child,
/// which inherits the limit (the witness raises its own soft limit too).
fn raise_nofile() {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        let want = 8192.min(r.rlim_max);
        assert!(
            want >= 4096,
            "RLIMIT_NOFILE hard limit {} too low",
            r.rlim_max
        );
        r.rlim_cur = r.rlim_cur.max(want);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
}

/// The common witness, with the key its writers and fetches use.
struct Witness {
    w: WitnessProc,
    addr: String,
    key: Option<Key>,
}

impl Witness {
    fn start(keyed: bool, extra: &[&str]) -> Witness {
        raise_nofile();
        let mut listen = Listen::temporary().args(extra);
        if keyed {
            listen = listen.key(SECRET);
        }
        let w = listen.start();
        Witness {
            addr: w.addr.clone(),
            w,
            key: keyed.then(|| Key::from_secret(SECRET).unwrap()),
        }
    }

    fn log(&self) -> String {
        self.w.log()
    }

    /// The witness process's thread count.
    fn threads(&self) -> usize {
        threads_of(self.w.pid())
    }

    /// Waits until the witness's log has a line containing `what`; panics with the log's
    /// tail after 60 s.
    fn wait_for_log(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no {what:?} in the witness log:\n{}",
                tail(&self.log())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn opts(&self) -> ClientOptions {
        ClientOptions {
            heartbeat: Duration::from_millis(200),
            reconnect_backoff_max: Duration::from_millis(200),
            key: self.key.clone(),
            ..Default::default()
        }
    }

    fn fetch(&self, run: RunId) -> Result<plugpull::model::RunLog, ClientError> {
        fetch_with_key(&self.addr, &RunSelector::Run(run), self.key.as_ref())
    }
}

/// The thread count of process `pid`.
fn threads_of(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("Threads: line")
}

/// The most threads the witness had, sampled every few milliseconds from `start` until
/// `peak`: what the caps must bound is the count at any moment of the attack, not at
/// one instant of it.
struct PeakThreads {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<usize>,
}

impl PeakThreads {
    fn start(pid: u32) -> PeakThreads {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut peak = threads_of(pid);
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    peak = peak.max(threads_of(pid));
                    std::thread::sleep(Duration::from_millis(5));
                }
                peak.max(threads_of(pid))
            })
        };
        PeakThreads { stop, sampler }
    }

    fn peak(self) -> usize {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.sampler.join().unwrap()
    }
}

fn descriptor(run: u8) -> RunDescriptor {
    let mut d = test_descriptor(RunId([run; 16]));
    d.device.serial = Some(format!("CONNS{run}"));
    d
}

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i + 1,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 1_000 + i,
        },
        flushed_ns: 2_000 + i,
    }
}

/// A writer that sends `n` acks to a new run and leaves; returns how long it took.
fn write_run(w: &Witness, run: u8, n: u64) -> Duration {
    let t0 = Instant::now();
    let s = AckSender::connect(&w.addr, &descriptor(run), w.opts())
        .unwrap_or_else(|e| panic!("writer refused: {e:#}\nwitness log:\n{}", w.log()));
    for i in 0..n {
        s.push(ack(i));
    }
    let st = s.finish(Duration::from_secs(20)).unwrap();
    assert_eq!(st.durable, n);
    t0.elapsed()
}

/// The pause between [`slowloris`]'s bytes, spent waiting for the witness's answer.
const LORIS_PAUSE: Duration = Duration::from_millis(200);
/// Pauses after which [`slowloris`] gives up by itself: 60 s, three times the attack's
/// handshake timeout, and fewer than its Hello's bytes, so it never completes one.
const LORIS_PATIENCE: usize = 300;

/// What the witness did to [`slowloris`].
#[derive(Debug)]
struct Loris {
    /// The Error frame's message, or what came back instead.
    answer: String,
    /// Whether the witness closed the connection (else the loris gave up).
    closed: bool,
}

/// A peer that sends the bytes of a real Hello one per [`LORIS_PAUSE`] and never
/// finishes; it stops sending once the witness answers, then waits for the close.
fn slowloris(addr: String) -> std::thread::JoinHandle<Loris> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).unwrap();
        let hello = Msg::Hello {
            version: PROTOCOL_VERSION,
            resume: false,
            descriptor: descriptor(0x51),
        }
        .encode();
        assert!(
            hello.len() > LORIS_PATIENCE,
            "a Hello of {} bytes is through before the loris gives up",
            hello.len()
        );
        s.set_read_timeout(Some(LORIS_PAUSE)).unwrap();
        let (mut got, mut buf, mut sent, mut pauses) = (Vec::new(), [0u8; 4096], 0, 0);
        let closed = loop {
            if got.is_empty() && s.write_all(&hello[sent..sent + 1]).is_ok() {
                sent += 1;
            }
            match s.read(&mut buf) {
                Ok(0) => break true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) if pauses + 1 >= LORIS_PATIENCE => break false,
                Err(_) => pauses += 1,
            }
        };
        let answer = match frame::decode(&got) {
            frame::Decoded::Frame(f) => String::from_utf8_lossy(f.payload).into_owned(),
            _ => format!("{} bytes, no frame", got.len()),
        };
        Loris { answer, closed }
    })
}

/// Opens `n` connections that say nothing (one in ten sends two bytes).
fn idle_sockets(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 10 == 0 {
                let _ = s.write_all(&[0, 0]);
            }
            s
        })
        .collect()
}

/// The idle sockets' handshake timeout in [`idle_sockets_do_not_starve`]: a writer or a
/// fetch starved by them gets through only once they are dropped, after this.
const ATTACK_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a writer or a fetch may take to get through the idle sockets: unloaded they
/// take tens of milliseconds, a hundred times less; starved they take the handshake
/// timeout, four times more. Far from both, so neither load nor luck decides.
const GETS_THROUGH_WITHIN: Duration = Duration::from_secs(5);

fn idle_sockets_do_not_starve(keyed: bool) {
    let timeout = format!("{}s", ATTACK_HANDSHAKE_TIMEOUT.as_secs());
    let w = Witness::start(
        keyed,
        &[
            "--max-connections",
            &WRITER_CAP.to_string(),
            "--handshake-timeout",
            &timeout,
        ],
    );
    write_run(&w, 1, 100);
    let base = w.threads();
    let peak = PeakThreads::start(w.w.pid());
    let idle = idle_sockets(&w.addr, IDLE_SOCKETS);
    // After the idle ones, so it is among the newest pending connections and only its
    // handshake deadline can end it.
    let loris = slowloris(w.addr.clone());

    // Not starved: through well before the idle sockets' handshake timeout, which a
    // starved writer waits for.
    let took = write_run(&w, 2, 100);
    assert!(
        took < GETS_THROUGH_WITHIN,
        "a writer took {took:?} to get through {IDLE_SOCKETS} idle sockets"
    );
    let t0 = Instant::now();
    let got = w.fetch(descriptor(1).run_id).unwrap_or_else(|e| {
        panic!(
            "fetch refused: {e:#}\nwitness log tail:\n{}",
            tail(&w.log())
        )
    });
    assert_eq!(got.acks, (0..100).map(ack).collect::<Vec<_>>());
    // The same for a fetch.
    assert!(
        t0.elapsed() < GETS_THROUGH_WITHIN,
        "fetch took {:?}",
        t0.elapsed()
    );
    let under_attack = peak.peak();

    // Every thread beyond the idle witness's is an authenticated writer or a fetch.
    let bound = base + WRITER_CAP + FETCH_CONNECTIONS;
    assert!(
        under_attack <= bound && w.threads() <= bound,
        "witness threads: {base} idle, {under_attack} under attack, {} now; the caps allow \
         {bound}",
        w.threads()
    );
    eprintln!(
        "witness threads: {base} before the attack, {under_attack} with {IDLE_SOCKETS} idle \
         sockets (bound {bound}); writer through in {took:?}"
    );
    // Cut by the witness at its handshake timeout, however alive each byte kept the
    // connection: answered with the reason, then closed, before the loris gave up.
    let loris = loris.join().unwrap();
    assert!(
        loris
            .answer
            .contains(&format!("no handshake within {timeout}")),
        "slowloris got {loris:?}"
    );
    assert!(
        loris.closed,
        "the witness kept the slowloris's socket open: {loris:?}"
    );
    drop(idle);
}

fn tail(log: &str) -> String {
    let lines: Vec<_> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[test]
fn idle_sockets_do_not_starve_writers_or_fetch() {
    idle_sockets_do_not_starve(false);
}

#[test]
fn idle_sockets_do_not_starve_a_keyed_witness() {
    idle_sockets_do_not_starve(true);
}

#[test]
fn pending_handshakes_beyond_the_cap_drop_the_oldest() {
    let w = Witness::start(false, &["--handshake-timeout", "30s"]);
    let extra = 20;
    let mut socks = idle_sockets(&w.addr, MAX_PENDING_HANDSHAKES + extra);
    // Whether the witness closed `s` (with what it said) within `wait`.
    let closed_with = |s: &mut TcpStream, wait: Duration| -> Option<String> {
        s.set_read_timeout(Some(wait)).unwrap();
        let mut got = Vec::new();
        match s.read_to_end(&mut got) {
            Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
            Err(_) => None,
        }
    };
    // The oldest `extra` are closed by the witness with a reason as the newest come in:
    // wait for each close (long before the 30 s handshake timeout would close them).
    for (i, s) in socks.iter_mut().enumerate().take(extra) {
        let got = closed_with(s, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("oldest socket {i} still open"));
        assert!(
            got.contains("waiting for their handshake"),
            "socket {i}: {got:?}"
        );
    }
    // The witness has taken in every newer one by now (their arrival closed the
    // oldest): the newest stay open.
    for (i, s) in socks.iter_mut().enumerate().rev().take(10) {
        assert_eq!(
            closed_with(s, Duration::from_millis(200)),
            None,
            "newest socket {i} was closed"
        );
    }
    w.wait_for_log("dropped the oldest");
}

#[test]
fn fetch_has_room_when_writers_fill_the_cap() {
    let w = Witness::start(false, &["--max-connections", "2"]);
    write_run(&w, 1, 10);
    // Two writers that stay connected fill the writer cap.
    let a = AckSender::connect(&w.addr, &descriptor(2), w.opts()).unwrap();
    let b = AckSender::connect(&w.addr, &descriptor(3), w.opts()).unwrap();
    let e = AckSender::connect(&w.addr, &descriptor(4), w.opts())
        .err()
        .expect("a third writer got past a cap of 2");
    let m = format!("{e:#}");
    assert!(
        m.contains("limit of 2 writer connections") && m.contains("--max-connections"),
        "{m}"
    );
    let got = w.fetch(descriptor(1).run_id).unwrap();
    assert_eq!(got.acks.len(), 10);
    drop((a, b));
}

/// `--handshake-timeout` is how long a connection may wait for its Hello or Fetch, even
/// when `--idle-timeout` is shorter: QEMU's virtio-serial chardevs (the lab)
/// connect at start and speak only once the guest has booted. The witness used the
/// shorter of the two, so `--handshake-timeout 1h` still dropped them after 60 s.
#[test]
fn a_silent_connection_waits_for_the_handshake_timeout_not_the_idle_timeout() {
    let w = Witness::start(
        false,
        &["--handshake-timeout", "6s", "--idle-timeout", "1s"],
    );
    let mut s = TcpStream::connect(&w.addr).unwrap();
    let t0 = Instant::now();
    // Closed by the witness once the handshake timeout is over (not at the idle
    // timeout, 5 s before), saying why. The read ends at the close; its own timeout, ten
    // times the handshake timeout, only stops a witness that never closes.
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut got = Vec::new();
    let closed = s.read_to_end(&mut got);
    let waited = t0.elapsed();
    assert!(
        closed.is_ok(),
        "still open after {waited:?}: {closed:?}\n{}",
        tail(&w.log())
    );
    assert!(
        waited >= Duration::from_millis(5900),
        "closed after {waited:?}, before --handshake-timeout 6s"
    );
    match frame::decode(&got) {
        frame::Decoded::Frame(f) => {
            let said = String::from_utf8_lossy(f.payload);
            assert!(
                said.contains("no handshake within 6s (0 frames, 0 bytes pending)"),
                "{said}"
            );
        }
        other => panic!("no Error frame before the close: {other:?}"),
    }
    w.wait_for_log("no handshake within 6s");
}
