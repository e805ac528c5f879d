//! The write loop: records out, flush, ack, for each stream in its own thread.
//!
//! Guarantee 1 lives here: an ack is pushed only after the flush covering its record
//! returned success, and once any write or flush has failed, no stream pushes another
//! ack. The failure flag and every push share one lock, so "after" is well defined.
//!
//! A stream writes `batch` records (its queue depth, `write --batch`), then flushes once,
//! then acknowledges all of them: group commit, the pattern that lets a drive reorder
//! writes that are in flight together. The flush covers every record of its batch, so
//! the rule above holds unchanged; a failed write or flush leaves the whole batch
//! unacknowledged.
//!
//! A panicking stream thread (a bug) is a failure like a failed write: caught where the
//! thread starts, recorded as [`Failure::PANICKED`], and every stream stops at its next
//! check. Why not let it unwind: it would poison the shared locks and take every other
//! stream down with a PoisonError of its own, and the run would end without saying
//! what was acknowledged.

use super::clock::{Deadline, realtime_ns};
use super::pipe::{IoEnd, Pipe};
use super::plan::{Placer, Plan};
use super::prepare::prepare_record;
use super::ring::Prepared;
pub use super::ring::{NoBufferMemory, RecordBuffers};
use super::stamp::seal_write_time;
use crate::device::Device;
use crate::latency::{Histogram, LocalHistogram};
use crate::model::Ack;
use crate::record::RecordId;
use crate::record::RunKey;
use crate::sync::lock;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Where acks go: the witness client in production, a vector in tests.
pub trait AckSink: Send + Sync {
    fn push(&self, ack: Ack);
    /// Pushes a flushed batch in order; a sink that takes a lock per push takes it once.
    fn push_all(&self, acks: &[Ack]) {
        for &a in acks {
            self.push(a);
        }
    }
}

impl AckSink for Mutex<Vec<Ack>> {
    fn push(&self, ack: Ack) {
        lock(self).push(ack);
    }
    fn push_all(&self, acks: &[Ack]) {
        lock(self).extend_from_slice(acks);
    }
}

/// Live counters for the status line and the summary.
#[derive(Default)]
pub struct Progress {
    /// Every acknowledged batch's flush latency; each stream adds its samples a few
    /// milliseconds late (`StreamLatency`), all of them by the time it ends.
    pub flush_latency: Histogram,
    gate: Mutex<Gate>,
    /// Mirrors `gate.failure.is_some()` for the hot path; the gate stays authoritative.
    failed: AtomicBool,
    /// Writes still in flight when a failure stopped an io_uring stream, reaped (waited
    /// for) before it ended and never acknowledged.
    writes_reaped_after_failure: AtomicU64,
}

#[derive(Default)]
struct Gate {
    /// Acked records and bytes, counted under the lock every push takes anyway: exact
    /// the moment a batch is pushed (a campaign waits for them before it cuts), and on
    /// the lock's own cache line instead of two more that every stream writes.
    records_acked: u64,
    bytes_acked: u64,
    failure: Option<Failure>,
    last_ack: Option<Ack>,
    /// The last sequence number pushed per stream (index: stream).
    last_seq_by_stream: Vec<u64>,
}

impl Gate {
    /// Acks leave each stream in sequence order, each once: the witness refuses any
    /// other order, and verify's ordering holes mean something only if it holds. Checked
    /// in every build (a comparison per ack, under the lock the push takes anyway).
    fn check_order(&mut self, acks: &[Ack]) {
        let stream = acks[0].record.stream as usize;
        if self.last_seq_by_stream.len() <= stream {
            self.last_seq_by_stream.resize(stream + 1, 0);
        }
        let mut last = self.last_seq_by_stream[stream];
        for a in acks {
            assert!(
                a.record.stream as usize == stream && a.record.seq > last,
                "ack out of order: stream {} seq {} after stream {stream} seq {last}",
                a.record.stream,
                a.record.seq
            );
            last = a.record.seq;
        }
        self.last_seq_by_stream[stream] = last;
    }
}

