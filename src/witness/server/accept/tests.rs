//! The gate keeps the rule of a connection (`Conn::reply`): a Heartbeat reply that
//! cannot be sent ends the connection only after the frames received with it, so a
//! writer's Hello and Bye among them still make a run's "connect" and "bye".

use super::{Pending, Role, Step, hand_over};
use crate::record::RunId;
use crate::wire::msg::{Msg, PROTOCOL_VERSION};
use crate::witness::server::reply_tests::{RUN, descriptor, wait_for};
use crate::witness::server::shared::WitnessOptions;
use crate::witness::server::witness::Witness;
use crate::witness::store::layout::log_path;
use crate::witness::store::reader::read_log_file;
use std::io::Write;
use std::net::{TcpListener, TcpStream};

/// A gate's pending connection whose buffer holds `frames` and whose peer has reset
/// the connection (so every reply fails), and the witness it belongs to.
fn reset_pending(frames: &[Msg], dir: &std::path::Path) -> (Witness, Pending) {
    let opts = WitnessOptions {
        quiet: true,
        ..Default::default()
    };
    let w = Witness::start("127.0.0.1:0", dir, opts).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, peer) = l.accept().unwrap();
    client.write_all(b"x").unwrap();
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    nix::sys::socket::setsockopt(&client, nix::sys::socket::sockopt::Linger, &linger).unwrap();
    drop(client);
    wait_for(&server, 0, libc::POLLHUP);
    let mut p = Pending::new(server, 1, peer);
    p.buf = frames.iter().flat_map(Msg::encode).collect();
    (w, p)
}

fn hello() -> Msg {
    Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: descriptor(),
    }
}

fn bye() -> Msg {
    Msg::Bye {
        reason: "writer finished".into(),
    }
}

#[test]
fn a_request_after_a_failed_heartbeat_reply_is_served_and_its_bye_logged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let (w, mut p) = reset_pending(&[Msg::Heartbeat, hello(), bye()], &dir);
    let step = p.advance(&w.shared);
    assert!(matches!(step, Step::Ready(Role::Writer)), "not handed over");
    assert!(p.reply_failed.is_some(), "the Heartbeat reply did not fail");
    hand_over(&w.shared, p, Role::Writer);
    w.shutdown();
    let log = read_log_file(&log_path(&dir, RunId([RUN; 16]))).unwrap();
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["connect", "bye"], "{:?}", log.events);
}

#[test]
fn a_failed_heartbeat_reply_with_no_request_received_closes_the_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let mut part = hello().encode();
    part.truncate(part.len() / 2);
    let (w, mut p) = reset_pending(&[Msg::Heartbeat, Msg::Heartbeat], &tmp.path().join("w"));
    p.buf.extend_from_slice(&part);
    match p.advance(&w.shared) {
        Step::Close(r) => assert_eq!(r.detail, "the peer does not read the witness's replies"),
        _ => panic!("a peer whose reply failed is kept waiting"),
    }
    w.shutdown();
}

/// The failure is handed over with the connection: a peer whose Heartbeat reply was cut
/// short (it took part of the frame) would read a broken frame stream if the connection
/// thread went on to send a Welcome or a Durable, so it writes nothing more, and still
/// logs the run's frames. Here the socket itself is healthy, so only the hand-over can
/// stop those replies.
#[test]
fn a_failed_reply_is_handed_over_and_nothing_more_is_written() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    let opts = WitnessOptions {
        quiet: true,
        ..Default::default()
    };
    let w = Witness::start("127.0.0.1:0", &dir, opts).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, peer) = l.accept().unwrap();
    let mut p = Pending::new(server, 1, peer);
    p.buf = [hello(), bye()].iter().flat_map(Msg::encode).collect();
    p.reply_failed = Some(std::io::Error::new(
        std::io::ErrorKind::WouldBlock,
        "the peer took 3 of 16 bytes of a reply",
    ));
    hand_over(&w.shared, p, Role::Writer);
    client
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert!(
        got.is_empty(),
        "{} bytes written after a failed reply",
        got.len()
    );
    w.shutdown();
    let log = read_log_file(&log_path(&dir, RunId([RUN; 16]))).unwrap();
    let kinds: Vec<&str> = log.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["connect", "bye"], "{:?}", log.events);
}
