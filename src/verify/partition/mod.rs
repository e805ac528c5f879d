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
//! read back and judge the part's own bytes (`scan::scan_part`: exactly the whole run's
//! reads there, the parts' edges on the device's grid of reads), count its superseded
//! acks, and spill its failed records, in ack order, to a failure file. A record across
//! an edge is judged when the last part it reaches into is, its sectors' findings from
//! each added up (`Across`). Last, the failures of every part are merged in ack order
//! and judged as `scale` judges them, now that the newest survivor and every misdirected
//! copy found anywhere are known.
//!
//! Each ack is counted by exactly one part, the one it starts in, so the report is the
//! whole run's, to the bytes read and the unreadable ranges (tests: `partition/tests.rs`,
//! for every seed, parts' grouping and fault at the parts' edges).

mod merge;
pub mod plan;
mod spill;
#[cfg(test)]
mod tests;
pub mod workfile;

use super::VerifyError;
use super::budget::Budget;
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
use plan::Plan;
pub use plan::{live_at_most, whole_run_fits};
use spill::{failure_spill_error, spill_acks};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workfile::{Segment, TempFile, Writer};

/// A group of consecutive parts judged together: [first, last].
struct Group {
    first: u64,
    last: u64,
}

/// What a run judged in parts needs before anything is read: a budget the region's
/// parts fit ([`VerifyError::MemoryTooSmall`]) and room in the work directory.
pub fn refuse_before_reading(d: &RunDescriptor, budget: &Budget) -> Result<(), VerifyError> {
    Plan::new(d, budget, true)?;
    spill::check_room(&budget.work_dir())
}

