//! Where each record of a stream goes, from the run's seed: the writer places its records
//! with it, and verify finds with it where a stream's records past its last acknowledged
//! one would be (`verify::unacked`). Why below both: the two halves of a test must agree
//! on every offset, and neither may import the other.
//!
//! The region is split into one equal, disjoint share per stream (aligned to the
//! device's block size), so streams never overwrite each other.

use crate::model::Placement;
use crate::rng::Rng;

/// What decides the places of a run's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub region_offset: u64,
    pub region_bytes: u64,
    pub record_min: u64,
    pub record_max: u64,
    pub placement: Placement,
    pub streams: u16,
    pub seed: u64,
    /// Every offset and size is a multiple of this (>= 512, the device's block size
    /// under O_DIRECT, else 512).
    pub align: u64,
}

impl Layout {
    /// Bytes of the region each stream owns.
    pub fn share_bytes(&self) -> u64 {
        self.region_bytes / self.streams.max(1) as u64 / self.align * self.align
    }
}

/// Chooses offsets and sizes for one stream, from a generator forked off the run's seed:
/// the n-th call of [`Placer::next_record`] places the stream's record of seq n.
pub struct Placer {
    rng: Rng,
    start: u64,
    len: u64,
    pos: u64,
    min: u64,
    max: u64,
    align: u64,
    placement: Placement,
}

impl Placer {
    pub fn new(layout: &Layout, stream: u16) -> Placer {
        let share = layout.share_bytes();
        let start = layout.region_offset + stream as u64 * share;
        Placer {
            rng: Rng::new(layout.seed).fork(stream as u64 + 1),
            start,
            len: share,
            pos: start,
            min: layout.record_min,
            max: layout.record_max,
            align: layout.align,
            placement: layout.placement,
        }
    }

    /// Skips `n` records (as `n` calls of [`Placer::next_record`]) in constant time where
    /// their places follow by arithmetic alone: sequential placement of one record size,
    /// which draws nothing. False, and nothing skipped, otherwise. Why: finding where a
    /// stream's record of seq N went must not take N steps (`verify::unacked`).
    pub fn skip_arithmetic(&mut self, n: u64) -> bool {
        if self.min != self.max || self.placement != Placement::Sequential {
            return false;
        }
        let slots = self.len / self.min.max(1);
        if slots == 0 {
            return false;
        }
        self.pos = self.start + n % slots * self.min;
        true
    }

    /// (offset, length) of the next record.
    pub fn next_record(&mut self) -> (u64, u64) {
        let size = if self.min == self.max {
            self.min
        } else {
            self.rng.range(self.min / self.align, self.max / self.align) * self.align
        };
        let offset = match self.placement {
            Placement::Sequential => {
                if self.pos + size > self.start + self.len {
                    self.pos = self.start;
                }
                let o = self.pos;
                self.pos += size;
                o
            }
            Placement::Random => {
                let slots = (self.len - size) / self.align + 1;
                self.start + self.rng.below(slots) * self.align
            }
        };
        (offset, size)
    }
}
