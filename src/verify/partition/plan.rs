//! How the region is cut into parts that each fit the memory budget, and the figures
//! (bytes per live record, fixed costs) the cut is made from.

use crate::model::RunDescriptor;
use crate::record::SECTOR;
use crate::verify::VerifyError;
use crate::verify::budget::Budget;

/// Bytes verify holds per live record while it judges them: the painted slot (ack and
/// number, 56 B), its tally (40 B), the scan's state and the allocators' slack; a map
/// piece instead of a slot when records do not fit one grid. Measured:
/// docs/performance.md "Memory".
pub const LIVE_RECORD_BYTES: u64 = 160;

/// [`LIVE_RECORD_BYTES`] for the whole run when its records are of one size: the slot
/// table and the early reads' per-slot summary instead of tallies. Measured: 2.6 M live
/// records of 512 B judged whole peak at 298 MB, early reads included (docs/performance.md
/// "Scale").
pub const WHOLE_GRID_LIVE_RECORD_BYTES: u64 = 100;

/// Bytes verify holds whatever the run: the program, the reads' buffers
/// (`scan::pipeline`), the ack passes' buffers, the work files' blocks.
pub const FIXED_BYTES: u64 = 40 << 20;

/// The whole run's early reads (`scan::read_early`, `scan::summarise_early`), which a
/// run judged in parts does without.
pub const EARLY_READ_BYTES: u64 = 128 << 20;

/// Most parts: each has a work file open while the acks are spilled.
pub const MAX_PARTS: u64 = 512;

/// Free space verify leaves in the work directory while it writes there.
pub const FREE_MARGIN_BYTES: u64 = 256 << 20;

/// At most how many records live at once in the region: one per smallest record, or
/// every ack if the source can bound them and they are fewer.
pub fn live_at_most(d: &RunDescriptor, acks_at_most: Option<u64>) -> u64 {
    let s = &d.settings;
    let slots = s.region_bytes / s.record_bytes_min.max(SECTOR as u64);
    acks_at_most.map_or(slots, |n| n.min(slots))
}

/// Whether the whole run's live records (at most `live_at_most`), with the early reads,
/// fit `budget`: then it is judged at once (`scale`), else in parts.
pub fn whole_run_fits(d: &RunDescriptor, acks_at_most: Option<u64>, budget: &Budget) -> bool {
    let s = &d.settings;
    let per_live = match s.record_bytes_min == s.record_bytes_max {
        true => WHOLE_GRID_LIVE_RECORD_BYTES,
        false => LIVE_RECORD_BYTES,
    };
    let held = live_at_most(d, acks_at_most)
        .saturating_mul(per_live)
        .saturating_add(FIXED_BYTES + EARLY_READ_BYTES);
    held <= budget.memory_bytes
}

/// How the region is cut: part k starts at `region_offset + k * width` (the first part
/// also owns what lies before, the last what lies after).
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) start: u64,
    pub(super) width: u64,
    pub(super) parts: u64,
    /// Slots of the smallest record in one part's width.
    pub(super) slots: u64,
    /// Records reach at most this far past their start.
    pub(super) reach: u64,
    /// Live records a group of parts may hold.
    pub(super) room: u64,
}

impl Plan {
    pub(super) fn new(d: &RunDescriptor, budget: &Budget) -> Result<Plan, VerifyError> {
        let s = &d.settings;
        let min_len = s.record_bytes_min.max(SECTOR as u64);
        // Parts on the records' own grid when they are of one size, so none crosses a
        // part's end and the slot table paints every part.
        let align = if s.record_bytes_min == s.record_bytes_max && min_len % SECTOR as u64 == 0 {
            min_len
        } else {
            SECTOR as u64
        };
        let live_room = budget.memory_bytes.saturating_sub(FIXED_BYTES);
        let slots_per_part = (live_room / LIVE_RECORD_BYTES).max(1);
        let region_slots = (s.region_bytes / min_len).max(1);
        let parts = region_slots.div_ceil(slots_per_part).max(1);
        let needed_per_part = FIXED_BYTES + LIVE_RECORD_BYTES * region_slots.div_ceil(MAX_PARTS);
        if parts > MAX_PARTS || live_room < LIVE_RECORD_BYTES * 1024 {
            return Err(VerifyError::MemoryTooSmall {
                budget: budget.memory_bytes,
                region_bytes: s.region_bytes,
                needed: needed_per_part.max(FIXED_BYTES * 2),
                parts: parts.min(MAX_PARTS),
            });
        }
        Ok(Plan::with_parts(d, parts, align, slots_per_part))
    }

    /// `parts` parts on `align`, groups of at most `room` live records.
    pub(super) fn with_parts(d: &RunDescriptor, parts: u64, align: u64, room: u64) -> Plan {
        let s = &d.settings;
        let min_len = s.record_bytes_min.max(SECTOR as u64);
        let width = s.region_bytes.div_ceil(parts).div_ceil(align).max(1) * align;
        Plan {
            start: s.region_offset,
            width,
            parts: s.region_bytes.div_ceil(width).max(1),
            slots: width / min_len,
            reach: s.record_bytes_max.max(SECTOR as u64),
            room,
        }
    }

    pub(super) fn part_of(&self, offset: u64) -> u64 {
        (offset.saturating_sub(self.start) / self.width).min(self.parts - 1)
    }

    pub(super) fn start_of(&self, k: u64) -> u64 {
        self.start + k * self.width
    }

    /// The parts whose file holds ack [s, e): its own, those it reaches into, and the
    /// ones before it starts within `reach` of (an ack of theirs may reach it).
    pub(super) fn parts_of(&self, s: u64, e: u64) -> std::ops::RangeInclusive<u64> {
        let own = self.part_of(s);
        if e.saturating_sub(s) > self.reach {
            // No writer makes it (the run is refused); kept out of other parts.
            return own..=own;
        }
        let first = self.part_of(s.saturating_sub(self.reach));
        let last = self.part_of(e.saturating_sub(1).max(s));
        first.min(own)..=last.max(own)
    }
}
