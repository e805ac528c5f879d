//! The first pass's painted map for the common case, one table entry per record slot.
//!
//! Why: with 512 B records, painting every ack into `scale`'s `BTreeMap` of pieces (a
//! tree walk, node inserts and allocations per ack) was most of verify's CPU, about
//! 1.7 µs per ack, and it runs before the first read (docs/performance.md "Verify read
//! speed against dd"). Most runs write records of one size at offsets that step by
//! that size from the region's start. Then every record is exactly one slot, a later
//! record either replaces the whole slot or not at all, and the map's pieces are just
//! "the latest ack per slot": an array indexed by slot gives the same answer with one
//! bounds check per ack.
//!
//! The table holds one entry (56 B) per slot up to the highest slot written, so it is
//! only used while that stays small or dense: it grows freely to [`FREE_SLOTS`] slots
//! (1 GiB of 512 B records is 2 M slots, 112 MiB), and beyond that only while at least
//! half of its slots are taken (a sequential ring always is; random placement over a
//! large region is not). The first ack that does not fit (another size, another
//! alignment, before the region, or the table too sparse) hands every entry to the map
//! (`SlotTable::into_pieces`) and the map paints from then on, so the verdict never
//! depends on which one painted (test: `scale_tests`).

use crate::model::Ack;

/// Slots the table may grow to whatever their occupancy: 4 M slots, 224 MiB
/// (2 GiB of 512 B records, 16 GiB of 4 KiB records).
pub const FREE_SLOTS: u64 = 4 << 20;

const EMPTY: u64 = u64::MAX;

/// The latest ack (by `later`) at each slot of [base + k * len, base + (k + 1) * len).
/// Two parallel vectors rather than one of (number, ack): when the run is judged, the
/// acks become the scan's live list as they are (`into_live`), in slot order, which is
/// offset order, without a copy or a sort.
pub struct SlotTable {
    base: u64,
    /// Bytes per record, from the first ack painted; 0 before it.
    len: u64,
    free_slots: u64,
    /// Per slot, the number in the run (ack order) of its ack; `EMPTY` if never painted.
    idx: Vec<u64>,
    acks: Vec<Ack>,
    taken: u64,
}

/// The painted slots, in slot order, as `SlotTable::into_live` gives them.
pub struct LiveSlots {
    /// Ack number and ack of each painted slot, in slot order.
    pub idx: Vec<u64>,
    pub acks: Vec<Ack>,
    pub find: SlotFinder,
}

/// Finds a live ack's place in `LiveSlots` from its slot.
pub struct SlotFinder {
    grid: Grid,
    /// Per slot, its place in `idx`/`acks` (`u32::MAX`: empty); None when every slot up
    /// to the last is painted (a ring), so slot k is place k.
    place: Option<Vec<u32>>,
}

/// Records of `len` bytes at `base + k * len`.
#[derive(Clone, Copy)]
pub struct Grid {
    base: u64,
    len: u64,
}

impl Grid {
    /// The slot of the record [s, e), if it is exactly one.
    #[inline]
    pub fn slot_of(&self, s: u64, e: u64) -> Option<u64> {
        let from = s.checked_sub(self.base)?;
        (self.len > 0 && e.checked_sub(s) == Some(self.len) && from % self.len == 0)
            .then(|| from / self.len)
    }
}

impl SlotFinder {
    /// The slots the live acks are.
    pub fn grid(&self) -> crate::verify::scan::SlotGrid {
        crate::verify::scan::SlotGrid {
            base: self.grid.base,
            len: self.grid.len,
        }
    }

    /// The place of ack number `i` (the ack `a`) in `idx`, the live acks' numbers, if it
    /// is live.
    #[inline]
    pub fn place_of(&self, idx: &[u64], i: u64, a: &Ack) -> Option<usize> {
        let k = self.grid.slot_of(a.record.offset, a.record.end())? as usize;
        let j = match &self.place {
            None => k,
            Some(p) => *p.get(k)? as usize,
        };
        (idx.get(j) == Some(&i)).then_some(j)
    }
}

impl SlotTable {
    /// A table for the records of a region starting at `base`.
    /// Slots the table holds memory for (painted or not).
    pub fn held(&self) -> u64 {
        self.idx.len() as u64
    }

    pub fn new(base: u64) -> SlotTable {
        SlotTable::with_free_slots(base, FREE_SLOTS)
    }

    /// `new` with another free growth limit (tests).
    pub fn with_free_slots(base: u64, free_slots: u64) -> SlotTable {
        SlotTable {
            base,
            len: 0,
            free_slots,
            idx: vec![],
            acks: vec![],
            taken: 0,
        }
    }

