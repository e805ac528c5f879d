//! The first pass's painting: which acknowledged record holds each byte of the region
//! once every ack is painted, the later record (in (stream, seq) order, as in
//! `scan::visible_ranges`) winning a byte. What is left are the live records, the only
//! ones verify reads back: every other one is superseded where it lies.
//!
//! Why apart from `scale`: verify paints the whole run at once when it fits its memory
//! budget, and one part of the region at a time when it does not (`partition`); both
//! paint the same way.

use super::scan::Visible;
use super::slots::{LiveSlots, SlotFinder, SlotTable};
use crate::model::Ack;
use std::collections::BTreeMap;

/// One piece of the painted map: [start, end) belongs to ack number `idx`.
struct Piece {
    end: u64,
    idx: u64,
    ack: Ack,
}

/// Whether `a` is a later record than `b` (wins the bytes both cover).
pub(super) fn later(a: &Ack, b: &Ack) -> bool {
    (a.record.stream, a.record.seq) > (b.record.stream, b.record.seq)
}

/// The painted map of a run or of one part of its region.
pub(super) struct Paint {
    /// The latest ack per slot while the records fit one (`slots` module docs); None
    /// once one did not, and `pieces` paints.
    slots: Option<SlotTable>,
    pieces: BTreeMap<u64, Piece>,
}

impl Paint {
    /// `slots`: the table to paint into first, or None to paint only the map.
    pub(super) fn new(slots: Option<SlotTable>) -> Paint {
        Paint {
            slots,
            pieces: BTreeMap::new(),
        }
    }

    /// Bytes the painting holds, at `per_slot` a table slot and `per_piece` a piece of
    /// the map (what verify pays for each while it judges them).
    pub(super) fn held_bytes(&self, per_slot: u64, per_piece: u64) -> u64 {
        let slots = self.slots.as_ref().map_or(0, SlotTable::held);
        slots * per_slot + self.pieces.len() as u64 * per_piece
    }

    /// Paints [offset, end) of `a`, except where a later record already holds a byte.
    pub(super) fn paint(&mut self, idx: u64, a: &Ack) {
        let (s, e) = (a.record.offset, a.record.end());
        if s >= e {
            return;
        }
        if let Some(t) = &mut self.slots {
            if t.paint(idx, a, later) {
                return;
            }
            // Not one slot of the table: the map takes over, from every slot painted.
            let t = self.slots.take().expect("just matched");
            for (s, end, idx, ack) in t.into_pieces() {
                self.pieces.insert(s, Piece { end, idx, ack });
            }
        }
        // The common case, a record exactly over one earlier piece (a ring, or random
        // placement of fixed-size records): replaced in place, one lookup.
        if let Some(p) = self.pieces.get_mut(&s)
            && p.end == e
        {
            if !later(&p.ack, a) {
                *p = Piece {
                    end: e,
                    idx,
                    ack: *a,
                };
            }
            return;
        }
        // A record past every piece (the first lap of a ring): nothing to split. Pieces
        // are disjoint, so the last one ends last.
        if self.pieces.last_key_value().is_none_or(|(_, p)| p.end <= s) {
            self.put(s, e, idx, a);
            return;
        }
        // Every piece overlapping [s, e), taken out.
        let mut old: Vec<(u64, Piece)> = vec![];
        if let Some((&ps, p)) = self.pieces.range(..s).next_back()
            && p.end > s
        {
            old.push((ps, self.pieces.remove(&ps).expect("just seen")));
        }
        let inside: Vec<u64> = self.pieces.range(s..e).map(|(&k, _)| k).collect();
        for k in inside {
            old.push((k, self.pieces.remove(&k).expect("just listed")));
        }
        // Put back what lies outside [s, e) and what a later record holds; `a` gets
        // the gaps.
        let mut at = s;
        for (ps, p) in old {
            if ps < s {
                self.pieces.insert(ps, Piece { end: s, ..p });
            }
            let (is, ie) = (ps.max(s), p.end.min(e));
            if later(&p.ack, a) {
                if at < is {
                    self.put(at, is, idx, a);
                }
                at = ie;
                self.pieces.insert(is, Piece { end: ie, ..p });
            }
            if p.end > e {
                self.pieces.insert(e, Piece { end: p.end, ..p });
            }
        }
        if at < e {
            self.put(at, e, idx, a);
        }
    }

    /// Puts [s, e) of `a` where no piece starts (the callers took out what overlapped).
    /// A piece replaced by accident would leave its bytes to no record: checked in every
    /// build, at no cost (the insert returns the piece it replaced anyway).
    fn put(&mut self, s: u64, e: u64, idx: u64, a: &Ack) {
        let replaced = self.pieces.insert(
            s,
            Piece {
                end: e,
                idx,
                ack: *a,
            },
        );
        assert!(
            replaced.is_none(),
            "painted piece [{s}, {e}) put over another starting there"
        );
    }

    /// The live acks (at least one byte still theirs) with their visible ranges (sorted,
    /// touching ranges merged) and numbers: in slot order from the table (no sort: slot
    /// order is offset order, the scan's own), in ack order from the map.
    pub(super) fn live(self) -> Live {
        let Some(t) = self.slots else {
            return live_of_pieces(self.pieces);
        };
        let LiveSlots { idx, acks, find } = t.into_live();
        Live {
            visible: Visible::whole_records(acks.len()),
            idx,
            acks,
            find: Some(find),
        }
    }
}

