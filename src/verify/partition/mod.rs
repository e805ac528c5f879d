//! Verify within a memory budget: a run whose live records would not fit is judged one
//! part of its region at a time, each part's acks spilled to a work file first.
//!
//! Why: verify holds each live record (the latest acknowledged one at a location) while
//! it reads the region, about [`LIVE_RECORD_BYTES`] each; a 4 TB drive covered at
//! 4 KiB holds 1 G of them. The region is cut into parts of at most as many record
//! slots as the budget holds (`plan`). One pass over the acks checks them as the whole
//! run does (`scale`) and writes each ack to the part it starts in, and also to every
//! part it reaches into and to the part before when it starts within one record's
//! length of it: so a part's file holds every ack that shares a byte with an ack the
//! part owns, and its painting (`paint`) is exact for those. Then part by part: paint,
//! read its live records back (`scan::scan_visible_sparse`), count its superseded acks,
//! and spill its failed records, in ack order, to a failure file. Last, the failures of
//! every part are merged in ack order and judged as `scale` judges them, now that the
//! newest survivor and every misdirected copy found anywhere are known.
//!
//! Each ack is judged by exactly one part, the one it starts in, so the report's counts
//! are the whole run's (test: `partition/tests.rs`, the same report as the whole run's
//! for every seed and part size).

mod merge;
mod spill;
#[cfg(test)]
mod tests;
pub mod workfile;

use super::VerifyError;
use super::classify::SectorTally;
use super::judge::{FoundElsewhere, Judging, TimedOut};
use super::paint::Paint;
use super::scale::{AckPasses, Scaled, classify_record_lazily, refuse_impossible};
use super::scan::{self, ScanResult};
use super::slots::SlotTable;
use crate::device::Device;
use crate::model::{Ack, RecordClass, RunDescriptor};
use crate::record::SECTOR;
use merge::Merged;
use spill::{failure_spill_error, spill_acks};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use workfile::{Segment, TempFile, Writer};

/// The memory verify may hold, and where it puts what does not fit.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Peak resident memory to stay under, in bytes.
    pub memory_bytes: u64,
    /// Where work files go (None: the system's temporary directory, `TMPDIR`).
    pub work_dir: Option<PathBuf>,
}

/// The default budget: 512 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            work_dir: None,
        }
    }
}

