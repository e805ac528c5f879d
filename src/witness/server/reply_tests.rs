//! A connection whose reply cannot be sent still handles the frames it already
//! received: a writer that ends sends its last frames and closes, and our reply to one
//! of them can hit its reset socket while its Bye waits in our buffer.
//!
//! Why a connection thread driven by hand over real TCP: the reset must have arrived
//! before the witness reads, or every reply succeeds and the test proves nothing. A
//! test client cannot order that against the witness's own gate thread; here the test
//! waits until the kernel reports the reset (poll: POLLHUP), then serves.

use crate::model::{Ack, RunLog};
use crate::record::RunId;
use crate::wire::auth::{self, Key, Session};
use crate::wire::msg::tests::{ack, sample_descriptor};
use crate::wire::msg::{Msg, PROTOCOL_VERSION, encode_acks_into};
use crate::witness::server::connection::Conn;
use crate::witness::server::recv_buf::RecvBuf;
use crate::witness::server::shared::WitnessOptions;
use crate::witness::server::witness::Witness;
use crate::witness::store::layout::log_path;
use crate::witness::store::reader::read_log_file;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub(super) const RUN: u8 = 0x7b;

/// What a writer sends in one write before its connection is reset.
enum Frame {
    Hello,
    Acks(std::ops::Range<u64>),
    Heartbeat,
    Bye,
    /// A Bye whose MAC does not match (keyed witness only).
    ForgedBye,
}

pub(super) fn descriptor() -> crate::model::RunDescriptor {
    let mut d = sample_descriptor(RUN);
    // `ack(i)` spreads acks over three streams.
    d.settings.streams = 3;
    d
}

/// Sends `frames` in one write, resets the connection (SO_LINGER 0), waits until the
/// witness side has seen the reset, then serves that side as a writer connection of a
/// witness in a fresh directory (keyed with `key`) and returns the run's log.
fn serve_reset_connection(frames: &[Frame], key: Option<Key>) -> RunLog {
    serve(frames, key, |client, server, _| {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        nix::sys::socket::setsockopt(&client, nix::sys::socket::sockopt::Linger, &linger).unwrap();
        drop(client);
        wait_for(server, 0, libc::POLLHUP);
        None
    })
}

/// Sends `frames` in one write and serves the witness side as `serve_reset_connection`
/// does, after `between` (given the client, the witness side and its connection; the
/// client it returns stays open until the connection ended).
fn serve(
    frames: &[Frame],
    key: Option<Key>,
    between: impl FnOnce(TcpStream, &TcpStream, &mut Conn) -> Option<TcpStream>,
) -> RunLog {
    let opts = WitnessOptions {
        quiet: true,
        key,
        ..Default::default()
    };
    serve_with(frames, opts, between)
}

/// `serve` by a witness with `opts`.
fn serve_with(
    frames: &[Frame],
    opts: WitnessOptions,
    between: impl FnOnce(TcpStream, &TcpStream, &mut Conn) -> Option<TcpStream>,
) -> RunLog {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let key = opts.key.clone();
    let w = Witness::start("127.0.0.1:0", &dir, opts).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, peer) = l.accept().unwrap();
    // As after the gate's Auth/Challenge: both sides hold the session.
    let nonces = (auth::nonce(), auth::nonce());
    let mut sessions = key.as_ref().map(|k| {
        (
            Session::client(k, &nonces.0, &nonces.1),
            Session::witness(k, &nonces.0, &nonces.1),
        )
    });
    let mut bytes = Vec::new();
    for f in frames {
        let start = bytes.len();
        match f {
            Frame::Hello => Msg::Hello {
                version: PROTOCOL_VERSION,
                resume: false,
                descriptor: descriptor(),
            }
            .encode_into(&mut bytes),
            Frame::Acks(r) => {
                let acks: Vec<Ack> = r.clone().map(ack).collect();
                encode_acks_into(&mut bytes, r.start, acks.iter());
            }
            Frame::Heartbeat => Msg::Heartbeat.encode_into(&mut bytes),
            Frame::Bye | Frame::ForgedBye => Msg::Bye {
                reason: "writer finished".into(),
            }
            .encode_into(&mut bytes),
        }
        if matches!(f, Frame::ForgedBye) {
            // Sealed with another key: a whole frame, its MAC wrong.
            let other = Key::from_secret(b"not the witness's key, but as long").unwrap();
            let mut forger = Session::client(&other, &nonces.0, &nonces.1);
            forger.sealer.seal(&mut bytes, start);
        } else {
            auth::seal_opt(
                sessions.as_mut().map(|s| &mut s.0.sealer),
                &mut bytes,
                start,
            );
        }
    }
    client.write_all(&bytes).unwrap();
    let mut c = Conn::new(w.shared.clone(), server.try_clone().unwrap(), 1, peer);
    c.session = sessions.map(|s| s.1);
    let _open = between(client, &server, &mut c);
    c.serve();
    let log = read_log_file(&log_path(&dir, RunId([RUN; 16]))).unwrap();
    w.shutdown();
    log
}