/// `engine::verify_streamed_run` within `budget`, in parts (module docs).
/// `trust_placement`: plan on the live records the run's placement allows
/// (`plan::live_at_most`); false after the whole run found more, planned for one a
/// sector.
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
    trust_placement: bool,
) -> Result<Scaled, VerifyError> {
    let plan = Plan::new(d, budget, trust_placement)?;
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
    let spilled = spill_acks(d, acks, &plan, &dir)?;
    let painted = refuse_impossible(d, spilled.painted)?;
    let (n, last_ack_ns) = (painted.acks, painted.last_ack_ns);
    let mut judging = Judging::new(last_ack_ns, None, &painted.latency);
    let (file, segments, ends) = (spilled.files, spilled.segments, spilled.ends);
    let groups = group_parts(&plan, &segments);
    // What the whole run would read: its records' span (and the region with
    // `--scan-region`), all of it or only the records' blocks; each part reads its share.
    let s = &d.settings;
    let region = (s.region_offset, s.region_offset + s.region_bytes);
    let also = scan_region.then_some(region);
    let span = match spilled.records {
        Some(records) => scan::whole_span(dev.as_ref(), records, also),
        None => (0, 0),
    };
    let span_readable_end = scan::readable_end(dev.as_ref(), span.1).max(span.0);
    let reads = scan::reads_of_run(d, acks.ack_count_hint(), n, scan_region);
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
    // Records across a group's end: judged when the groups they reach into are.
    let mut across = Across::default();
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
        // Paint what shares a byte with the owned acks or with those reaching in from
        // before: the acks of the next part held for one that might have reached into
        // it are left out when none did.
        let until = ends[g.first as usize..=g.last as usize]
            .iter()
            .copied()
            .max()
            .unwrap_or(0);
        let wanted = |a: &Ack| a.record.offset < owned.0 || a.record.offset < until;
        // The table grows freely only as far as the group's room for live records, then
        // only while half full: a group of many sparse parts (few acks over a large
        // region) would otherwise hold a slot for every record the parts could hold.
        let slots = SlotTable::with_free_slots(
            plan.table_base(g.first),
            ((g.last - g.first + 1) * plan.slots).min(plan.room) + 3,
        );
        let mut paint = Paint::new(Some(slots));
        let mut m = Merged::new(readers(false)).map_err(VerifyError::WorkFile)?;
        // A plan that trusted the run's placement is held to it: a group painting more
        // than its room stops the parts, to be planned again for a live record a sector
        // (`engine::verify_streamed_run`).
        let room_bytes = (plan.room + 3) * plan::LIVE_RECORD_BYTES;
        let mut painted = 0u64;
        while let Some((idx, a, _)) = m.next_entry().map_err(VerifyError::WorkFile)? {
            if wanted(&a) {
                paint.paint(idx, &a);
                painted += 1;
                if plan.trusted
                    && painted % 1024 == 0
                    && paint.held_bytes(plan::WHOLE_GRID_LIVE_RECORD_BYTES, plan::LIVE_RECORD_BYTES)
                        > room_bytes
                {
                    return Err(VerifyError::OutgrewTheBudget);
                }
            }
        }
        if plan.trusted
            && paint.held_bytes(plan::WHOLE_GRID_LIVE_RECORD_BYTES, plan::LIVE_RECORD_BYTES)
                > room_bytes
        {
            return Err(VerifyError::OutgrewTheBudget);
        }
        let mut live = paint.live();
        // Read back and judge the group's bytes while the superseded acks are counted.
        let scan_acks = std::mem::take(&mut live.acks);
        let visible = std::mem::take(&mut live.visible);
        let part = scan::Part {
            owned,
            span,
            reads,
            hung: totals.timed_out.is_some(),
        };
        let done_before = totals.bytes_read;
        let second = Merged::new(readers(false)).map_err(VerifyError::WorkFile)?;
        let (result, scan_acks, counted) = std::thread::scope(|s| {
            let dev = dev.clone();
            let run = run.clone();
            let scan = s.spawn(move || {
                let r = scan::scan_part(
                    dev,
                    run,
                    &scan_acks,
                    visible,
                    read_timeout,
                    part,
                    &|done, total| progress(done_before + done, done_before + total),
                );
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
        let result = result.map_err(VerifyError::ReadBuffers)?;
        // The owned live records whose sectors are all judged: survivors counted now,
        // failures kept for the merge; those across the group's end wait for the next.
        // Survivors counted at once; failures kept by their place in the live list (16 B
        // each), to be written in ack order with those across the edge (few).
        let mut failed: Vec<(u64, usize)> = vec![];
        let mut count = |a: &Ack, t: &SectorTally, judging: &mut Judging| {
            let c = super::classify::classify_record(t, false);
            if !c.is_failure() {
                if c == RecordClass::Intact {
                    newest_survivor = newest_survivor.max(Some(a.record.write_time_ns));
                }
                judging.count_class(a, c, t);
            }
            c.is_failure()
        };
        let every = (live.acks.len() / sample_per_group).max(1);
        for (j, (a, t)) in live.acks.iter().zip(&result.tallies).enumerate() {
            let idx = live.idx[j];
            if a.record.offset < owned.0 {
                across.add_here(idx, t);
                continue;
            }
            if a.record.offset >= owned.1 {
                continue;
            }
            if j % every == 0 {
                sample.push(*a);
            }
            if a.record.end() > owned.1 {
                across.start(idx, *a, *t);
            } else if count(a, t, &mut judging) {
                failed.push((idx, j));
            }
        }
        let mut failed_across: Vec<(u64, Ack, SectorTally)> = across
            .end_group(owned)
            .into_iter()
            .filter(|(_, a, t)| count(a, t, &mut judging))
            .collect();
        failed.sort_unstable_by_key(|f| f.0);
        failed_across.sort_unstable_by_key(|f| f.0);
        let mut across_left = failed_across.iter().peekable();
        for &(idx, j) in &failed {
            while let Some((i, a, t)) = across_left.next_if(|f| f.0 < idx) {
                failures
                    .push(*i, a, Some(t))
                    .map_err(|e| failure_spill_error(e, &dir))?;
            }
            failures
                .push(idx, &live.acks[j], Some(&result.tallies[j]))
                .map_err(|e| failure_spill_error(e, &dir))?;
        }
        for (i, a, t) in across_left {
            failures
                .push(*i, a, Some(t))
                .map_err(|e| failure_spill_error(e, &dir))?;
        }
        failure_segments.push(
            failures
                .end_segment()
                .map_err(|e| failure_spill_error(e, &dir))?,
        );
        elsewhere.add(&result.found_elsewhere);
        totals.add(result, span_readable_end);
    }
    debug_assert!(across.is_empty(), "the last group owns everything after it");
    let (failures_file, _) = failures
        .finish()
        .map_err(|e| failure_spill_error(e, &dir))?;
    judging.set_newest_survivor(newest_survivor);
    judging.set_unread(totals.timed_out);
    let mut timed_out = totals
        .timed_out
        .map(|range| TimedOut::new(range, last_ack_ns, newest_survivor));
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
    // The source passed over again, as the whole run's second pass does: acks that
    // changed since the spill (a log still being written, or replaced) get no verdict.
    let mut again = 0u64;
    acks.pass(&mut |chunk| again += chunk.len() as u64)?;
    if again != n {
        return Err(VerifyError::AcksChanged {
            first: n,
            second: again,
        });
    }
    if let Some(to) = &mut timed_out {
        to.add_others(n - failed);
    }
    let reads = super::judge::ReadsDone {
        unreadable: totals.unreadable,
        bytes_read: totals.bytes_read,
        read_through: totals.read_through,
        too_many_found_elsewhere: elsewhere.too_many(),
    };
    let report = judging.finish_run(d, timed_out.map(|to| (to, read_timeout)), reads, t0);
    Ok(Scaled { report, sample })
}

/// What the parts' scans add up to.
struct Totals {
    bytes_read: u64,
    unreadable: Vec<(u64, u64, String)>,
    /// Where a read hung, and the rest of the whole run's span from there: no later
    /// part is read.
    timed_out: Option<(u64, u64)>,
    /// The parts' reads joined while each follows on from the last without a gap
    /// (`ScanResult::read_through`); None once one does not.
    read_through: Option<(u64, u64)>,
}

impl Default for Totals {
    fn default() -> Totals {
        Totals {
            bytes_read: 0,
            unreadable: vec![],
            timed_out: None,
            read_through: Some((0, 0)),
        }
    }
}

impl Totals {
    fn add(&mut self, r: ScanResult, span_readable_end: u64) {
        self.read_through = match (self.read_through, r.read_through) {
            (Some(all), Some((s, e))) if s == e => Some(all),
            (Some((a, b)), Some((s, e))) if a == b => Some((s, e)),
            (Some((a, b)), Some((s, e))) if b == s => Some((a, e)),
            _ => None,
        };
        self.bytes_read += r.bytes_read;
        self.unreadable.extend(r.unreadable);
        if self.timed_out.is_none()
            && let Some((from, _)) = r.timed_out
        {
            self.timed_out = Some((from, span_readable_end.max(from) - from));
        }
    }
}

/// The live records that start in a group and reach past its end, each with the tally
/// of its sectors judged so far: the next groups judge their sectors there.
#[derive(Default)]
struct Across {
    /// By ack index: the ack, its tally, and whether the group being judged has it live.
    waiting: std::collections::BTreeMap<u64, (Ack, SectorTally, bool)>,
}

impl Across {
    fn start(&mut self, idx: u64, a: Ack, t: SectorTally) {
        self.waiting.insert(idx, (a, t, false));
    }

    /// The tally of a waiting record's sectors in this group (it is live here).
    fn add_here(&mut self, idx: u64, t: &SectorTally) {
        if let Some((_, tally, here)) = self.waiting.get_mut(&idx) {
            tally.add_tally(t);
            *here = true;
        }
    }

    /// Ends the group `owned`: a waiting record not live in it had its sectors there
    /// covered by later acks (superseded); those that end in it are judged whole and
    /// given back.
    fn end_group(&mut self, owned: (u64, u64)) -> Vec<(u64, Ack, SectorTally)> {
        let mut done = vec![];
        let waiting = std::mem::take(&mut self.waiting);
        for (idx, (a, mut t, here)) in waiting {
            let r = &a.record;
            if !here && r.offset < owned.0 {
                let lo = r.offset.max(owned.0);
                let hi = r.end().min(owned.1);
                t.superseded += (hi.saturating_sub(lo) / SECTOR as u64) as u32;
            }
            match r.end() <= owned.1 {
                true => done.push((idx, a, t)),
                false => {
                    self.waiting.insert(idx, (a, t, false));
                }
            }
        }
        done
    }

    fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// Consecutive parts judged together while their live records (at most their acks, at
/// most their slots) fit the budget: a run with few acks is judged in one group.
fn group_parts(plan: &Plan, segments: &[Segment]) -> Vec<Group> {
    let room = plan.room;
    let mut groups: Vec<Group> = vec![];
    let mut held = u64::MAX;
    for (k, s) in segments.iter().enumerate() {
        let live = s.count().min(plan.live_most);
        match groups.last_mut() {
            Some(g) if held.saturating_add(live) <= room => {
                g.last = k as u64;
                held += live;
            }
            _ => {
                groups.push(Group {
                    first: k as u64,
                    last: k as u64,
                });
                // Besides its own, a group paints the records reaching in across its
                // edges (`Plan::edge_live`).
                held = plan.edge_live + live;
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

#[cfg(test)]
#[path = "attack_tests.rs"]
mod attack_tests;
