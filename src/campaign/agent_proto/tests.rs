//! Tests of the agent protocol: messages, the controller's per-connection loop
//! (several messages, idle limits, garbage), and the agent's requests and retries.

use super::*;
use std::net::TcpListener;

#[test]
fn messages_round_trip_with_their_tags() {
    let m = AgentMsg::Acking {
        host: "h".into(),
        cycle: 3,
        run_id: "ab".into(),
        acked: 7,
    };
    let v = serde_json::to_value(Envelope {
        format: FORMAT.into(),
        body: &m,
    })
    .unwrap();
    assert_eq!(v["type"], "acking");
    assert_eq!(v["format"], FORMAT);
    let back: Envelope<AgentMsg> = serde_json::from_value(v).unwrap();
    assert!(matches!(back.body, AgentMsg::Acking { cycle: 3, .. }));
    let r = serde_json::to_value(Reply::Stop { why: "done".into() }).unwrap();
    assert_eq!(r["type"], "stop");
}

/// A boot report as agents before the shared summary type wrote it (its fields in
/// their old order) still reads, and reads back the same after a round trip.
#[test]
fn an_old_boot_report_reads() {
    let old = r#"{"format":"plugpull-agent/1","type":"boot","host":"h","previous":{"cycle":2,"run_id":"ab","verdict":"FAIL","summary":"s","counts":{"intact":1,"lost":2},"acked_records":3,"last_acked":null,"loss_window":{"records":2,"bytes":8192,"ms":1.5},"ordering_holes":1,"dead_device":null,"reattach_ms":4.0,"unsafe_shutdowns_delta":1,"error":null}}"#;
    let env: Envelope<AgentMsg> = serde_json::from_str(old).unwrap();
    let AgentMsg::Boot {
        previous: Some(p), ..
    } = &env.body
    else {
        panic!("not a boot report with a previous run");
    };
    assert_eq!(p.report.verdict, crate::model::Verdict::Fail);
    assert_eq!(p.report.counts.get(crate::model::RecordClass::Lost), 2);
    assert_eq!(p.report.ordering_holes, 1);
    assert_eq!(p.acked_records, 3);
    let again: Envelope<AgentMsg> =
        serde_json::from_str(&serde_json::to_string(&env).unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&env).unwrap()
    );
}

/// A served connection on loopback: the client's end, and the server thread that
/// answers every Boot with Stop naming how many messages came before.
fn served(idle: Duration) -> (TcpStream, std::thread::JoinHandle<Served>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let t = std::thread::spawn(move || {
        let mut n = 0;
        let open = Access {
            key: None,
            allow_unauthenticated: true,
        };
        serve(
            s,
            idle,
            &open,
            0,
            move |m, _| {
                n += 1;
                Some(match m {
                    AgentMsg::Boot { .. } => Reply::Stop {
                        why: format!("message {n}"),
                    },
                    AgentMsg::Acking { .. } => Reply::Ok,
                })
            },
            || {},
        )
    });
    (c, t)
}

fn boot_line() -> String {
    let mut v = Vec::new();
    let m = AgentMsg::Boot {
        host: "h".into(),
        previous: None,
    };
    write_line(&mut v, &m).unwrap();
    String::from_utf8(v).unwrap()
}

fn replies(c: &TcpStream, n: usize) -> Vec<Reply> {
    let mut r = LineReader::new(c.try_clone().unwrap());
    (0..n)
        .map(|_| {
            r.next(Duration::from_secs(10), Duration::from_secs(10))
                .unwrap()
                .unwrap()
        })
        .collect()
}

/// Two messages written together (a guest's connections back to back on one host
/// connection): each answered, in order, then a clean end at EOF.
#[test]
fn several_messages_on_one_connection_are_answered_in_order() {
    let (mut c, t) = served(Duration::from_secs(10));
    c.write_all(format!("{}{}", boot_line(), boot_line()).as_bytes())
        .unwrap();
    let r = replies(&c, 2);
    assert!(
        matches!(&r[0], Reply::Stop { why } if why == "message 1"),
        "{r:?}"
    );
    assert!(
        matches!(&r[1], Reply::Stop { why } if why == "message 2"),
        "{r:?}"
    );
    c.write_all(boot_line().as_bytes()).unwrap();
    assert_eq!(replies(&c, 1).len(), 1);
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let s = t.join().unwrap();
    assert_eq!(s.messages, 3);
    assert!(s.end.is_ok(), "{:?}", s.end);
}

/// A connection that idles (a booting guest) is served when it finally speaks within
/// its idle limit, and dropped as silent past it.
#[test]
fn an_idle_connection_is_served_within_its_limit_and_dropped_past_it() {
    let (mut c, t) = served(Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1500));
    c.write_all(boot_line().as_bytes()).unwrap();
    assert_eq!(replies(&c, 1).len(), 1);
    drop(c);
    assert_eq!(t.join().unwrap().messages, 1);

    let (c, t) = served(Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(800));
    let s = t.join().unwrap();
    assert_eq!(s.messages, 0);
    assert!(
        matches!(s.end, Err(ProtoError::Silent { .. })),
        "{:?}",
        s.end
    );
    drop(c);
}

