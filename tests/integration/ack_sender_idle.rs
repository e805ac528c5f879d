//! The ack sender at light load: the acks of a quiet writer (one flush now and then, the
//! writer not finishing) reach the witness and come back confirmed within a bound on
//! their own, not only when the run ends or a heartbeat happens to carry the sender along.
//! Why a test of its own: the sender waits a little for more acks before it writes (one
//! write per ack would cost a syscall and a witness commit per ack), and a send policy
//! that waits for a wake-up nobody gives leaves the last acks of an idle writer unsent.
//! (That no ack is pushed before its flush is `tests/integration/write_batch.rs`; the sender only
//! sends what was pushed.)

use crate::common;

use common::{WitnessProc, test_descriptor};
use plugpull::model::Ack;
use plugpull::record::{RecordId, RunId};
use plugpull::witness::client::{AckSender, ClientOptions};
use std::time::{Duration, Instant};

/// How long a flush's acks may take to be confirmed: a round trip takes milliseconds,
/// so this is slack for a loaded machine; a third of the heartbeat below, so a sender
/// that leaves them until a heartbeat (or the run's end) wakes it fails.
const CONFIRM_BOUND: Duration = Duration::from_secs(20);
/// The heartbeat interval of the sender under test.
const HEARTBEAT: Duration = Duration::from_secs(60);

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 1_700_000_000_000_000_000 + i * 3_000_000,
        },
        flushed_ns: 1_700_000_000_000_000_000 + i * 3_000_000 + 500,
    }
}

/// Pushes `acks_per_flush` acks at a time, `flushes` times, pausing between flushes like
/// a writer on a slow drive, and returns how long each flush's acks took to be confirmed
/// durable (push to `stats().durable` covering them).
fn quiet_writer(flushes: u64, acks_per_flush: u64) -> Vec<Duration> {
    let tmp = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&tmp.path().join("w"));
    let mut d = test_descriptor(RunId([0x5e; 16]));
    d.settings.streams = 1;
    let opts = ClientOptions {
        // A heartbeat wakes the sender; it must not be what delivers the acks.
        heartbeat: HEARTBEAT,
        ..Default::default()
    };
    let s = AckSender::connect(&w.addr, &d, opts).unwrap();
    let mut waits = Vec::new();
    let mut next = 0;
    for _ in 0..flushes {
        let batch: Vec<Ack> = (next..next + acks_per_flush).map(ack).collect();
        next += acks_per_flush;
        let t = Instant::now();
        s.push_all(&batch);
        loop {
            let st = s.stats();
            assert!(
                st.durable <= st.pushed,
                "confirmed acks never pushed: {st:?}"
            );
            if st.durable == next {
                break;
            }
            assert!(
                t.elapsed() < CONFIRM_BOUND,
                "acks {}..{next} of a quiet writer not confirmed within {CONFIRM_BOUND:?}: \
                 {st:?}",
                next - acks_per_flush
            );
            std::thread::sleep(Duration::from_micros(20));
        }
        waits.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(2));
    }
    let st = s.finish(Duration::from_secs(10)).unwrap();
    assert_eq!((st.pushed, st.durable), (next, next));
    waits
}

fn report(what: &str, mut waits: Vec<Duration>) {
    waits.sort();
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize].as_micros();
    // Printed for docs/performance.md (`cargo test --release --test integration --
    // --nocapture ack_sender_idle::`); the bound above is the test.
    println!(
        "{what}: push to durable over {} flushes: p50 {} us, p90 {} us, max {} us",
        waits.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
}

#[test]
fn a_quiet_writers_acks_are_confirmed_without_finishing() {
    report("1 ack per flush", quiet_writer(200, 1));
}

#[test]
fn a_quiet_writers_batches_are_confirmed_without_finishing() {
    report("32 acks per flush", quiet_writer(100, 32));
}
