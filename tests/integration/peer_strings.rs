//! Strings from peers are data: verdict notes any peer may send are checked and bounded
//! at the witness, and what writers put in their descriptors is escaped when `plugpull
//! runs` prints it (JSON stays JSON).

use crate::common;

use common::{WitnessProc, test_descriptor};
use plugpull::record::RunId;
use plugpull::wire::msg::VerdictMark;
use plugpull::witness::client::{AckSender, ClientOptions, record_verdict};
use std::time::Duration;

/// A run of a few acks from a writer whose descriptor `edit` changed.
fn send_run(w: &WitnessProc, run: RunId, edit: impl FnOnce(&mut plugpull::model::RunDescriptor)) {
    let mut d = test_descriptor(run);
    edit(&mut d);
    let s = AckSender::connect(&w.addr, &d, ClientOptions::default()).unwrap();
    for i in 0..3u64 {
        s.push(plugpull::model::Ack {
            record: plugpull::record::RecordId {
                stream: 0,
                seq: i,
                offset: i * 4096,
                sectors: 8,
                write_time_ns: 1_700_000_000_000_000_000 + i,
            },
            flushed_ns: 1_700_000_000_000_001_000 + i,
        });
    }
    s.finish(Duration::from_secs(30)).unwrap();
}

fn mark(run: RunId) -> VerdictMark {
    VerdictMark {
        run_id: run.hex(),
        verdict: "PASS".into(),
        failing: 0,
        target: "/dev/sdb".into(),
        verified_at: "2026-11-30T12:00:00Z".into(),
    }
}

fn runs_text(addr: &str) -> String {
    let r = common::run(["runs", "--witness", addr]);
    assert_eq!(r.code, 0, "{r:?}");
    r.stdout
}

#[test]
fn a_verdict_note_with_an_escape_sequence_is_refused_and_never_printed_raw() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x51; 16]);
    send_run(&w, run, |_| {});
    let mut m = mark(run);
    m.target = "/dev/sdb\u{1b}[2J\u{1b}]0;owned\u{7}".into();
    let e = format!("{:#}", record_verdict(&w.addr, None, &m).unwrap_err());
    assert!(e.contains("control"), "{e}");
    assert!(e.contains("\\u{1b}") && !e.contains('\u{1b}'), "{e:?}");
    let t = runs_text(&w.addr);
    assert!(!t.contains('\u{1b}'), "{t:?}");
    assert!(t.contains("not verified"), "{t:?}");
}

#[test]
fn a_verdict_word_that_is_not_known_is_refused() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x52; 16]);
    send_run(&w, run, |_| {});
    for word in ["MAYBE", "pass", "ERROR", "PASS\u{1b}[31m", ""] {
        let mut m = mark(run);
        m.verdict = word.into();
        let e = format!("{:#}", record_verdict(&w.addr, None, &m).unwrap_err());
        assert!(e.contains("PASS, FAIL or INCONCLUSIVE"), "{word:?}: {e}");
        assert!(!e.contains('\u{1b}'), "{e:?}");
    }
    let mut m = mark(run);
    m.verified_at = "yesterday".into();
    let e = format!("{:#}", record_verdict(&w.addr, None, &m).unwrap_err());
    assert!(e.contains("RFC 3339"), "{e}");
    // What verify sends is still taken.
    for word in ["PASS", "FAIL", "INCONCLUSIVE"] {
        let mut m = mark(run);
        m.verdict = word.into();
        record_verdict(&w.addr, None, &m).unwrap();
    }
}

#[test]
fn the_note_past_the_runs_limit_is_refused() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x53; 16]);
    send_run(&w, run, |_| {});
    for n in 1..=100u64 {
        assert_eq!(record_verdict(&w.addr, None, &mark(run)).unwrap(), n);
    }
    let e = format!(
        "{:#}",
        record_verdict(&w.addr, None, &mark(run)).unwrap_err()
    );
    assert!(e.contains("already has 100 verdict notes"), "{e}");
}

#[test]
fn notes_past_the_runs_total_size_are_refused() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x54; 16]);
    send_run(&w, run, |_| {});
    let mut m = mark(run);
    m.target = format!("/dev/{}", "t".repeat(1000));
    let mut stored = 0;
    let e = loop {
        match record_verdict(&w.addr, None, &m) {
            Ok(n) => stored = n,
            Err(e) => break format!("{e:#}"),
        }
        assert!(stored < 100, "no bound on the notes file");
    };
    assert!(e.contains("would pass 65536 bytes"), "{e}");
    let file = w.dir.join(format!("{}.verdicts", run.hex()));
    assert!(std::fs::metadata(&file).unwrap().len() <= 65536);
    assert!(stored > 50, "{stored} notes");
}

#[test]
fn a_descriptor_host_with_an_escape_is_printed_escaped() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x55; 16]);
    send_run(&w, run, |d| {
        d.host = "lab\u{1b}[8m".into();
        d.device.target = "/tmp/a\u{202e}gmi.img".into();
    });
    let t = runs_text(&w.addr);
    assert!(!t.contains('\u{1b}') && !t.contains('\u{202e}'), "{t:?}");
    assert!(t.contains("lab\\u{1b}[8m"), "{t}");
    assert!(t.contains("/tmp/a\\u{202e}gmi.img"), "{t}");
    // JSON keeps the string as sent (serde escapes it as JSON).
    let r = common::run(["runs", "--witness", &w.addr, "--json"]);
    assert_eq!(r.json()["runs"][0]["host"], "lab\u{1b}[8m", "{r:?}");
}

/// A "witness" that answers every connection with an Error frame carrying terminal
/// escapes and a text-direction override: `verify`, `fetch` and `write` say what it said,
/// escaped, never raw on the user's terminal.
#[test]
fn a_witness_error_with_terminal_escapes_is_printed_escaped() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let hostile = "\u{1b}]0;OWNED\u{7}\u{1b}[2J\u{1b}[31mPASS: all good\u{202e}";
    let frame = plugpull::wire::msg::Msg::Error {
        message: hostile.into(),
    }
    .encode();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            use std::io::Write;
            let _ = s.write_all(&frame);
        }
    });
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.img");
    std::fs::write(&t, vec![0u8; 1 << 20]).unwrap();
    let out = d.path().join("out.acklog");
    let run = RunId::random().hex();
    let fresh = d.path().join("fresh.img");
    let cases: Vec<Vec<&str>> = vec![
        vec!["verify", t.to_str().unwrap(), "--witness", &addr],
        vec![
            "fetch",
            "--witness",
            &addr,
            "--run",
            &run,
            "-o",
            out.to_str().unwrap(),
        ],
        vec![
            "write",
            fresh.to_str().unwrap(),
            "--witness",
            &addr,
            "--size",
            "1M",
            "--count",
            "1",
        ],
    ];
    for args in cases {
        let r = common::run(&args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(
            all.contains("OWNED"),
            "{args:?}: the message was not shown: {all}"
        );
        assert!(
            !all.contains('\u{1b}') && !all.contains('\u{202e}') && !all.contains('\u{7}'),
            "{args:?}: raw control characters reached the terminal: {all:?}"
        );
    }
}