/// Garbage after a good message, and a line cut off by EOF: dropped with an error
/// that shows what came, after the good one was answered.
#[test]
fn garbage_and_half_lines_end_the_connection_with_a_reason() {
    let (mut c, t) = served(Duration::from_secs(10));
    c.write_all(format!("{}GET / HTTP/1.0\n", boot_line()).as_bytes())
        .unwrap();
    let s = t.join().unwrap();
    assert_eq!(s.messages, 1);
    let e = s.end.unwrap_err();
    assert!(matches!(e, ProtoError::NotOurs { .. }), "{e:?}");
    assert!(e.to_string().contains("GET / HTTP/1.0"), "{e}");
    drop(c);

    let (mut c, t) = served(Duration::from_secs(10));
    let b = boot_line();
    c.write_all(&b.as_bytes()[..b.len() / 2]).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let e = t.join().unwrap().end.unwrap_err();
    assert!(matches!(e, ProtoError::Truncated { .. }), "{e:?}");
    assert!(e.to_string().contains("in the middle of a message"), "{e}");
}

/// Once a line has begun, its end must come within the line limit, even when the
/// connection was allowed to idle far longer before it.
#[test]
fn a_stalled_line_times_out_on_the_line_limit() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    c.write_all(b"{\"format\":").unwrap();
    let t0 = Instant::now();
    let e = LineReader::new(s)
        .next::<AgentMsg>(Duration::from_secs(60), Duration::from_millis(300))
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(e, ProtoError::LineTimeout { bytes: 10, .. }),
        "{e:?}"
    );
}

/// A fake controller on loopback: each accepted connection is handed to the next of
/// `conns` in turn (it reads the request line first).
fn controller(conns: Vec<fn(&mut TcpStream)>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for f in conns {
            let (mut s, _) = l.accept().unwrap();
            let mut line = String::new();
            BufReader::new(s.try_clone().unwrap())
                .read_line(&mut line)
                .unwrap();
            f(&mut s);
        }
    });
    addr
}

fn acking() -> AgentMsg {
    AgentMsg::Acking {
        host: "h".into(),
        cycle: 1,
        run_id: "ab".into(),
        acked: 1,
    }
}

/// A connection that dies mid-reply, or a controller that never answers, fails the
/// request promptly (never hangs); the retry on a fresh connection then gets the reply.
#[test]
fn a_request_cut_mid_reply_fails_promptly_and_the_retry_succeeds() {
    let addr = controller(vec![
        |s| s.write_all(br#"{"format":"plugpull-agent/1","ty"#).unwrap(),
        |_| std::thread::sleep(Duration::from_secs(2)),
        |s| write_line(s, &Reply::Ok).unwrap(),
    ]);
    let t0 = Instant::now();
    let e = request(&addr, &acking(), Duration::from_secs(5), None).unwrap_err();
    assert!(matches!(e, ProtoError::Truncated { .. }), "{e:?}");
    let e = request(&addr, &acking(), Duration::from_millis(500), None).unwrap_err();
    assert!(matches!(e, ProtoError::Silent { .. }), "{e:?}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    let r = retrying(
        Duration::from_secs(10),
        Duration::from_millis(50),
        |_| {},
        || request(&addr, &acking(), Duration::from_secs(5), None),
    );
    assert!(matches!(r, Ok(Reply::Ok)), "{r:?}");
}

/// Retries until success, telling each failure; past the wait, the last error.
#[test]
fn retrying_gives_up_with_the_last_error_after_the_wait() {
    let mut n = 0;
    let mut told = 0;
    let r: Result<u32, std::io::Error> = retrying(
        Duration::from_secs(5),
        Duration::from_millis(1),
        |_| told += 1,
        || {
            n += 1;
            if n < 3 {
                Err(std::io::Error::other(format!("try {n}")))
            } else {
                Ok(n)
            }
        },
    );
    assert_eq!(r.unwrap(), 3);
    assert_eq!(told, 2);
    let t0 = Instant::now();
    let mut n = 0;
    let r: Result<(), std::io::Error> = retrying(
        Duration::from_millis(200),
        Duration::from_millis(20),
        |_| {},
        || {
            n += 1;
            Err(std::io::Error::other(format!("try {n}")))
        },
    );
    assert!(t0.elapsed() >= Duration::from_millis(200));
    assert_eq!(r.unwrap_err().to_string(), format!("try {n}"));
    assert!(n > 2);
}

/// A keyed agent and controller talk; a wrong key, an unsealed message and a replayed
/// sealed line are each refused.
#[test]
fn keyed_requests_are_answered_and_wrong_keys_refused() {
    use crate::campaign::agent_auth::AgentKey;
    use crate::wire::auth::Key;
    let key = |s: &str| AgentKey::from_key(&Key::from_secret(s.as_bytes()).unwrap());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let access = Access {
            key: Some(key("0123456789abcdef0123")),
            allow_unauthenticated: false,
        };
        (0..3)
            .map(|i| {
                let (s, _) = l.accept().unwrap();
                serve(
                    s,
                    Duration::from_secs(5),
                    &access,
                    i,
                    |_, o| {
                        assert!(o.keyed);
                        Some(Reply::Ok)
                    },
                    || {},
                )
            })
            .collect::<Vec<_>>()
    });
    let good = key("0123456789abcdef0123");
    assert!(matches!(
        request(&addr, &acking(), Duration::from_secs(5), Some(&good)).unwrap(),
        Reply::Ok
    ));
    let bad = key("another key of 20 b");
    assert!(request(&addr, &acking(), Duration::from_secs(5), Some(&bad)).is_err());
    assert!(request(&addr, &acking(), Duration::from_secs(5), None).is_err());
    let served = t.join().unwrap();
    assert!(served[0].end.is_ok());
    let e = crate::exit::error_chain(served[1].end.as_ref().unwrap_err());
    assert!(e.contains("MAC check failed"), "{e}");
    let e = crate::exit::error_chain(served[2].end.as_ref().unwrap_err());
    assert!(e.contains("without a key"), "{e}");
}
