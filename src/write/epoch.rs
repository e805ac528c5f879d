//! The flush-epoch rule of one stream with many writes in flight (`write --iodepth`):
//! which records may be acknowledged, told only what was submitted and what completed.
//! No I/O here, so the rule is tested by itself against a brute-force reference
//! (`epoch/tests.rs`) on random completion orders.
//!
//! The rule (NVMe's Flush, fdatasync's contract, docs/depth.md):
//! - When a flush completes successfully, every write whose completion was reaped
//!   *before that flush was submitted* is durable. A write that completed after the
//!   flush was submitted is not covered by it, even if it completed before the flush
//!   did: it waits for the next flush.
//! - A write that is durable by itself when it completes (RWF_DSYNC, and `--flush none`,
//!   whose control run acknowledges on completion as the synchronous path does) needs no
//!   flush.
//! - Acknowledgements leave in sequence order: a durable record whose predecessor is not
//!   durable yet waits for it (the witness and verify refuse a stream whose sequence
//!   numbers go back).
//! - After any failed write or flush nothing more is acknowledged, ever: not even
//!   records a later flush would have covered.
//!
//! How: each completed write remembers the number of flushes submitted before it
//! completed, its epoch `e`; flush number `f` (counting from 0) covers exactly the writes
//! with `e <= f`. Flushes may complete out of order; the highest successful one covers
//! everything the lower ones do.

use std::collections::VecDeque;
use std::ops::Range;

/// A flush's number in its stream, in submission order from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushId(u64);

/// How a write completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Accepted by the device; durable only once a flush submitted later succeeds.
    Written,
    /// Durable on its own completion (RWF_DSYNC), or acknowledged on completion by
    /// choice (`--flush none`).
    Durable,
    /// The write failed (or was short): nothing more is acknowledged.
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    InFlight,
    /// Completed when `epoch` flushes had been submitted.
    Completed {
        epoch: u64,
    },
    Durable,
}

/// One stream's writes from the oldest unacknowledged one on, and its flushes.
#[derive(Debug, Default)]
pub struct Epochs {
    /// The sequence number of `pending[0]`: every record before it is acknowledged.
    next_ack_seq: u64,
    pending: VecDeque<State>,
    flushes_submitted: u64,
    /// One more than the highest flush that succeeded (0: none did yet).
    covered_epochs: u64,
    /// Completed writes that no submitted flush covers yet.
    awaiting_flush: usize,
    in_flight: usize,
    failed: bool,
}

impl Epochs {
    /// A stream whose first record has sequence number `first_seq`.
    pub fn new(first_seq: u64) -> Epochs {
        Epochs {
            next_ack_seq: first_seq,
            ..Epochs::default()
        }
    }

    /// The write of record `seq` was submitted; records are submitted in sequence order.
    pub fn write_submitted(&mut self, seq: u64) {
        assert_eq!(
            seq,
            self.next_ack_seq + self.pending.len() as u64,
            "writes are submitted in sequence order"
        );
        self.pending.push_back(State::InFlight);
        self.in_flight += 1;
    }

    /// The write of record `seq` completed as `how`; returns the records acknowledged by
    /// it (sequence numbers, empty unless it was durable by itself).
    pub fn write_completed(&mut self, seq: u64, how: Completion) -> Range<u64> {
        let i = seq
            .checked_sub(self.next_ack_seq)
            .map(|i| i as usize)
            .filter(|&i| self.pending.get(i) == Some(&State::InFlight))
            .unwrap_or_else(|| panic!("write of seq {seq} completed but was not in flight"));
        self.in_flight -= 1;
        self.pending[i] = match how {
            Completion::Failed => {
                self.failed = true;
                State::Completed { epoch: u64::MAX }
            }
            Completion::Durable => State::Durable,
            Completion::Written => {
                self.awaiting_flush += 1;
                State::Completed {
                    epoch: self.flushes_submitted,
                }
            }
        };
        self.take_ackable()
    }

    /// A flush was submitted: it covers every write completed so far.
    pub fn flush_submitted(&mut self) -> FlushId {
        let id = FlushId(self.flushes_submitted);
        self.flushes_submitted += 1;
        self.awaiting_flush = 0;
        id
    }

    /// Flush `id` completed (`ok`: successfully); returns the records acknowledged by it.
    pub fn flush_completed(&mut self, id: FlushId, ok: bool) -> Range<u64> {
        assert!(
            id.0 < self.flushes_submitted,
            "flush {id:?} never submitted"
        );
        if !ok {
            self.failed = true;
        } else {
            self.covered_epochs = self.covered_epochs.max(id.0 + 1);
        }
        self.take_ackable()
    }

    /// Pops the records now acknowledged, in sequence order; none once anything failed.
    fn take_ackable(&mut self) -> Range<u64> {
        let from = self.next_ack_seq;
        if self.failed {
            return from..from;
        }
        while let Some(&front) = self.pending.front() {
            let durable = match front {
                State::Durable => true,
                State::Completed { epoch } => epoch < self.covered_epochs,
                State::InFlight => false,
            };
            if !durable {
                break;
            }
            self.pending.pop_front();
            self.next_ack_seq += 1;
        }
        from..self.next_ack_seq
    }

    /// Whether a write or flush failed: nothing will be acknowledged any more.
    pub fn failed(&self) -> bool {
        self.failed
    }
    /// Writes submitted and not completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
    /// Writes completed that no submitted flush covers: what the next flush would cover.
    pub fn awaiting_flush(&self) -> usize {
        self.awaiting_flush
    }
    /// Records submitted and not acknowledged (in flight, completed, or waiting for a
    /// predecessor).
    pub fn unacked(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests;
