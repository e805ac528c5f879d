//! One stream's I/O thread on its ring: keep `iodepth` writes in flight, submit a flush
//! every `flush_every` completions or `flush_within` after the first of them, hand each
//! completion to the epoch rule, push what it acknowledges.

use super::settings::DepthSettings;
use crate::device::FlushMethod;
use crate::model::Ack;
use crate::record::RecordId;
use crate::write::clock::{Deadline, realtime_ns};
use crate::write::engine::{AckSink, Failure, Progress, StreamLatency, failure};
use crate::write::epoch::{Completion, Epochs, FlushId};
use crate::write::pipe::{IoEnd, Pipe};
use crate::write::plan::Plan;
use crate::write::ring::Prepared;
use crate::write::stamp::seal_write_time;
use io_uring::{IoUring, opcode, types};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What every stream shares.
pub(super) struct Shared<'a> {
    pub fd: BorrowedFd<'a>,
    pub plan: &'a Plan,
    pub depth: DepthSettings,
    pub flush: FlushMethod,
    pub sink: &'a dyn AckSink,
    pub stop: &'a AtomicBool,
    pub progress: &'a Progress,
    /// Records claimed by all streams (for `plan.count`).
    pub started: &'a AtomicU64,
    pub t0: Instant,
}

/// The user data of the flush; a write's is its slot (below `iodepth`).
const FLUSH_TAG: u64 = u64::MAX;

/// A stream's state on its ring.
struct Stream<'a, 'p> {
    io: &'a Shared<'a>,
    ring: IoUring,
    epochs: Epochs,
    /// The buffer of each write in flight, by slot (its user data).
    slots: Vec<Option<Prepared>>,
    free_slots: Vec<usize>,
    /// Every record submitted and not acknowledged, in sequence order.
    unacked: VecDeque<RecordId>,
    flush_in_flight: Option<FlushId>,
    /// When the oldest write the next flush will cover completed.
    awaiting_since: Option<Instant>,
    end: IoEnd<'p, Prepared>,
    /// Buffers whose writes completed, going back to the generator.
    returned: Vec<Prepared>,
    acks: Vec<Ack>,
    latency: StreamLatency<'a>,
    /// No more records will be taken (a limit, `stop`, the generator gone).
    draining: bool,
    /// A record taken but not submitted: it overlaps a write in flight.
    held: Option<Prepared>,
    /// Test support: the seq whose write is submitted on an invalid descriptor.
    fail_seq: Option<u64>,
}

/// Runs the stream until the plan's limits, `stop` or a failure; every write it
/// submitted has been reaped when it returns (or its buffers are leaked, never freed,
/// if the ring itself failed).
pub(super) fn run(io: &Shared, stream: u16, ring: IoUring, pipe: &Pipe<Prepared>) {
    let depth = io.depth.iodepth as usize;
    let mut s = Stream {
        io,
        ring,
        epochs: Epochs::new(1),
        slots: (0..depth).map(|_| None).collect(),
        free_slots: (0..depth).rev().collect(),
        unacked: VecDeque::with_capacity(io.depth.window(io.flush)),
        flush_in_flight: None,
        awaiting_since: None,
        end: IoEnd::new(pipe),
        returned: Vec::with_capacity(depth),
        acks: Vec::with_capacity(io.depth.window(io.flush)),
        latency: StreamLatency::new(&io.progress.flush_latency),
        draining: false,
        fail_seq: None,
        held: None,
    };
    #[cfg(feature = "test-support")]
    {
        s.fail_seq = crate::write::fault::uring_fail_at_write(stream);
    }
    #[cfg(not(feature = "test-support"))]
    let _ = stream;
    let mut deadline = io
        .plan
        .duration
        .map(|d| Deadline::new(io.t0, d, realtime_ns()));
    loop {
        if s.stopped_by_failure() {
            break;
        }
        if io.stop.load(Relaxed) || deadline.as_mut().is_some_and(|d| d.passed(realtime_ns())) {
            s.draining = true;
        }
        s.submit_writes();
        s.maybe_flush();
        if s.epochs.in_flight() == 0 && s.flush_in_flight.is_none() {
            if s.draining && s.held.is_none() {
                return;
            }
            continue;
        }
        if let Err(e) = s.wait() {
            s.ring_failed(e);
            return;
        }
        s.reap();
    }
    s.drain_after_failure();
}

impl Stream<'_, '_> {
    fn stopped_by_failure(&self) -> bool {
        self.epochs.failed() || self.io.progress.has_failed()
    }

