//! How the region is cut into parts that each fit the memory budget, and the figures
//! (bytes per live record, fixed costs) the cut is made from.

use crate::model::RunDescriptor;
use crate::record::SECTOR;
use crate::verify::VerifyError;
use crate::verify::budget::Budget;

/// Bytes verify holds per live record while it judges them: the painted slot (ack and
/// number, 56 B), its tally (40 B), the scan's state and the allocators' slack; a map
/// piece instead of a slot when records do not fit one grid. Measured:
/// docs/performance.md "Scale".
pub const LIVE_RECORD_BYTES: u64 = 160;

/// [`LIVE_RECORD_BYTES`] for the whole run when its records are of one size: the slot
/// table and the early reads' per-slot summary instead of tallies. Measured: 2,621,440
/// live records of 512 B judged as one run (`--memory 4G`) peak at 337,812 KiB, the
/// fixed costs included (docs/performance.md "Scale").
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

/// The least room a live record of the run takes in the region: its smallest record
/// for a ring (sequential placement), where a record overwrites the lap before whole;
/// one sector otherwise, since records placed at random on a drive of 512-byte blocks
/// may overlap 512 bytes apart and each stay live by one visible sector.
fn live_grain(d: &RunDescriptor) -> u64 {
    let s = &d.settings;
    match s.placement == "sequential" {
        true => s.record_bytes_min.max(SECTOR as u64),
        false => SECTOR as u64,
    }
}

/// At most how many records live at once in the region: one per [`live_grain`], or
/// every ack if the source can bound them and they are fewer.
pub fn live_at_most(d: &RunDescriptor, acks_at_most: Option<u64>) -> u64 {
    let slots = d.settings.region_bytes / live_grain(d);
    acks_at_most.map_or(slots, |n| n.min(slots))
}

/// Whether the whole run's live records (at most `live_at_most`), with the early reads,
/// fit `budget`: then it is judged at once (`scale`), else in parts.
pub fn whole_run_fits(d: &RunDescriptor, acks_at_most: Option<u64>, budget: &Budget) -> bool {
    let s = &d.settings;
    // A ring of one size fills the slot table; anything else may paint the map.
    let per_live = match s.record_bytes_min == s.record_bytes_max && s.placement == "sequential" {
        true => WHOLE_GRID_LIVE_RECORD_BYTES,
        false => LIVE_RECORD_BYTES,
    };
    let held = live_at_most(d, acks_at_most)
        .saturating_mul(per_live)
        .saturating_add(FIXED_BYTES + EARLY_READ_BYTES);
    held <= budget.memory_bytes
}

/// How the region is cut: part k starts at `start + k * width` (the first part also
/// owns what lies before, the last what lies after). The edges lie on the device's grid
/// of reads (`scan::GRID_BYTES`), so each part reads exactly the whole run's chunks
/// among its bytes (`scan::Part`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) start: u64,
    pub(super) width: u64,
    pub(super) parts: u64,
    /// Slots of the smallest record in one part's width (the slot table's size).
    pub(super) slots: u64,
    /// At most how many records live in one part's width ([`live_grain`]).
    pub(super) live_most: u64,
    /// The records' grid when they are of one size: (its length, an offset on it).
    pub(super) record_grid: Option<(u64, u64)>,
    /// Records reach at most this far past their start.
    pub(super) reach: u64,
    /// Live records a group may paint besides its own: those reaching in from before
    /// its start and those of the next part it paints, each live by a sector of its own
    /// within `reach` of an edge.
    pub(super) edge_live: u64,
    /// Live records a group of parts may hold.
    pub(super) room: u64,
    /// Whether the plan took the run's placement at its word (`live_grain`).
    pub(super) trusted: bool,
}