/// Blocks until poll reports one of `want` on `s` (asking for `events`). The reset:
/// from then on every send on `s` fails, while the bytes received before stay readable.
pub(super) fn wait_for(s: &TcpStream, events: libc::c_short, want: libc::c_short) {
    let mut fds = [libc::pollfd {
        fd: s.as_raw_fd(),
        // With none asked, poll reports only POLLHUP / POLLERR, which a reset brings.
        events,
        revents: 0,
    }];
    // SAFETY: `fds` is one valid pollfd, exclusively borrowed for the call.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 1, 10_000) };
    assert_eq!(r, 1, "nothing seen within 10 s");
    assert_ne!(fds[0].revents & want, 0, "{:#x}", fds[0].revents);
}

/// Does the gate's part: reads exactly the Hello from `server` and hands it to `c`.
fn take_hello(server: &TcpStream, c: &mut Conn) {
    let mut hello = Vec::new();
    Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: descriptor(),
    }
    .encode_into(&mut hello);
    let mut got = vec![0u8; hello.len()];
    (&*server).read_exact(&mut got).unwrap();
    assert!(got == hello);
    c.rbuf = RecvBuf::holding(got);
    c.first_frame_authenticated = true;
}

fn kinds(log: &RunLog) -> Vec<&str> {
    log.events.iter().map(|e| e.kind.as_str()).collect()
}

#[test]
fn hello_heartbeat_bye_then_reset_is_logged_as_bye() {
    let log = serve_reset_connection(&[Frame::Hello, Frame::Heartbeat, Frame::Bye], None);
    assert_eq!(kinds(&log), ["connect", "bye"], "{:?}", log.events);
    assert!(log.events[1].detail.starts_with("bye: writer finished"));
}

#[test]
fn acks_before_a_bye_whose_replies_fail_are_logged_durable() {
    let frames = [
        Frame::Hello,
        Frame::Acks(0..40),
        Frame::Heartbeat,
        Frame::Acks(40..90),
        Frame::Bye,
    ];
    let log = serve_reset_connection(&frames, None);
    assert_eq!(kinds(&log), ["connect", "bye"], "{:?}", log.events);
    let expect: Vec<Ack> = (0..90).map(ack).collect();
    assert!(log.acks == expect, "{} acks logged", log.acks.len());
    assert_eq!(log.events[1].durable_acks, 90);
}

#[test]
fn failed_reply_without_bye_ends_as_disconnect_with_the_acks_kept() {
    let frames = [Frame::Hello, Frame::Acks(0..30), Frame::Heartbeat];
    let log = serve_reset_connection(&frames, None);
    assert_eq!(kinds(&log), ["connect", "disconnect"], "{:?}", log.events);
    let d = &log.events[1];
    // A reset comes from the writer's running kernel: a close, not a silent host.
    assert!(
        d.detail.starts_with(crate::model::disconnect::CLOSED),
        "{}",
        d.detail
    );
    assert_eq!((log.acks.len(), d.durable_acks), (30, 30));
}