    /// Whether `plan.count` leaves another record to this stream (claimed if so).
    fn claim(&self) -> bool {
        match self.io.plan.count {
            None => true,
            Some(n) => self.io.started.fetch_add(1, Relaxed) < n,
        }
    }

    /// Fills free slots with the next records while the window allows.
    fn submit_writes(&mut self) {
        let window = self.io.depth.window(self.io.flush);
        while !self.free_slots.is_empty() && self.unacked.len() < window {
            let Some(next) = self.held.take().or_else(|| self.next_record()) else {
                break;
            };
            // Two writes in flight to the same sectors may land in either order, and
            // the older one's bytes could then sit where the newer, acknowledged
            // record belongs (random placement, or a ring that wraps within the
            // depth): a false "lost". Such a write waits until the older completed,
            // after which the device orders them.
            if self.overlaps_in_flight(&next.rec) {
                self.held = Some(next);
                break;
            }
            let Prepared { mut buf, mut rec } = next;
            rec.write_time_ns = realtime_ns();
            let len = rec.len_bytes() as usize;
            seal_write_time(&mut buf[..len], rec.write_time_ns);
            let rw_flags = if self.io.flush == FlushMethod::Dsync {
                libc::RWF_DSYNC
            } else {
                0
            };
            let slot = self.free_slots.pop().expect("a free slot");
            let fd = if self.fail_seq == Some(rec.seq) {
                -1
            } else {
                self.io.fd.as_raw_fd()
            };
            let sqe = opcode::Write::new(types::Fd(fd), buf.as_ptr(), len as u32)
                .offset(rec.offset)
                .rw_flags(rw_flags)
                .build()
                .user_data(slot as u64);
            // SAFETY: the buffer stays in `slots[slot]`, neither moved nor dropped (its
            // heap memory never moves), until this write's completion is reaped; the
            // fd outlives the ring's use of it (the run holds the target open until
            // every stream returned, and every stream reaps all it submitted).
            unsafe {
                self.ring
                    .submission()
                    .push(&sqe)
                    .expect("the ring has room for every write in flight and a flush");
            }
            self.slots[slot] = Some(Prepared { buf, rec });
            self.epochs.write_submitted(rec.seq);
            self.unacked.push_back(rec);
        }
    }

    /// The next record from the generator, if this stream is to write another.
    fn next_record(&mut self) -> Option<Prepared> {
        if self.draining {
            return None;
        }
        // The used buffers go back with the call (see `IoEnd`).
        if !self.claim() || !self.end.next_batch(1, &mut self.returned) {
            self.draining = true;
            return None;
        }
        let p = self.returned.pop();
        self.draining |= p.is_none();
        p
    }

    /// Whether `rec` shares a sector with a write of this stream still in flight.
    fn overlaps_in_flight(&self, rec: &RecordId) -> bool {
        let end = rec.offset + rec.len_bytes();
        self.slots.iter().flatten().any(|p| {
            let (o, e) = (p.rec.offset, p.rec.offset + p.rec.len_bytes());
            o < end && rec.offset < e
        })
    }

    /// Submits a flush when the rule of `--flush-every` / `--flush-within` says so, or
    /// when nothing else is in flight to wait for.
    fn maybe_flush(&mut self) {
        if !matches!(self.io.flush, FlushMethod::Fdatasync | FlushMethod::Fsync)
            || self.flush_in_flight.is_some()
            || self.epochs.awaiting_flush() == 0
        {
            return;
        }
        let due = self.epochs.awaiting_flush() >= self.io.depth.flush_every as usize
            || self.epochs.in_flight() == 0
            || self
                .awaiting_since
                .is_some_and(|t| t.elapsed() >= self.io.depth.flush_within);
        if !due {
            return;
        }
        let flags = if self.io.flush == FlushMethod::Fdatasync {
            types::FsyncFlags::DATASYNC
        } else {
            types::FsyncFlags::empty()
        };
        let sqe = opcode::Fsync::new(types::Fd(self.io.fd.as_raw_fd()))
            .flags(flags)
            .build()
            .user_data(FLUSH_TAG);
        // SAFETY: a flush reads no user memory; the fd outlives it (as for writes).
        unsafe {
            self.ring
                .submission()
                .push(&sqe)
                .expect("the ring has room for every write in flight and a flush");
        }
        self.flush_in_flight = Some(self.epochs.flush_submitted());
        self.awaiting_since = None;
    }

