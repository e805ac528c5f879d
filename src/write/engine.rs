//! The write loop: records out, flush, ack, for each stream in its own thread.
//!
//! Guarantee 1 lives here: an ack is pushed only after the flush covering its record
//! returned success, and once any write or flush has failed, no stream pushes another
//! ack. The failure flag and every push share one lock, so "after" is well defined.

use super::plan::{Placer, Plan};
use crate::ack::{Ack, now_ns};
use crate::device::{AlignedBuf, Device};
use crate::latency::Histogram;
use crate::record::{RecordId, fill_record};
use crate::rng::RunKey;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Where acks go: the witness client in production, a vector in tests.
pub trait AckSink: Send + Sync {
    fn push(&self, ack: Ack);
}

impl AckSink for Mutex<Vec<Ack>> {
    fn push(&self, ack: Ack) {
        self.lock().unwrap().push(ack);
    }
}

/// Live counters for the status line and the summary.
#[derive(Default)]
pub struct Progress {
    pub records_acked: AtomicU64,
    pub bytes_acked: AtomicU64,
    pub flush_latency: Histogram,
    gate: Mutex<Gate>,
}

#[derive(Default)]
struct Gate {
    failure: Option<Failure>,
    last_ack: Option<Ack>,
}

/// The first write or flush that failed.
#[derive(Clone, Debug)]
pub struct Failure {
    /// "write" or "flush".
    pub during: &'static str,
    pub record: RecordId,
    pub error: String,
    pub raw_os_error: Option<i32>,
}

impl Progress {
    pub fn last_ack(&self) -> Option<Ack> {
        self.gate.lock().unwrap().last_ack
    }
    pub fn failure(&self) -> Option<Failure> {
        self.gate.lock().unwrap().failure.clone()
    }

    /// Pushes `ack` unless a failure was recorded first. Returns false if refused.
    fn ack(&self, sink: &dyn AckSink, ack: Ack) -> bool {
        let mut g = self.gate.lock().unwrap();
        if g.failure.is_some() {
            return false;
        }
        sink.push(ack);
        g.last_ack = Some(ack);
        drop(g);
        self.records_acked.fetch_add(1, Relaxed);
        self.bytes_acked.fetch_add(ack.record.len_bytes(), Relaxed);
        true
    }

    fn fail(&self, f: Failure) {
        let mut g = self.gate.lock().unwrap();
        if g.failure.is_none() {
            g.failure = Some(f);
        }
    }
}

/// Runs every stream until the plan's limits, `stop`, or the first failure.
pub fn run_streams(
    dev: &dyn Device,
    plan: &Plan,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
) {
    let started = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for stream in 0..plan.streams {
            let started = &started;
            s.spawn(move || stream_loop(dev, plan, stream, sink, stop, progress, started, t0));
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn stream_loop(
    dev: &dyn Device,
    plan: &Plan,
    stream: u16,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
    started: &AtomicU64,
    t0: Instant,
) {
    let key = RunKey::new(plan.run);
    let mut placer = Placer::new(plan, stream);
    let mut buf = AlignedBuf::new(plan.record_max as usize);
    let mut seq = 0u64;
    loop {
        if stop.load(Relaxed) || progress.gate.lock().unwrap().failure.is_some() {
            return;
        }
        if plan.duration.is_some_and(|d| t0.elapsed() >= d) {
            return;
        }
        if let Some(n) = plan.count {
            if started.fetch_add(1, Relaxed) >= n {
                return;
            }
        }
        seq += 1;
        let (offset, len) = placer.next();
        let rec = RecordId {
            stream,
            seq,
            offset,
            sectors: (len / 512) as u32,
            write_time_ns: now_ns(),
        };
        let bytes = &mut buf[..len as usize];
        fill_record(bytes, &key, plan.run, &rec);
        let write_started = Instant::now();
        if let Err(e) = dev.write_at(bytes, offset) {
            progress.fail(Failure {
                during: "write",
                record: rec,
                error: e.to_string(),
                raw_os_error: e.raw_os_error(),
            });
            return;
        }
        if let Err(e) = dev.flush() {
            progress.fail(Failure {
                during: "flush",
                record: rec,
                error: e.to_string(),
                raw_os_error: e.raw_os_error(),
            });
            return;
        }
        let flushed_ns = now_ns();
        progress
            .flush_latency
            .record_ns(write_started.elapsed().as_nanos() as u64);
        if !progress.ack(
            sink,
            Ack {
                record: rec,
                flushed_ns,
            },
        ) {
            return;
        }
    }
}