impl Budget {
    pub fn work_dir(&self) -> PathBuf {
        self.work_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

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
struct Plan {
    start: u64,
    width: u64,
    parts: u64,
    /// Slots of the smallest record in one part's width.
    slots: u64,
    /// Records reach at most this far past their start.
    reach: u64,
    /// Live records a group of parts may hold.
    room: u64,
}

impl Plan {
    fn new(d: &RunDescriptor, budget: &Budget) -> Result<Plan, VerifyError> {
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
    fn with_parts(d: &RunDescriptor, parts: u64, align: u64, room: u64) -> Plan {
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

    fn part_of(&self, offset: u64) -> u64 {
        (offset.saturating_sub(self.start) / self.width).min(self.parts - 1)
    }

    fn start_of(&self, k: u64) -> u64 {
        self.start + k * self.width
    }

    /// The parts whose file holds ack [s, e): its own, those it reaches into, and the
    /// ones before it starts within `reach` of (an ack of theirs may reach it).
    fn parts_of(&self, s: u64, e: u64) -> std::ops::RangeInclusive<u64> {
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

/// A group of consecutive parts judged together: [first, last].
struct Group {
    first: u64,
    last: u64,
}

/// `scale::verify_streamed_run` within `budget`, in parts (module docs).
#[allow(clippy::too_many_arguments)]
pub fn verify_in_parts(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    run: scan::ScanRun,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
    budget: &Budget,
) -> Result<Scaled, VerifyError> {
    let plan = Plan::new(d, budget)?;
    let dir = budget.work_dir();
    judge_in_parts(
        dev,
        d,
        run,
        acks,
        read_timeout,
        scan_region,
        progress,
        &plan,
        &dir,
    )
}

/// [`verify_in_parts`] by `plan`, its work files in `dir`.
#[allow(clippy::too_many_arguments)]
fn judge_in_parts(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    run: scan::ScanRun,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
    plan: &Plan,
    dir: &Path,
) -> Result<Scaled, VerifyError> {
    let t0 = Instant::now();
    let plan = *plan;
    let dir = dir.to_path_buf();
    let (painted, files, ends) = spill_acks(d, acks, &plan, &dir)?;
    let painted = refuse_impossible(d, painted)?;
    let (n, last_ack_ns) = (painted.acks, painted.last_ack_ns);
    let mut judging = Judging::new(last_ack_ns, None, &painted.latency);
    let (file, segments) = files;
    let groups = group_parts(&plan, &segments);
    let region_end = d.settings.region_offset + d.settings.region_bytes;
    let failures_file = TempFile::new_in(&dir).map_err(|e| VerifyError::WorkDir {
        dir: dir.clone(),
        source: e,
    })?;
    let mut failures = Writer::new(failures_file);
    let mut failure_segments = vec![];
    let mut elsewhere = FoundElsewhere::new();
    let mut totals = Totals::default();
    let mut newest_survivor = None;
    let mut sample = vec![];
    let sample_per_group = 256usize.div_ceil(groups.len().max(1));
    for g in &groups {
        let owned = (
            if g.first == 0 {
                0
            } else {
                plan.start_of(g.first)
            },
            if g.last + 1 == plan.parts {
                u64::MAX
            } else {
                plan.start_of(g.last + 1)
            },
        );
        let readers = |tallies| {
            (g.first..=g.last)
                .map(|k| segments[k as usize].reader(&file[k as usize], tallies))
                .collect::<Vec<_>>()
        };
        // Paint what shares a byte with the owned acks: the acks of the next part held
        // for one that might have reached into it are left out when none did.
        let until = ends[g.first as usize..=g.last as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        let wanted = |a: &Ack| a.record.offset < until;
        let slots = SlotTable::with_free_slots(
            plan.start_of(g.first),
            (g.last - g.first + 1) * plan.slots + 2,
        );
        let mut paint = Paint::new(Some(slots));
        let mut m = Merged::new(readers(false)).map_err(VerifyError::WorkFile)?;
        while let Some((idx, a, _)) = m.next_entry().map_err(VerifyError::WorkFile)? {
            if wanted(&a) {
                paint.paint(idx, &a);
            }
        }
        let mut live = paint.live();
        // Read back and judge its live records while the superseded ones are counted.
        let scan_acks = std::mem::take(&mut live.acks);
        let visible = std::mem::take(&mut live.visible);
        let also = scan_region.then(|| {
            (
                owned.0.max(d.settings.region_offset),
                owned.1.min(region_end),
            )
        });
        let done_before = totals.bytes_read;
        let hung = totals.timed_out.is_some();
        let second = Merged::new(readers(false)).map_err(VerifyError::WorkFile)?;
        let (result, scan_acks, counted) = std::thread::scope(|s| {
            let dev = dev.clone();
            let run = run.clone();
            let scan = s.spawn(move || {
                let r = if hung {
                    unread(&scan_acks, &visible)
                } else {
                    scan::scan_visible_sparse(
                        dev,
                        run,
                        &scan_acks,
                        visible,
                        read_timeout,
                        also,
                        &|done, total| progress(done_before + done, done_before + total),
                    )
                };
                (r, scan_acks)
            });
            let counted = count_owned_superseded(second, &live, owned, &mut judging);
            match scan.join() {
                Ok((r, a)) => (r, a, counted),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        live.acks = scan_acks;
        counted?;
        // The owned live records: survivors counted now, failures kept for the merge.
        let mut failed: Vec<(u64, usize)> = vec![];
        let every = (live.acks.len() / sample_per_group).max(1);
        for (j, (a, t)) in live.acks.iter().zip(&result.tallies).enumerate() {
            if !(owned.0..owned.1).contains(&a.record.offset) {
                continue;
            }
            if j % every == 0 {
                sample.push(*a);
            }
            let c = super::classify::classify_record(t, false);
            if c.is_failure() {
                failed.push((live.idx[j], j));
            } else {
                if c == RecordClass::Intact {
                    newest_survivor = newest_survivor.max(Some(a.record.write_time_ns));
                }
                judging.count_class(a, c, t);
            }
        }
        failed.sort_unstable_by_key(|f| f.0);
        for &(idx, j) in &failed {
            failures
                .push(idx, &live.acks[j], Some(&result.tallies[j]))
                .map_err(|e| failure_spill_error(e, &dir))?;
        }
        failure_segments.push(
            failures
                .end_segment()
                .map_err(|e| failure_spill_error(e, &dir))?,
        );
        for (&k, &at) in &result.found_elsewhere {
            elsewhere.entry(k).or_insert(at);
        }
        totals.add(result, region_end);
    }
    let (failures_file, _) = failures
        .finish()
        .map_err(|e| failure_spill_error(e, &dir))?;
    judging.set_newest_survivor(newest_survivor);
    let mut timed_out = totals.timed_out.map(TimedOut::new);
    let readers = failure_segments
        .iter()
        .map(|s| s.reader(&failures_file, true))
        .collect();
    let mut m = Merged::new(readers).map_err(VerifyError::WorkFile)?;
    let mut failed = 0u64;
    while let Some((_, a, t)) = m.next_entry().map_err(VerifyError::WorkFile)? {
        failed += 1;
        let c = classify_record_lazily(&t, || {
            elsewhere.contains_key(&(a.record.stream, a.record.seq))
        });
        judging.count_class(&a, c, &t);
        if c.is_failure() {
            judging.add_loss(&a, c, &t, &elsewhere);
        }
        if let Some(to) = &mut timed_out {
            to.add(&a, c);
        }
    }
    if judging.acked() != n {
        return Err(VerifyError::AcksChanged {
            first: n,
            second: judging.acked(),
        });
    }
    if let Some(to) = &mut timed_out {
        to.add_others(n - failed, last_ack_ns);
    }
    let mut report = judging.finish();
    if let Some(to) = timed_out {
        to.apply(&mut report, read_timeout);
    }
    report.unreadable_ranges = totals.unreadable;
    report.bytes_read = totals.bytes_read;
    report.verify_ms = t0.elapsed().as_secs_f64() * 1e3;
    report.run = Some(d.clone());
    report.refresh_plain();
    Ok(Scaled { report, sample })
}

/// What the parts' scans add up to.
#[derive(Default)]
struct Totals {
    bytes_read: u64,
    unreadable: Vec<(u64, u64, String)>,
    /// Where a read hung, and the rest of the region from there: no later part is read.
    timed_out: Option<(u64, u64)>,
}

impl Totals {
    fn add(&mut self, r: ScanResult, region_end: u64) {
        self.bytes_read += r.bytes_read;
        self.unreadable.extend(r.unreadable);
        if self.timed_out.is_none()
            && let Some((from, _)) = r.timed_out
        {
            self.timed_out = Some((from, region_end.max(from) - from));
        }
    }
}

/// A part after a hung read: not read (another hang each would cost the timeout), every
/// sector of its live records unreadable, as the scan marks what a hang left unread.
fn unread(acks: &[Ack], visible: &scan::Visible) -> ScanResult {
    let tallies = acks
        .iter()
        .enumerate()
        .map(|(k, a)| {
            let seen: u64 = visible
                .ranges_of(k, (a.record.offset, a.record.end()))
                .iter()
                .map(|(s, e)| (e - s) / SECTOR as u64)
                .sum();
            SectorTally {
                unreadable: seen as u32,
                superseded: a.record.sectors.saturating_sub(seen as u32),
                ..Default::default()
            }
        })
        .collect();
    ScanResult {
        tallies,
        found_elsewhere: Default::default(),
        bytes_read: 0,
        unreadable: vec![],
        timed_out: None,
    }
}

/// Consecutive parts judged together while their live records (at most their acks, at
/// most their slots) fit the budget: a run with few acks is judged in one group.
fn group_parts(plan: &Plan, segments: &[Segment]) -> Vec<Group> {
    let room = plan.room;
    let mut groups: Vec<Group> = vec![];
    let mut held = u64::MAX;
    for (k, s) in segments.iter().enumerate() {
        let live = s.count().min(plan.slots + 2);
        match groups.last_mut() {
            Some(g) if held + live <= room => {
                g.last = k as u64;
                held += live;
            }
            _ => {
                groups.push(Group {
                    first: k as u64,
                    last: k as u64,
                });
                held = live;
            }
        }
    }
    groups
}

/// The second pass over a group's acks while its live records are read: counts every
/// ack it owns (starts in `owned`) and the class of those no longer live.
fn count_owned_superseded(
    mut m: Merged,
    live: &super::paint::Live,
    owned: (u64, u64),
    judging: &mut Judging,
) -> Result<(), VerifyError> {
    let mut next_live = 0usize;
    while let Some((idx, a, _)) = m.next_entry().map_err(VerifyError::WorkFile)? {
        let is_live = live.place_of(idx, &a, &mut next_live).is_some();
        if !(owned.0..owned.1).contains(&a.record.offset) {
            continue;
        }
        judging.count_ack(&a);
        if !is_live {
            let t = SectorTally {
                superseded: a.record.sectors,
                ..Default::default()
            };
            judging.count_class(&a, RecordClass::Superseded, &t);
        }
    }
    Ok(())
}
