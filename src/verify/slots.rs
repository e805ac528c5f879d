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

#[derive(Clone, Copy)]
struct Slot {
    /// The ack's number in the run (ack order); `EMPTY` for a slot never painted.
    idx: u64,
    ack: Ack,
}

const EMPTY: u64 = u64::MAX;

/// The latest ack (by `later`) at each slot of [base + k * len, base + (k + 1) * len).
pub struct SlotTable {
    base: u64,
    /// Bytes per record, from the first ack painted; 0 before it.
    len: u64,
    free_slots: u64,
    slots: Vec<Slot>,
    taken: u64,
}

impl SlotTable {
    /// A table for the records of a region starting at `base`.
    pub fn new(base: u64) -> SlotTable {
        SlotTable::with_free_slots(base, FREE_SLOTS)
    }

    /// `new` with another free growth limit (tests).
    pub fn with_free_slots(base: u64, free_slots: u64) -> SlotTable {
        SlotTable {
            base,
            len: 0,
            free_slots,
            slots: vec![],
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
        let Some(k) = self.slot_of(s, e) else {
            return false;
        };
        let k = k as usize;
        if k >= self.slots.len() {
            let want = k as u64 + 1;
            if want > self.free_slots && want > 2 * (self.taken + 1) {
                return false;
            }
            self.slots.resize(
                k + 1,
                Slot {
                    idx: EMPTY,
                    ack: *a,
                },
            );
        }
        let slot = &mut self.slots[k];
        if slot.idx == EMPTY {
            self.taken += 1;
        } else if later(&slot.ack, a) {
            return true;
        }
        *slot = Slot { idx, ack: *a };
        true
    }

    fn slot_of(&self, s: u64, e: u64) -> Option<u64> {
        let from = s.checked_sub(self.base)?;
        (e - s == self.len && from % self.len == 0).then_some(from / self.len)
    }

    /// Every painted slot as (start, end, ack number, ack), in offset order: the map's
    /// pieces for the same acks.
    pub fn into_pieces(self) -> impl Iterator<Item = (u64, u64, u64, Ack)> {
        let (base, len) = (self.base, self.len);
        self.slots
            .into_iter()
            .enumerate()
            .filter(|(_, s)| s.idx != EMPTY)
            .map(move |(k, s)| {
                let start = base + k as u64 * len;
                (start, start + len, s.idx, s.ack)
            })
    }

    /// (slot, ack number) of every painted slot, in slot order.
    pub fn painted(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let taken = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.idx != EMPTY);
        taken.map(|(k, s)| (k, s.idx))
    }

    /// The range and ack of painted slot `k`.
    pub fn get(&self, k: usize) -> (u64, u64, Ack) {
        let start = self.base + k as u64 * self.len;
        (start, start + self.len, self.slots[k].ack)
    }

    /// Painted slots.
    pub fn taken(&self) -> u64 {
        self.taken
    }
}