impl Plan {
    /// `trust_placement`: as [`live_grain`] allows; false: one live record a sector.
    pub(super) fn new(
        d: &RunDescriptor,
        budget: &Budget,
        trust_placement: bool,
    ) -> Result<Plan, VerifyError> {
        let s = &d.settings;
        let grid = edge_grid(d);
        let grain = match trust_placement {
            true => live_grain(d),
            false => SECTOR as u64,
        };
        let live_room = budget.memory_bytes.saturating_sub(FIXED_BYTES);
        let slots_per_part = live_room / LIVE_RECORD_BYTES;
        // Whole cells of the grid per part, each at most `grid / grain` live records,
        // with room left for the records a part paints across its edges.
        let cells_per_part = slots_per_part.saturating_sub(edge_live(d)) / (grid / grain).max(1);
        let start = s.region_offset / grid * grid;
        let span = s.region_offset + s.region_bytes - start;
        let parts = match cells_per_part {
            0 => u64::MAX,
            c => span.div_ceil(c * grid).max(1),
        };
        if parts > MAX_PARTS {
            let width = span.div_ceil(MAX_PARTS).div_ceil(grid).max(1) * grid;
            return Err(VerifyError::MemoryTooSmall {
                budget: budget.memory_bytes,
                region_bytes: s.region_bytes,
                needed: FIXED_BYTES + LIVE_RECORD_BYTES * (width / grain + edge_live(d)),
                parts: MAX_PARTS,
            });
        }
        let mut plan = Plan::with_width(d, start, cells_per_part * grid, slots_per_part);
        plan.live_most = plan.width / grain;
        plan.trusted = trust_placement && grain > SECTOR as u64;
        Ok(plan)
    }

    /// `parts` parts of whole cells of `align` and the read grid, groups of at most
    /// `room` live records.
    #[cfg(test)]
    pub(super) fn with_parts(d: &RunDescriptor, parts: u64, align: u64, room: u64) -> Plan {
        let s = &d.settings;
        let grid = lcm(edge_grid(d), align);
        let start = s.region_offset / grid * grid;
        let span = s.region_offset + s.region_bytes - start;
        let width = span.div_ceil(parts).div_ceil(grid).max(1) * grid;
        Plan::with_width(d, start, width, room)
    }

    fn with_width(d: &RunDescriptor, start: u64, width: u64, room: u64) -> Plan {
        let s = &d.settings;
        let min_len = s.record_bytes_min.max(SECTOR as u64);
        let span = s.region_offset + s.region_bytes - start;
        let one_size = s.record_bytes_min == s.record_bytes_max && min_len % SECTOR as u64 == 0;
        Plan {
            start,
            width,
            parts: span.div_ceil(width).max(1),
            slots: width / min_len,
            live_most: width / live_grain(d),
            record_grid: one_size.then_some((min_len, s.region_offset)),
            reach: s.record_bytes_max.max(SECTOR as u64),
            edge_live: edge_live(d),
            room,
            trusted: false,
        }
    }

    /// Where the slot table of the group from part `k` starts: on the records' grid, at
    /// or before the part's start, so records of one size fill its slots.
    pub(super) fn table_base(&self, k: u64) -> u64 {
        let at = self.start_of(k);
        match self.record_grid {
            None => at,
            Some((len, on)) => {
                let off = (at % len + len - on % len) % len;
                if at >= off {
                    at - off
                } else {
                    at + (len - off) % len
                }
            }
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

/// [`Plan::edge_live`]: a sector each within a record's reach of either edge.
fn edge_live(d: &RunDescriptor) -> u64 {
    2 * d.settings.record_bytes_max.max(SECTOR as u64) / SECTOR as u64
}

/// The grid part edges lie on: the scan's chunks (`scan::GRID_BYTES`), and the records'
/// own length when they are of one size, so none of a ring crosses an edge when the
/// region starts on it.
fn edge_grid(d: &RunDescriptor) -> u64 {
    let s = &d.settings;
    let len = s.record_bytes_min.max(SECTOR as u64);
    match s.record_bytes_min == s.record_bytes_max && len % SECTOR as u64 == 0 {
        true => lcm(crate::verify::scan::GRID_BYTES, len),
        false => crate::verify::scan::GRID_BYTES,
    }
}

fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut x: u64, mut y: u64| {
        while y != 0 {
            (x, y) = (y, x % y);
        }
        x
    };
    a / gcd(a, b) * b
}