#[test]
fn a_bye_failing_authentication_after_a_failed_reply_is_an_error() {
    let key = Key::from_secret(b"a key of at least sixteen bytes for the test").unwrap();
    let frames = [
        Frame::Hello,
        Frame::Acks(0..10),
        Frame::Heartbeat,
        Frame::ForgedBye,
    ];
    let log = serve_reset_connection(&frames, Some(key.clone()));
    assert_eq!(kinds(&log), ["connect", "error"], "{:?}", log.events);
    let e = &log.events[1];
    assert!(
        e.detail.starts_with("authentication failed"),
        "{}",
        e.detail
    );
    assert_eq!(e.durable_acks, 10);
    // The same frames with a good MAC: the key and sealing above are right.
    let frames = [Frame::Hello, Frame::Heartbeat, Frame::Bye];
    let log = serve_reset_connection(&frames, Some(key));
    assert_eq!(kinds(&log), ["connect", "bye"], "{:?}", log.events);
}

/// The frames after the batch whose reply failed are still read (without waiting) and
/// handled: here the gate handed over the Hello, and the Heartbeat and Bye wait in the
/// socket.
#[test]
fn frames_queued_after_the_batch_of_a_failed_reply_are_handled() {
    let frames = [Frame::Hello, Frame::Heartbeat, Frame::Bye];
    let log = serve(&frames, None, |client, server, c| {
        wait_for(server, libc::POLLIN, libc::POLLIN);
        take_hello(server, c);
        c.reply_failed = Some(io::ErrorKind::BrokenPipe.into());
        // Open: only the frames decide how it ends.
        Some(client)
    });
    assert_eq!(kinds(&log), ["connect", "bye"], "{:?}", log.events);
}

/// With nothing more received, a failed reply ends the connection at once, not at the
/// idle deadline (60 s).
#[test]
fn a_failed_reply_with_nothing_more_received_ends_at_once() {
    let t = Instant::now();
    let log = serve(&[Frame::Hello], None, |client, server, c| {
        wait_for(server, libc::POLLIN, libc::POLLIN);
        c.reply_failed = Some(io::ErrorKind::BrokenPipe.into());
        Some(client)
    });
    assert_eq!(kinds(&log), ["connect", "disconnect"], "{:?}", log.events);
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// The idle deadline can pass while the witness itself is busy (a commit to a stalled
/// log disk as long as the idle timeout): frames that arrived meanwhile are the
/// writer's, and are handled before the connection counts as idle. Here every commit
/// outlasts a zero idle timeout; without the check, the connection ended as idle with
/// the acks and the Bye unread.
#[test]
fn frames_waiting_when_the_idle_deadline_passed_during_a_commit_are_handled() {
    let frames = [Frame::Hello, Frame::Acks(0..20), Frame::Bye];
    let opts = WitnessOptions {
        quiet: true,
        idle_timeout: Duration::ZERO,
        ..Default::default()
    };
    let log = serve_with(&frames, opts, |client, server, c| {
        wait_for(server, libc::POLLIN, libc::POLLIN);
        take_hello(server, c);
        Some(client)
    });
    assert_eq!(kinds(&log), ["connect", "bye"], "{:?}", log.events);
    assert_eq!(log.acks.len(), 20);
    assert_eq!(log.events[1].durable_acks, 20);
}

/// With nothing waiting, a connection past its idle deadline still ends as idle.
#[test]
fn nothing_waiting_past_the_idle_deadline_ends_as_idle() {
    let opts = WitnessOptions {
        quiet: true,
        idle_timeout: Duration::ZERO,
        ..Default::default()
    };
    let log = serve_with(&[Frame::Hello], opts, |client, server, c| {
        wait_for(server, libc::POLLIN, libc::POLLIN);
        take_hello(server, c);
        Some(client)
    });
    assert_eq!(kinds(&log), ["connect", "disconnect"], "{:?}", log.events);
    assert!(
        log.events[1].detail.contains("idle timeout"),
        "{}",
        log.events[1].detail
    );
}
