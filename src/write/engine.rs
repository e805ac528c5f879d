//! The write loop: records out, flush, ack, for each stream in its own thread.
//!
//! Guarantee 1 lives here: an ack is pushed only after the flush covering its record
//! returned success, and once any write or flush has failed, no stream pushes another
//! ack. The failure flag and every push share one lock, so "after" is well defined.

use super::pipe::Pipe;
use super::plan::{Placer, Plan};
use crate::device::{AlignedBuf, Device};
use crate::latency::Histogram;
use crate::model::{Ack, now_ns};
use crate::record::RunKey;
use crate::record::{RecordId, prepare_record, set_write_time};
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
    /// Mirrors `gate.failure.is_some()` for the hot path; the gate stays authoritative.
    failed: AtomicBool,
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
        self.failed.store(true, Relaxed);
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

/// A record whose content is ready; only its write time remains to be stamped.
struct Prepared {
    buf: AlignedBuf,
    rec: RecordId,
}

/// Record buffers per stream: the generator refills half of them at a time.
const BUFFERS_PER_STREAM: usize = 32;

/// One stream: a generator thread prepares records (content hashing is most of the CPU
/// cost) while this thread writes, flushes and acknowledges, so the device, not the
/// hashing, sets the pace.
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
    let blank = RecordId {
        stream,
        seq: 0,
        offset: 0,
        sectors: 0,
        write_time_ns: 0,
    };
    let pipe = Pipe::new(
        (0..BUFFERS_PER_STREAM)
            .map(|_| Prepared {
                buf: AlignedBuf::new(plan.record_max as usize),
                rec: blank,
            })
            .collect(),
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            let key = RunKey::new(plan.run);
            let mut placer = Placer::new(plan, stream);
            let mut seq = 0u64;
            loop {
                let bufs = pipe.take_free();
                if bufs.is_empty() {
                    return;
                }
                for Prepared { mut buf, .. } in bufs {
                    seq += 1;
                    let (offset, len) = placer.next_record();
                    let rec = RecordId {
                        stream,
                        seq,
                        offset,
                        sectors: (len / 512) as u32,
                        write_time_ns: 0,
                    };
                    prepare_record(&mut buf[..len as usize], &key, plan.run, &rec);
                    pipe.put_ready(Prepared { buf, rec });
                }
            }
        });
        io_loop(dev, plan, sink, stop, progress, started, t0, &pipe);
        pipe.close();
    });
}

#[allow(clippy::too_many_arguments)]
fn io_loop(
    dev: &dyn Device,
    plan: &Plan,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
    started: &AtomicU64,
    t0: Instant,
    pipe: &Pipe<Prepared>,
) {
    loop {
        if stop.load(Relaxed) || progress.failed.load(Relaxed) {
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
        let Some(Prepared { mut buf, mut rec }) = pipe.take_ready() else {
            return;
        };
        rec.write_time_ns = now_ns();
        let bytes = &mut buf[..rec.len_bytes() as usize];
        set_write_time(bytes, rec.write_time_ns);
        let write_started = Instant::now();
        if let Err(e) = dev.write_at(bytes, rec.offset) {
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
        pipe.put_free(Prepared { buf, rec });
    }
}