/// The first write or flush that failed, or the first stream thread that panicked.
#[derive(Clone, Debug)]
pub struct Failure {
    /// "write", "flush" or [`Failure::PANICKED`].
    pub during: &'static str,
    pub record: RecordId,
    pub error: String,
    pub raw_os_error: Option<i32>,
}

impl Failure {
    /// `during` of a stream thread that panicked: plugpull's own failure, not the
    /// target's.
    pub const PANICKED: &'static str = "the writer's own code (a stream thread panicked)";

    /// Whether plugpull itself failed (a panic), not the target.
    pub fn is_internal(&self) -> bool {
        self.during == Failure::PANICKED
    }
}

impl Progress {
    /// Records acknowledged so far (pushed to the ack sink).
    pub fn records_acked(&self) -> u64 {
        lock(&self.gate).records_acked
    }
    /// Bytes of the records acknowledged so far.
    pub fn bytes_acked(&self) -> u64 {
        lock(&self.gate).bytes_acked
    }
    pub fn last_ack(&self) -> Option<Ack> {
        lock(&self.gate).last_ack
    }
    pub fn failure(&self) -> Option<Failure> {
        lock(&self.gate).failure.clone()
    }
    /// Writes in flight when a failure stopped an io_uring stream, reaped unacknowledged.
    pub fn writes_reaped_after_failure(&self) -> u64 {
        self.writes_reaped_after_failure.load(Relaxed)
    }
    pub(super) fn count_reaped_after_failure(&self, writes: u64) {
        self.writes_reaped_after_failure.fetch_add(writes, Relaxed);
    }
    /// Whether a failure was recorded (cheap: for the hot path).
    pub(super) fn has_failed(&self) -> bool {
        self.failed.load(Relaxed)
    }

    /// Pushes the flushed batch `acks` unless a failure was recorded first, and counts
    /// it. Returns false if refused.
    pub(super) fn ack(&self, sink: &dyn AckSink, acks: &[Ack]) -> bool {
        let Some(&last) = acks.last() else {
            return true;
        };
        let bytes: u64 = acks.iter().map(|a| a.record.len_bytes()).sum();
        let mut g = lock(&self.gate);
        if g.failure.is_some() {
            return false;
        }
        g.check_order(acks);
        sink.push_all(acks);
        g.last_ack = Some(last);
        g.records_acked += acks.len() as u64;
        g.bytes_acked += bytes;
        true
    }

    pub(super) fn fail(&self, f: Failure) {
        let mut g = lock(&self.gate);
        if g.failure.is_none() {
            g.failure = Some(f);
        }
        self.failed.store(true, Relaxed);
    }
}

