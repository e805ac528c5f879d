//! The witness drops a writer connection that goes silent for `--idle-timeout`, counted
//! from its last complete frame, also after a stretch of traffic. Why a test: the
//! connection keeps its socket read timeout between reads (setting it before every read
//! was a syscall per batch), so it must still shrink it as the deadline nears, or a
//! silent writer would hold its run for up to the timeout armed long before.

use crate::common;

use common::{Listen, test_descriptor};
use plugpull::record::RunId;
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const IDLE: Duration = Duration::from_secs(2);
/// How long the test waits for the close at all: well past IDLE plus its slack below.
const READ_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn a_writer_silent_after_traffic_is_dropped_at_the_idle_deadline() {
    let w = Listen::temporary().args(["--idle-timeout", "2s"]).start();
    let mut s = TcpStream::connect(&w.addr).unwrap();
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: test_descriptor(RunId([0x1d; 16])),
    };
    s.write_all(&hello.encode()).unwrap();
    // Traffic for a while (each Heartbeat moves the deadline), then silence.
    let mut last = Instant::now();
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(150));
        s.write_all(&Msg::Heartbeat.encode()).unwrap();
        last = Instant::now();
    }
    // The witness's replies (Welcome, Heartbeats), then its close. The read timeout only
    // keeps a witness that never drops the connection from hanging the test.
    s.set_read_timeout(Some(READ_LIMIT)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "still open {:?} after the last frame, with --idle-timeout {IDLE:?}:\n{}",
                    last.elapsed(),
                    w.log()
                )
            }
            // A reset ends the connection as a close does.
            Err(_) => break,
        }
    }
    let silent_for = last.elapsed();
    // Never before the idle timeout (the deadline counts from the last frame, not from
    // the connection's start); the upper bound only separates the --idle-timeout deadline
    // from a read that waits without it (the 60 s default, or no timeout at all): the
    // slack is far above any scheduling delay of a loaded machine.
    assert!(
        silent_for >= IDLE && silent_for < IDLE + Duration::from_secs(8),
        "dropped {silent_for:?} after the last frame, with --idle-timeout {IDLE:?}"
    );
    assert!(w.log().contains("idle timeout"), "{}", w.log());
}