/// [`Paint::live`] from the map's pieces.
fn live_of_pieces(pieces: BTreeMap<u64, Piece>) -> Live {
    // Drained into a flat vector and sorted by ack: a second tree keyed by ack would
    // double the peak (a tree costs about twice its entries).
    let mut flat: Vec<(u64, u64, u64, Ack)> = Vec::with_capacity(pieces.len());
    // The pieces in offset order, each from where the one before it ends: every byte
    // has one owner, which `paint` relies on (the last piece ends last) and verify's
    // verdict with it. Checked in every build, one comparison a piece.
    let mut prev_end = 0;
    flat.extend(pieces.into_iter().map(|(s, p)| {
        assert!(
            s >= prev_end && s < p.end,
            "painted piece [{s}, {}) overlaps the one before it, which ends at {prev_end}",
            p.end
        );
        prev_end = p.end;
        (p.idx, s, p.end, p.ack)
    }));
    flat.sort_unstable_by_key(|&(idx, s, _, _)| (idx, s));
    let mut live = Live::default();
    for (idx, s, e, ack) in flat {
        if live.idx.last() != Some(&idx) {
            live.idx.push(idx);
            live.acks.push(ack);
            live.visible.push_ack();
        }
        live.visible.push_range(s, e);
    }
    live
}

/// One live ack as (ack number, ack, visible ranges).
#[cfg(test)]
pub(super) type LiveRow = (u64, Ack, Vec<(u64, u64)>);

/// The live acks of `acks` as [`LiveRow`]s, painted with `slots`
/// first (None: the map only), to compare the two paintings.
#[cfg(test)]
pub(super) fn live_for_tests(acks: &[Ack], slots: Option<SlotTable>) -> Vec<LiveRow> {
    let mut p = Paint::new(slots);
    for (i, a) in acks.iter().enumerate() {
        p.paint(i as u64, a);
    }
    let live = p.live();
    let rows = live.idx.into_iter().zip(live.acks).enumerate();
    let v = &live.visible;
    let ranges = |k, a: &Ack| v.ranges_of(k, (a.record.offset, a.record.end()));
    let mut rows: Vec<LiveRow> = rows.map(|(k, (i, a))| (i, a, ranges(k, &a))).collect();
    // In ack order, whichever order the painting keeps.
    rows.sort_by_key(|r| r.0);
    rows
}

/// The acks still visible somewhere: in ack order (`find` None), or in slot order.
#[derive(Default)]
pub(super) struct Live {
    pub idx: Vec<u64>,
    pub acks: Vec<Ack>,
    pub visible: Visible,
    /// Finds a live ack by its slot when the list is in slot order.
    pub find: Option<SlotFinder>,
}

impl Live {
    /// The place in the list of ack number `i` (the ack `a`), if it is live. The second
    /// pass asks for every ack in ack order; `next`, where the next live ack in ack order
    /// sits when the list is in ack order, moves past a found one.
    #[inline]
    pub(super) fn place_of(&self, i: u64, a: &Ack, next: &mut usize) -> Option<usize> {
        match &self.find {
            Some(f) => f.place_of(&self.idx, i, a),
            None if self.idx.get(*next) == Some(&i) => {
                *next += 1;
                Some(*next - 1)
            }
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordId;

    fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
        Ack {
            record: RecordId {
                stream,
                seq,
                offset,
                sectors,
                write_time_ns: 0,
            },
            flushed_ns: 0,
        }
    }

    /// Pieces that overlap (a painting that gave a byte twice) are refused when the live
    /// records are taken from them, in every build.
    #[test]
    #[should_panic(
        expected = "painted piece [512, 1536) overlaps the one before it, which ends at 1024"
    )]
    fn overlapping_pieces_are_refused() {
        let mut pieces = BTreeMap::new();
        let (a, b) = (ack(0, 1, 0, 2), ack(0, 2, 512, 2));
        pieces.insert(
            0,
            Piece {
                end: 1024,
                idx: 0,
                ack: a,
            },
        );
        pieces.insert(
            512,
            Piece {
                end: 1536,
                idx: 1,
                ack: b,
            },
        );
        live_of_pieces(pieces);
    }

    /// Records painted over each other in every way leave disjoint pieces: the check
    /// above holds for what `paint` makes.
    #[test]
    fn painted_overlaps_leave_disjoint_pieces() {
        let acks = [
            ack(0, 1, 0, 8),
            ack(1, 1, 1024, 8),
            ack(0, 2, 512, 2),
            ack(0, 3, 2048, 16),
            ack(0, 4, 0, 32),
        ];
        let rows = live_for_tests(&acks, None);
        let live: Vec<u64> = rows.iter().map(|r| r.0).collect();
        // Stream 1's record is later than all of stream 0's: it keeps [1024, 5120).
        assert_eq!(live, [1, 4]);
        assert_eq!(rows[0].2, [(1024, 5120)]);
        assert_eq!(rows[1].2, [(0, 1024), (5120, 16384)]);
    }
}
