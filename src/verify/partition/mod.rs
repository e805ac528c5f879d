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
mod plan;
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

/// `engine::verify_streamed_run` within `budget`, in parts (module docs).
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