    /// Submits what was queued and waits for a completion; with a flush to come, no
    /// longer than `--flush-within` after the first write it will cover. A kernel
    /// before 5.11 (no timed wait, IORING_FEAT_EXT_ARG) checks `--flush-within` only
    /// when a completion wakes the stream, which with writes in flight is soon.
    fn wait(&mut self) -> std::io::Result<()> {
        let timeout = self
            .awaiting_since
            .filter(|_| self.flush_in_flight.is_none() && self.ring.params().is_feature_ext_arg())
            .map(|t| self.io.depth.flush_within.saturating_sub(t.elapsed()));
        let r = match timeout {
            Some(left) => {
                let ts = types::Timespec::from(left.max(Duration::from_micros(1)));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submit_and_wait(1),
        };
        match r {
            Ok(_) => Ok(()),
            // A signal (Ctrl-C: the loop sees `stop`), the timeout, or completions to
            // reap first: all mean "look again".
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::ETIME | libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Hands every completion to the epoch rule and pushes what it acknowledges.
    fn reap(&mut self) {
        let cqes: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (tag, res) in cqes {
            if tag == FLUSH_TAG {
                self.flush_done(res);
            } else {
                self.write_done(tag as usize, res);
            }
        }
    }

    fn write_done(&mut self, slot: usize, res: i32) {
        let p = self.slots[slot]
            .take()
            .expect("a write in flight in this slot");
        self.free_slots.push(slot);
        let rec = p.rec;
        self.returned.push(p);
        if self.stopped_by_failure() {
            self.io.progress.count_reaped_after_failure(1);
        }
        let how = if res < 0 {
            let e = std::io::Error::from_raw_os_error(-res);
            self.io.progress.fail(failure("write", rec, e));
            Completion::Failed
        } else if res as u64 != rec.len_bytes() {
            let e =
                std::io::Error::other(format!("short write: {res} of {} bytes", rec.len_bytes()));
            self.io.progress.fail(failure("write", rec, e));
            Completion::Failed
        } else if matches!(self.io.flush, FlushMethod::Dsync | FlushMethod::None) {
            Completion::Durable
        } else {
            self.awaiting_since.get_or_insert_with(Instant::now);
            Completion::Written
        };
        let acked = self.epochs.write_completed(rec.seq, how);
        self.push_acks(acked);
    }

    fn flush_done(&mut self, res: i32) {
        let id = self.flush_in_flight.take().expect("a flush in flight");
        if res < 0 {
            let first = self.unacked.front().copied().unwrap_or(self.blank());
            let e = std::io::Error::from_raw_os_error(-res);
            self.io.progress.fail(failure("flush", first, e));
        }
        let acked = self.epochs.flush_completed(id, res >= 0);
        self.push_acks(acked);
    }

    fn blank(&self) -> RecordId {
        RecordId {
            stream: self.unacked.front().map_or(0, |r| r.stream),
            seq: 0,
            offset: 0,
            sectors: 0,
            write_time_ns: 0,
        }
    }

    /// Pushes the records `seqs` (the oldest unacknowledged ones) through the gate.
    fn push_acks(&mut self, seqs: std::ops::Range<u64>) {
        if seqs.is_empty() {
            return;
        }
        let flushed_ns = realtime_ns();
        self.acks.clear();
        for seq in seqs {
            let record = self.unacked.pop_front().expect("an unacked record");
            assert_eq!(record.seq, seq, "acks leave in sequence order");
            self.acks.push(Ack { record, flushed_ns });
        }
        if self.io.progress.ack(self.io.sink, &self.acks) {
            let first_ns = self.acks[0].record.write_time_ns;
            self.latency
                .add(flushed_ns, flushed_ns.saturating_sub(first_ns));
        }
    }

    /// After a failure: nothing more is submitted or acknowledged; every write still in
    /// flight (and the flush) is waited for, so no buffer is freed under the kernel
    /// (`write_done` counts them).
    fn drain_after_failure(&mut self) {
        while self.epochs.in_flight() > 0 || self.flush_in_flight.is_some() {
            if let Err(e) = self.wait() {
                self.ring_failed(e);
                return;
            }
            self.reap();
        }
    }

    /// The ring itself failed (io_uring_enter returned an error that is no signal): the
    /// writes in flight cannot be waited for, so their buffers are leaked rather than
    /// freed while the kernel may still write from them, and the run fails.
    fn ring_failed(&mut self, e: std::io::Error) {
        let first = self.unacked.front().copied().unwrap_or(self.blank());
        self.io.progress.fail(Failure {
            during: "write",
            record: first,
            error: format!("waiting for io_uring completions failed: {e}"),
            raw_os_error: e.raw_os_error(),
        });
        for p in self.slots.iter_mut().filter_map(Option::take) {
            std::mem::forget(p);
        }
    }
}
