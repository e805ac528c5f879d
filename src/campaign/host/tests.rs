//! Tests of the whole-host controller's agent listener: its idle limit, the cap on open
//! connections, replies written before the loop moves on, and the built-in witness's
//! options.

use super::*;
use crate::campaign::host_listen::MAX_AGENT_CONNECTIONS;
use std::net::TcpStream;

fn settings(agent: &str) -> Settings {
    let text = format!(
        "[campaign]\ncycles = 1\nresults = \"r.jsonl\"\nwait_timeout = \"60s\"\n[target]\nkind = \"host\"\n[agent]\n{agent}\n[power]\ndriver = \"command\"\nscope = \"host\"\noff = \"x\"\non = \"y\"\n"
    );
    Settings::parse(&text, std::path::Path::new(".")).unwrap()
}

/// An agent connection may stay silent as long as the controller waits for the host
/// (a slow-booting guest's pre-opened connection), never less than the old 30 s.
#[test]
fn agent_connections_may_idle_as_long_as_a_host_boots() {
    let s = settings("boot_timeout = \"10m\"");
    assert_eq!(agent_idle_limit(&s), Duration::from_secs(600 + 60));
    assert!(agent_idle_limit(&settings("")) >= Duration::from_secs(600));
    let s = settings("boot_timeout = \"1s\"");
    assert_eq!(agent_idle_limit(&s), Duration::from_secs(61));
    let mut s = settings("boot_timeout = \"1s\"");
    s.wait_timeout = Duration::from_secs(1);
    assert_eq!(agent_idle_limit(&s), MIN_AGENT_IDLE);
}

/// `[witness] handshake_timeout` reaches the built-in witness, and an idle timeout
/// shorter than it no longer cuts a pending handshake first.
#[test]
fn the_built_in_witness_takes_the_handshake_timeout() {
    let s = settings("");
    let default = crate::witness::server::WitnessOptions::default();
    assert_eq!(
        s.witness_options().handshake_timeout,
        default.handshake_timeout
    );
    assert!(s.witness_options().quiet);
    let mut s = settings("");
    s.witness_handshake_timeout = Some(Duration::from_secs(300));
    let o = s.witness_options();
    assert_eq!(o.handshake_timeout, Duration::from_secs(300));
    assert_eq!(o.idle_timeout, Duration::from_secs(300));
}

/// Past the cap, the oldest silent connection is closed and a new one is served.
#[test]
fn the_oldest_agent_connection_makes_room_past_the_cap() {
    use std::io::{Read, Write};
    let (addr, rx) = listen("127.0.0.1:0", Duration::from_secs(60), true, open_access()).unwrap();
    let mut idle: Vec<TcpStream> = (0..MAX_AGENT_CONNECTIONS)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let mut last = TcpStream::connect(&addr).unwrap();
    idle[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        idle[0].read(&mut [0u8; 8]).unwrap(),
        0,
        "the oldest is closed"
    );
    idle[1]
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    assert!(idle[1].read(&mut [0u8; 8]).is_err(), "the others stay open");
    let replier = std::thread::spawn(move || {
        let (_, _, _, reply) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        reply.answer(Reply::Ok);
    });
    let mut boot = Vec::new();
    crate::campaign::agent_proto::write_line(
        &mut boot,
        &AgentMsg::Boot {
            host: "h".into(),
            previous: None,
        },
    )
    .unwrap();
    last.write_all(&boot).unwrap();
    last.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = [0u8; 64];
    assert!(last.read(&mut got).unwrap() > 0, "the newest is served");
    replier.join().unwrap();
}

/// When the campaign loop's `answer` returns, the reply has been written: the last
/// "stop" is not lost when the controller exits right after it.
#[test]
fn a_reply_is_written_when_answer_returns() {
    use std::io::{Read, Write};
    let (addr, rx) = listen("127.0.0.1:0", Duration::from_secs(60), true, open_access()).unwrap();
    let mut c = TcpStream::connect(&addr).unwrap();
    let mut boot = Vec::new();
    crate::campaign::agent_proto::write_line(
        &mut boot,
        &AgentMsg::Boot {
            host: "h".into(),
            previous: None,
        },
    )
    .unwrap();
    for _ in 0..20 {
        c.write_all(&boot).unwrap();
        let (_, _, _, reply) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        reply.answer(Reply::Stop { why: "done".into() });
        c.set_nonblocking(true).unwrap();
        let mut got = [0u8; 256];
        let n = c.read(&mut got).expect("the reply is already here");
        assert!(got[..n].ends_with(b"\n"), "{:?}", &got[..n]);
        c.set_nonblocking(false).unwrap();
    }
}

/// Agents without a key, as the listener tests speak (loopback only).
fn open_access() -> Access {
    Access {
        key: None,
        allow_unauthenticated: true,
    }
}

/// Without a key, agents are taken only when allowed, and that only on loopback.
#[test]
fn unkeyed_agents_need_permission_and_a_loopback_address() {
    let no = Access {
        key: None,
        allow_unauthenticated: false,
    };
    let e = listen("127.0.0.1:0", Duration::from_secs(1), true, no).unwrap_err();
    assert!(e.to_string().contains("key_file is not set"), "{e}");
    let e = listen("0.0.0.0:0", Duration::from_secs(1), true, open_access()).unwrap_err();
    assert!(e.to_string().contains("loopback"), "{e}");
}
