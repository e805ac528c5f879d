//! A cycle's fetch tries again only while the witness says it is serving its most
//! fetches: any other refusal is the answer at once, never retried and never hidden
//! behind a wait (a drive's cycle must not sit two minutes on a witness that said no).

use crate::fetch_streamed::read_one_frame;
use plugpull::cycle::fetched::fetch_run_waiting;
use plugpull::record::RunId;
use plugpull::wire::msg::{FETCHES_BUSY, Msg};
use plugpull::witness::client::error::ClientError;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A witness that answers every fetch with `message`; counts the fetches.
fn refusing_witness(message: String) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = l.accept() {
            count.fetch_add(1, Ordering::SeqCst);
            read_one_frame(&mut s);
            let _ = s.write_all(
                &Msg::Error {
                    message: message.clone(),
                }
                .encode(),
            );
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    (addr, n)
}

#[test]
fn attack_today_a_refusal_that_is_not_busy_is_not_retried() {
    let run = RunId([0x51; 16]);
    for message in [
        "no such run".to_string(),
        // The busy words inside another refusal are not the busy answer.
        format!("refused: {FETCHES_BUSY}"),
        FETCHES_BUSY.to_uppercase(),
    ] {
        let (addr, fetches) = refusing_witness(message.clone());
        let t0 = Instant::now();
        let r = fetch_run_waiting(&addr, run, Duration::from_secs(20));
        assert!(t0.elapsed() < Duration::from_secs(5), "{message}: waited");
        assert_eq!(fetches.load(Ordering::SeqCst), 1, "{message}: retried");
        match r {
            Err(ClientError::WitnessBusy { .. }) => panic!("{message}: taken as busy"),
            Err(e) => assert!(format!("{e:#}").contains(&message), "{message}: {e:#}"),
            Ok(_) => panic!("{message}: served"),
        }
    }
}

#[test]
fn attack_today_an_always_busy_witness_is_given_up_on_in_bounded_time() {
    let run = RunId([0x52; 16]);
    let (addr, fetches) = refusing_witness(format!("{FETCHES_BUSY} (16)"));
    let t0 = Instant::now();
    let r = fetch_run_waiting(&addr, run, Duration::from_millis(800));
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(matches!(r, Err(ClientError::WitnessBusy { .. })));
    // 50 to 300 ms between tries: not a busy loop.
    let n = fetches.load(Ordering::SeqCst);
    assert!((2..=17).contains(&n), "{n} fetches in 800 ms");
}