/// Runs every stream until the plan's limits, `stop` or the first failure; one record
/// per flush. An error (before anything is written) when the streams' record buffers
/// cannot be allocated.
pub fn run_streams(
    dev: &dyn Device,
    plan: &Plan,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<(), NoBufferMemory> {
    run_streams_batched(dev, plan, 1, sink, stop, progress)
}

/// [`run_streams`] with `batch` records written per flush in each stream (at least 1).
pub fn run_streams_batched(
    dev: &dyn Device,
    plan: &Plan,
    batch: usize,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<(), NoBufferMemory> {
    let buffers = RecordBuffers::allocate(plan, batch)?;
    run_streams_with(dev, plan, buffers, sink, stop, progress);
    Ok(())
}

/// [`run_streams_batched`] on buffers allocated beforehand (by
/// [`RecordBuffers::allocate`] for this `plan`), so that a caller can refuse the run
/// before it tells anyone the run started.
pub fn run_streams_with(
    dev: &dyn Device,
    plan: &Plan,
    buffers: RecordBuffers,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
) {
    let started = AtomicU64::new(0);
    let t0 = Instant::now();
    let io = Io {
        dev,
        plan,
        batch: buffers.batch,
        sink,
        stop,
        progress,
        started: &started,
        t0,
    };
    std::thread::scope(|s| {
        for (stream, ring) in (0..plan.streams).zip(buffers.rings) {
            let io = &io;
            s.spawn(move || stream_loop(plan, progress, stream, ring, |pipe| io_loop(io, pipe)));
        }
    });
}

/// What every stream shares.
struct Io<'a> {
    dev: &'a dyn Device,
    plan: &'a Plan,
    /// Records written per flush.
    batch: usize,
    sink: &'a dyn AckSink,
    stop: &'a AtomicBool,
    progress: &'a Progress,
    /// Records claimed by all streams (for `plan.count`).
    started: &'a AtomicU64,
    t0: Instant,
}

/// Prepared records the generator hands to the I/O thread at a time: one lock round
/// and at most one wake-up per group instead of per record (at ~300k records/s the
/// per-record hand-off showed as ~8% of the writer's samples in `perf`).
const READY_GROUP: usize = 8;

/// One stream: a generator thread prepares records (content hashing is most of the CPU
/// cost) while this thread writes, flushes and acknowledges (`io_side`: the synchronous
/// loop or the io_uring one), so the device, not the hashing, sets the pace.
pub(super) fn stream_loop(
    plan: &Plan,
    progress: &Progress,
    stream: u16,
    ring: Vec<Prepared>,
    io_side: impl FnOnce(&Pipe<Prepared>),
) {
    let blank = RecordId {
        stream,
        seq: 0,
        offset: 0,
        sectors: 0,
        write_time_ns: 0,
    };
    let pipe = Pipe::new(ring);
    let panicked = |what: Box<dyn std::any::Any + Send>| {
        progress.fail(Failure {
            during: Failure::PANICKED,
            record: blank,
            error: panic_text(what.as_ref()),
            raw_os_error: None,
        });
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let generate = || {
                let key = RunKey::new(plan.run);
                let mut placer = Placer::new(plan, stream);
                let mut seq = 0u64;
                let mut group = Vec::with_capacity(READY_GROUP);
                let mut bufs = Vec::new();
                while pipe.take_free_into(&mut bufs) {
                    let taken = bufs.len();
                    for (i, Prepared { mut buf, .. }) in bufs.drain(..).enumerate() {
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
                        group.push(Prepared { buf, rec });
                        let last = i + 1 == taken;
                        if group.len() == READY_GROUP || last {
                            pipe.put_ready_all(&mut group, last);
                        }
                    }
                }
            };
            if let Err(what) = catch_unwind(AssertUnwindSafe(generate)) {
                panicked(what);
                // The I/O thread may be waiting for records that will never come.
                pipe.close();
            }
        });
        if let Err(what) = catch_unwind(AssertUnwindSafe(|| io_side(&pipe))) {
            panicked(what);
        }
        pipe.close();
    });
}

/// A panic's message, as `panic!` was given it.
fn panic_text(what: &(dyn std::any::Any + Send)) -> String {
    let text = what
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| what.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    format!("panicked: {text}")
}

/// How many records the next batch may hold: `io.batch`, fewer when `plan.count` is
/// nearly reached, 0 when it is.
fn claim(io: &Io) -> usize {
    let want = io.batch as u64;
    match io.plan.count {
        None => io.batch,
        Some(n) => {
            let before = io.started.fetch_add(want, Relaxed);
            n.saturating_sub(before).min(want) as usize
        }
    }
}

