//! Where the region is cut when a replay is judged in parts (`parts`).
//!
//! Why cuts only where no acknowledged record straddles: a record's class depends on the
//! later acks covering its sectors (`verify::scan::visible_ranges`), so records sharing
//! a byte, whatever their streams, must be judged together. One pass over the acks
//! counts, per bucket of the region, the records starting in it and marks each bucket
//! edge a record crosses; parts are runs of buckets cut at unmarked edges, each holding
//! at most the acks the budget has room for. Two records that overlap always share a
//! part: the earlier one crosses every edge up to the later one's start.

use crate::record::RecordId;

/// Buckets over the region: the finest cut is a bucket (the region / 65,536).
pub const BUCKETS: usize = 65_536;

/// Acks per bucket and the bucket edges records cross.
pub struct Histogram {
    start: u64,
    bucket_bytes: u64,
    /// Acks whose record starts in each bucket (records before the region count in the
    /// first, records past it in the last).
    counts: Vec<u64>,
    /// Per edge (edge k: before bucket k), how many records cross it, as differences:
    /// +1 at the first edge a record crosses, -1 after its last.
    crossing: Vec<i64>,
}

impl Histogram {
    /// An empty histogram of the region [start, end).
    pub fn new(start: u64, end: u64) -> Histogram {
        let span = end.saturating_sub(start).max(1);
        Histogram {
            start,
            bucket_bytes: span.div_ceil(BUCKETS as u64).next_multiple_of(512),
            counts: vec![0; BUCKETS],
            crossing: vec![0; BUCKETS + 1],
        }
    }

    fn bucket(&self, offset: u64) -> usize {
        ((offset.saturating_sub(self.start) / self.bucket_bytes) as usize).min(BUCKETS - 1)
    }

    /// Counts one acknowledged record.
    pub fn add(&mut self, r: &RecordId) {
        let first = self.bucket(r.offset);
        let last = self.bucket(r.end().saturating_sub(1).max(r.offset));
        self.counts[first] += 1;
        if last > first {
            self.crossing[first + 1] += 1;
            self.crossing[last + 1] -= 1;
        }
    }

    /// The finest cut: a bucket's bytes.
    pub fn bucket_bytes(&self) -> u64 {
        self.bucket_bytes
    }

    /// The acks counted.
    pub fn acks(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The pieces no cut can separate: (first bucket, acks), in order.
    fn pieces(&self) -> Vec<(usize, u64)> {
        let mut out: Vec<(usize, u64)> = vec![(0, 0)];
        let mut crossing = 0i64;
        for k in 0..BUCKETS {
            crossing += self.crossing[k];
            if k > 0 && crossing == 0 {
                out.push((k, 0));
            }
            out.last_mut().expect("one piece at least").1 += self.counts[k];
        }
        out
    }

    /// Parts of at most `room_acks` acks each, about as many acks in each, or the
    /// largest piece when one holds more: (its byte range, its acks).
    pub fn cut(&self, room_acks: u64) -> Result<PartsPlan, ((u64, u64), u64)> {
        let pieces = self.pieces();
        let edge = |k: usize| self.start + k as u64 * self.bucket_bytes;
        let biggest = (0..pieces.len())
            .max_by_key(|&i| pieces[i].1)
            .expect("one piece at least");
        if pieces[biggest].1 > room_acks {
            let end = pieces.get(biggest + 1).map_or(u64::MAX, |p| edge(p.0));
            return Err(((edge(pieces[biggest].0), end), pieces[biggest].1));
        }
        // As many parts as the room needs, filled evenly: the peak is the biggest
        // part's, so a greedy fill to the room would hold more than the run needs.
        let total: u64 = pieces.iter().map(|p| p.1).sum();
        let parts = total.div_ceil(room_acks.max(1)).max(1);
        let even = total.div_ceil(parts).saturating_add(pieces[biggest].1);
        let limit = even.min(room_acks);
        let mut plan = PartsPlan {
            starts: vec![0],
            acks: vec![0],
        };
        for &(k, n) in &pieces {
            let held = plan.acks.last_mut().expect("one part at least");
            if *held + n > limit && *held > 0 {
                plan.starts.push(edge(k));
                plan.acks.push(n);
            } else {
                *held += n;
            }
        }
        Ok(plan)
    }
}

/// The parts a replay is judged in: byte ranges covering every offset, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartsPlan {
    /// The first byte of each part (the first part's is 0; the last reaches the end).
    pub starts: Vec<u64>,
    /// The acks whose record starts in each part.
    pub acks: Vec<u64>,
}

impl PartsPlan {
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Part `p`'s bytes [start, end).
    pub fn range(&self, p: usize) -> (u64, u64) {
        (
            self.starts[p],
            self.starts.get(p + 1).copied().unwrap_or(u64::MAX),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: u64, sectors: u32) -> RecordId {
        RecordId {
            stream: 0,
            seq: 1,
            offset,
            sectors,
            write_time_ns: 1,
        }
    }

    #[test]
    fn parts_hold_at_most_the_room_and_never_split_a_record() {
        // 1 MiB region: buckets of 512 B (the smallest).
        let mut h = Histogram::new(0, 1 << 20);
        for i in 0..100u64 {
            h.add(&record(i * 4096, 8));
        }
        // A record across the edge at 8192: 4096..16384 holds three starts and it.
        h.add(&record(6 * 512, 12));
        let plan = h.cut(10).unwrap();
        assert_eq!(plan.acks.iter().sum::<u64>(), 101);
        assert!(plan.acks.iter().all(|&n| n <= 10), "{plan:?}");
        for p in 0..plan.len() {
            let (s, e) = plan.range(p);
            assert!(
                !(s < 6 * 512 + 12 * 512 && s > 6 * 512),
                "{plan:?} cuts a record"
            );
            assert!(s < e);
        }
        assert_eq!(plan.range(plan.len() - 1).1, u64::MAX);
        // 101 acks in parts of 10 at most: 11, or one more where a piece of 4 does not
        // fill the room; and with room for all but 1, two even parts, not 100 and 1.
        assert!((11..=12).contains(&plan.len()), "{plan:?}");
        let room_for_all = h.cut(100).unwrap();
        assert_eq!(room_for_all.len(), 2, "{room_for_all:?}");
        assert!(
            room_for_all.acks.iter().all(|&n| n >= 40),
            "{room_for_all:?}"
        );
    }

    #[test]
    fn a_piece_bigger_than_the_room_is_named() {
        let mut h = Histogram::new(0, 1 << 20);
        // Five records each over the next one's start: one piece of 5.
        for i in 0..5u64 {
            h.add(&record(i * 4096, 16));
        }
        h.add(&record(100 * 4096, 8));
        let (range, acks) = h.cut(4).unwrap_err();
        assert_eq!(acks, 5);
        assert_eq!(range.0, 0);
        assert!(range.1 > 4 * 4096 + 16 * 512 - 512, "{range:?}");
        assert_eq!(h.cut(5).unwrap().acks.iter().sum::<u64>(), 6);
    }

    #[test]
    fn records_outside_the_region_fall_in_the_first_or_last_part() {
        let mut h = Histogram::new(1 << 20, 2 << 20);
        h.add(&record(0, 1));
        h.add(&record(3 << 20, 1));
        let plan = h.cut(1).unwrap();
        assert_eq!(plan.len(), 2);
        assert_eq!(plan.range(0).0, 0);
        assert_eq!(h.acks(), 2);
    }
}