    /// Paints ack number `idx` over its slot unless the slot's ack is later. Returns
    /// false, changing nothing, when `a` is not exactly one slot the table may hold.
    /// `a` must not be empty.
    #[inline]
    pub fn paint(&mut self, idx: u64, a: &Ack, later: impl Fn(&Ack, &Ack) -> bool) -> bool {
        let (s, e) = (a.record.offset, a.record.end());
        if self.len == 0 {
            self.len = e - s;
        }
        let Some(k) = self.grid().slot_of(s, e) else {
            return false;
        };
        let k = k as usize;
        if k >= self.idx.len() {
            let want = k as u64 + 1;
            // Places are u32 in `LiveSlots` (4 G slots would be 224 GB of table).
            if (want > self.free_slots && want > 2 * (self.taken + 1)) || want >= u32::MAX as u64 {
                return false;
            }
            self.idx.resize(k + 1, EMPTY);
            self.acks.resize(k + 1, *a);
        }
        if self.idx[k] == EMPTY {
            self.taken += 1;
        } else if later(&self.acks[k], a) {
            return true;
        }
        self.idx[k] = idx;
        self.acks[k] = *a;
        true
    }

    fn grid(&self) -> Grid {
        Grid {
            base: self.base,
            len: self.len,
        }
    }

    /// Every painted slot as (start, end, ack number, ack), in offset order: the map's
    /// pieces for the same acks.
    pub fn into_pieces(self) -> impl Iterator<Item = (u64, u64, u64, Ack)> {
        let (base, len) = (self.base, self.len);
        self.idx
            .into_iter()
            .zip(self.acks)
            .enumerate()
            .filter(|(_, (i, _))| *i != EMPTY)
            .map(move |(k, (i, a))| {
                let start = base + k as u64 * len;
                (start, start + len, i, a)
            })
    }

    /// The painted slots in slot order. A full table (a ring) is handed over as it is;
    /// otherwise the empty slots are squeezed out in place.
    pub fn into_live(self) -> LiveSlots {
        let grid = self.grid();
        let (mut idx, mut acks) = (self.idx, self.acks);
        if self.taken == idx.len() as u64 {
            let find = SlotFinder { grid, place: None };
            return LiveSlots { idx, acks, find };
        }
        let mut place = vec![u32::MAX; idx.len()];
        let mut j = 0;
        for k in 0..idx.len() {
            if idx[k] != EMPTY {
                idx[j] = idx[k];
                acks[j] = acks[k];
                place[k] = j as u32;
                j += 1;
            }
        }
        // Not shrunk: that would copy them, and they held as much while painting.
        idx.truncate(j);
        acks.truncate(j);
        let find = SlotFinder {
            grid,
            place: Some(place),
        };
        LiveSlots { idx, acks, find }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordId;

    fn later(a: &Ack, b: &Ack) -> bool {
        (a.record.stream, a.record.seq) > (b.record.stream, b.record.seq)
    }

    /// The live list of a table, full (a ring) or with empty slots squeezed out, is in
    /// slot order, and every ack of the run is found by its slot exactly when it is the
    /// latest in its slot (the second pass's lookup).
    #[test]
    fn a_live_ack_is_found_by_its_slot_and_no_other() {
        let mut x = 7u64;
        let mut next = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for (slots, n, base) in [(16u64, 64u64, 0u64), (16, 10, 1024), (64, 300, 512)] {
            let mut t = SlotTable::new(base);
            let mut acks = vec![];
            for i in 0..n {
                // Every slot once in order (a ring) when n covers them, then random.
                let k = if n >= slots && i < slots {
                    i
                } else {
                    next() % slots
                };
                let a = Ack {
                    record: RecordId {
                        stream: (next() % 2) as u16,
                        seq: i + 1,
                        offset: base + k * 1024,
                        sectors: 2,
                        write_time_ns: i,
                    },
                    flushed_ns: i + 5,
                };
                assert!(t.paint(i, &a, later));
                acks.push(a);
            }
            // The latest ack of each slot, by brute force.
            let mut latest: Vec<Option<u64>> = vec![None; slots as usize];
            for (i, a) in acks.iter().enumerate() {
                let k = ((a.record.offset - base) / 1024) as usize;
                if latest[k].is_none_or(|j| !later(&acks[j as usize], a)) {
                    latest[k] = Some(i as u64);
                }
            }
            let live = t.into_live();
            let want: Vec<u64> = latest.iter().flatten().copied().collect();
            assert_eq!(live.idx, want, "{slots} slots, {n} acks");
            for (j, &i) in live.idx.iter().enumerate() {
                assert_eq!(live.acks[j], acks[i as usize]);
            }
            for (i, a) in acks.iter().enumerate() {
                let found = live.find.place_of(&live.idx, i as u64, a);
                let is_live = want.contains(&(i as u64));
                assert_eq!(found.is_some(), is_live, "ack {i}");
                if let Some(j) = found {
                    assert_eq!(live.idx[j], i as u64);
                }
            }
        }
    }
}