/// Writes batches until a limit, `stop` or a failure: each record stamped with its write
/// time and written, one flush, then the whole batch acknowledged.
fn io_loop(io: &Io, pipe: &Pipe<Prepared>) {
    let progress = io.progress;
    let mut batch: Vec<Prepared> = Vec::with_capacity(io.batch);
    let mut acks: Vec<Ack> = Vec::with_capacity(io.batch);
    let mut end = IoEnd::new(pipe);
    let mut latency = StreamLatency::new(&progress.flush_latency);
    // The last flush time read; the duration is checked against it (see `Deadline`).
    let mut flushed_ns = realtime_ns();
    let mut deadline = io
        .plan
        .duration
        .map(|d| Deadline::new(io.t0, d, flushed_ns));
    loop {
        if io.stop.load(Relaxed) || progress.failed.load(Relaxed) {
            return;
        }
        if deadline.as_mut().is_some_and(|d| d.passed(flushed_ns)) {
            return;
        }
        let n = claim(io);
        // The last batch's buffers go back to the generator (by `IoEnd`, a quarter of the
        // ring at a time).
        if n == 0 || !end.next_batch(n, &mut batch) {
            return;
        }
        for Prepared { buf, rec } in batch.iter_mut() {
            rec.write_time_ns = realtime_ns();
            let bytes = &mut buf[..rec.len_bytes() as usize];
            seal_write_time(bytes, rec.write_time_ns);
            if let Err(e) = io.dev.write_at(bytes, rec.offset) {
                progress.fail(failure("write", *rec, e));
                return;
            }
        }
        if let Err(e) = io.dev.flush() {
            progress.fail(failure("flush", batch[0].rec, e));
            return;
        }
        flushed_ns = realtime_ns();
        acks.clear();
        for p in &batch {
            acks.push(Ack {
                record: p.rec,
                flushed_ns,
            });
        }
        if !progress.ack(io.sink, &acks) {
            return;
        }
        // From the first write's stamped time: one clock read fewer per batch than a
        // monotonic timer of its own (a clock step can skew one sample, not an ack).
        latency.add(
            flushed_ns,
            flushed_ns.saturating_sub(batch[0].rec.write_time_ns),
        );
    }
}

/// A stream adds its flush latencies to the shared histogram after this many batches,
/// or [`MERGE_NS`] after it last did, whichever comes first: the status line (redrawn
/// every 200 ms) shows its percentiles while the run goes on.
const MERGE_BATCHES: u32 = 256;
const MERGE_NS: u64 = 50_000_000;

/// One stream's flush latencies, kept by its I/O thread and added to the shared
/// histogram every [`MERGE_BATCHES`] batches or [`MERGE_NS`], and when the stream ends
/// (on drop, whichever way `io_loop` returns). Why: with every stream adding to the
/// shared histogram per batch (three atomic operations), its cache lines moved between
/// the cores on every batch: with 2 streams `io_loop`'s own code took 0.25 µs a record
/// against 0.07 with one (perf, /dev/shm). A stalled flush leaves the last
/// samples before it unshown until the stream goes on or ends; the acked counts, which
/// decisions wait for, are exact at once (`Gate`).
pub(super) struct StreamLatency<'a> {
    shared: &'a Histogram,
    local: LocalHistogram,
    batches: u32,
    merged_ns: u64,
}

impl<'a> StreamLatency<'a> {
    pub(super) fn new(shared: &'a Histogram) -> StreamLatency<'a> {
        StreamLatency {
            shared,
            local: LocalHistogram::default(),
            batches: 0,
            merged_ns: 0,
        }
    }

    /// Counts an acknowledged batch whose flush returned at `flushed_ns` (wall clock),
    /// `latency_ns` after its first write.
    pub(super) fn add(&mut self, flushed_ns: u64, latency_ns: u64) {
        self.local.record_ns(latency_ns);
        self.batches += 1;
        // A step of the wall clock back or forward merges early, never late.
        if self.batches >= MERGE_BATCHES || flushed_ns.abs_diff(self.merged_ns) >= MERGE_NS {
            self.merge();
            self.merged_ns = flushed_ns;
        }
    }

    fn merge(&mut self) {
        self.local.drain_into(self.shared);
        self.batches = 0;
    }
}

impl Drop for StreamLatency<'_> {
    fn drop(&mut self) {
        self.merge();
    }
}

pub(super) fn failure(during: &'static str, record: RecordId, e: std::io::Error) -> Failure {
    Failure {
        during,
        record,
        error: e.to_string(),
        raw_os_error: e.raw_os_error(),
    }
}

#[cfg(test)]
mod tests;
