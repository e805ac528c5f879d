//! The ack sender sends Heartbeats only on a quiet line: never while a Durable is due
//! (the witness is busy with our acks, and at the end of a run the Heartbeat's reply
//! would come after our Bye, into a closed socket: the witness then saw its next reply
//! fail), and still when everything sent is confirmed.
//!
//! Against a scripted witness in this process, so the test decides when the Durable
//! comes: it holds it back for 60 heartbeat intervals.

use crate::common;

use common::test_descriptor;
use plugpull::model::Ack;
use plugpull::record::{RecordId, RunId};
use plugpull::wire::frame::{self, Decoded};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::client::{AckSender, ClientOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const HEARTBEAT: Duration = Duration::from_millis(10);
/// How long the scripted witness holds the Durable back: 60 heartbeat intervals.
const HOLD: Duration = Duration::from_millis(600);
const ACKS: u64 = 10;

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 1_700_000_000_000_000_000 + i,
        },
        flushed_ns: 1_700_000_000_000_000_000 + i + 500,
    }
}

/// Frames from one socket, whole, however they arrive.
struct Frames {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Frames {
    /// The next frame, or None at the end of the stream; panics past `deadline`.
    fn next(&mut self, deadline: Instant) -> Option<Msg> {
        loop {
            if let Decoded::Frame(f) = frame::decode(&self.buf) {
                let (m, len) = (Msg::decode(&f).unwrap(), f.len_bytes);
                self.buf.drain(..len);
                return Some(m);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no frame from the writer in time");
            self.s.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Frames that arrive within `d` from now (the stream must stay open).
    fn during(&mut self, d: Duration) -> Vec<Msg> {
        let end = Instant::now() + d;
        let mut got = Vec::new();
        while Instant::now() < end {
            if let Decoded::Frame(_) = frame::decode(&self.buf) {
                got.push(self.next(end).unwrap());
                continue;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.s.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => panic!("the writer closed the connection early"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e}"),
            }
        }
        got
    }
}

fn name(m: &Msg) -> String {
    format!("{:?}", m.frame_type())
}

/// The scripted witness: Welcome; takes the acks; holds the Durable back for HOLD,
/// noting what arrives meanwhile; sends it; waits for a Heartbeat and answers it (tells
/// `quiet_heartbeat` then); returns (frames during the hold, frames after that
/// Heartbeat up to the end of the stream).
fn witness(l: TcpListener, quiet_heartbeat: mpsc::Sender<()>) -> (Vec<String>, Vec<String>) {
    let (s, _) = l.accept().unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = Frames { s, buf: Vec::new() };
    let deadline = Instant::now() + Duration::from_secs(30);
    assert!(matches!(r.next(deadline), Some(Msg::Hello { .. })));
    let welcome = Msg::Welcome {
        version: PROTOCOL_VERSION,
        durable_acks: 0,
    };
    w.write_all(&welcome.encode()).unwrap();
    let mut acks = 0;
    while acks < ACKS {
        match r.next(deadline) {
            Some(Msg::Acks { acks: a, .. }) => acks += a.len() as u64,
            other => panic!("{other:?} before the acks"),
        }
    }
    let held: Vec<String> = r.during(HOLD).iter().map(name).collect();
    w.write_all(&Msg::Durable { durable_acks: ACKS }.encode())
        .unwrap();
    match r.next(deadline) {
        Some(Msg::Heartbeat) => {}
        other => panic!("{other:?} while the line is quiet"),
    }
    w.write_all(&Msg::Heartbeat.encode()).unwrap();
    quiet_heartbeat.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(m) = r.next(deadline) {
        rest.push(name(&m));
    }
    (held, rest)
}

#[test]
fn no_heartbeat_while_a_durable_is_due_and_heartbeats_when_quiet() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let (tx, rx) = mpsc::channel();
    let script = std::thread::spawn(move || witness(l, tx));
    let mut d = test_descriptor(RunId([0x4b; 16]));
    d.settings.streams = 1;
    let opts = ClientOptions {
        heartbeat: HEARTBEAT,
        ..Default::default()
    };
    let s = AckSender::connect(&addr, &d, opts).unwrap();
    let acks: Vec<Ack> = (0..ACKS).map(ack).collect();
    s.push_all(&acks);
    // finish() only after a Heartbeat on the quiet line: those still go out.
    rx.recv_timeout(Duration::from_secs(30))
        .expect("no Heartbeat after the Durable");
    let st = s.finish(Duration::from_secs(10)).unwrap();
    assert_eq!((st.pushed, st.durable), (ACKS, ACKS));
    let (held, rest) = script.join().unwrap();
    assert!(
        held.is_empty(),
        "frames while the Durable was due: {held:?}"
    );
    // More Heartbeats may come before finish() wakes the sender; the Bye is last.
    assert_eq!(rest.last().map(String::as_str), Some("Bye"), "{rest:?}");
    assert!(
        rest.iter().rev().skip(1).all(|n| n == "Heartbeat"),
        "{rest:?}"
    );
}
