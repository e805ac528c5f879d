//! Judging the chunks of a scan, in offset order, against the acknowledged records they
//! hold: what one chunk says about each record covering it.

use super::elsewhere::FoundElsewhere;
use super::pipeline::Chunk;
use super::visible::Visible;
use crate::model::Ack;
use crate::record::{RunId, RunKey, SECTOR, expected_sector};
use crate::verify::classify::{SectorFinding, SectorTally, classify_sector};
use std::sync::Arc;

/// The run a scan judges: its id, the record format version its writer used, which
/// decides how a damaged sector's expected content is regenerated to count its flipped
/// bits (docs/format.md "Content"), and the runs of the same drive that began after its
/// writer stopped (`verify::evidence::runs_after_the_end`), whose records at their own
/// home superseded it. A bare [`RunId`] means the current format and no later runs.
#[derive(Clone, Debug)]
pub struct ScanRun {
    pub id: RunId,
    pub format_version: u16,
    pub later_runs: Arc<[RunId]>,
}

impl ScanRun {
    /// `d`'s run, superseded where `later_runs` wrote.
    pub fn with_later_runs(d: &crate::model::RunDescriptor, later_runs: &[RunId]) -> ScanRun {
        ScanRun {
            later_runs: later_runs.into(),
            ..ScanRun::from(d)
        }
    }
}

impl From<RunId> for ScanRun {
    fn from(id: RunId) -> ScanRun {
        ScanRun {
            id,
            format_version: crate::record::FORMAT_VERSION,
            later_runs: Arc::from([]),
        }
    }
}

impl From<&crate::model::RunDescriptor> for ScanRun {
    fn from(d: &crate::model::RunDescriptor) -> ScanRun {
        ScanRun {
            id: d.run_id,
            format_version: d.format_version,
            later_runs: Arc::from([]),
        }
    }
}

/// Judges each acknowledged record's sectors as the chunks covering them go by, in
/// offset order; only the records overlapping the current chunk are active.
pub(super) struct Judge<'a> {
    run: RunId,
    later_runs: Arc<[RunId]>,
    key: RunKey,
    acks: &'a [Ack],
    visible: Visible,
    /// Ack indexes in offset order; `next` is the first not yet active.
    order: Vec<usize>,
    next: usize,
    active: Vec<usize>,
}

impl<'a> Judge<'a> {
    /// `order`: the indexes of the acks to judge.
    pub(super) fn new(
        run: ScanRun,
        acks: &'a [Ack],
        mut order: Vec<usize>,
        visible: Visible,
    ) -> Judge<'a> {
        order.sort_by_key(|&i| acks[i].record.offset);
        Judge {
            run: run.id,
            later_runs: run.later_runs.clone(),
            // An unknown version never gets here (`verify::refuse_unknown_format`); the
            // fallback only decides bit counts, never a class.
            key: RunKey::for_version(run.id, run.format_version)
                .unwrap_or_else(|| RunKey::new(run.id)),
            acks,
            visible,
            order,
            next: 0,
            active: vec![],
        }
    }

    /// Records of this run whose sectors sit away from their home in chunk `c`.
    pub(super) fn note_found_elsewhere(&self, c: &Chunk, found: &mut FoundElsewhere) {
        note_found_elsewhere(self.run, c, found);
    }

    /// Adds a finding for every sector in [c_off, c_end) of every record covering it:
    /// from `chunk` when it was read, unreadable when not.
    pub(super) fn judge_range(
        &mut self,
        chunk: Option<&Chunk>,
        c_off: u64,
        c_end: u64,
        tallies: &mut [SectorTally],
    ) {
        let acks = self.acks;
        while self.next < self.order.len() && acks[self.order[self.next]].record.offset < c_end {
            self.active.push(self.order[self.next]);
            self.next += 1;
        }
        for &i in &self.active {
            let rec = &acks[i].record;
            let lo = rec.offset.max(c_off);
            let hi = rec.end().min(c_end);
            let mut p = lo;
            while p < hi {
                let finding = self.sector(chunk, i, p);
                tallies[i].add(finding);
                p += SECTOR as u64;
            }
        }
        self.active.retain(|&i| acks[i].record.end() > c_end);
    }

    /// What ack `i`'s sector at byte `p` holds.
    fn sector(&self, chunk: Option<&Chunk>, i: usize, p: u64) -> SectorFinding {
        let rec = &self.acks[i].record;
        let index = ((p - rec.offset) / SECTOR as u64) as u32;
        match chunk {
            _ if !self.visible.covers(i, p) => SectorFinding::Superseded,
            Some(c) if !in_bad(&c.bad, p) => {
                let k = ((p - c.offset) / SECTOR as u64) as usize;
                let found = &c.buf[k * SECTOR..(k + 1) * SECTOR];
                classify_sector(
                    found,
                    &c.stamps[k],
                    c.content_ok[k],
                    self.run,
                    &self.later_runs,
                    rec,
                    index,
                    || {
                        let mut e = [0u8; SECTOR];
                        expected_sector(&mut e, &self.key, self.run, rec, index);
                        e
                    },
                )
            }
            _ => SectorFinding::Unreadable,
        }
    }
}

/// Records of run `run` whose sectors sit away from their home in chunk `c`: the first
/// place each was found (chunks go by in offset order).
pub(super) fn note_found_elsewhere(run: RunId, c: &Chunk, found: &mut FoundElsewhere) {
    for (k, st) in c.stamps.iter().enumerate() {
        if let Ok(st) = st {
            let here = c.offset + (k * SECTOR) as u64;
            if st.run == run && st.home() != here {
                // Where the record's first sector would be, given this one.
                let landed = here.saturating_sub(st.index as u64 * SECTOR as u64);
                found.note((st.record.stream, st.record.seq), landed);
            }
        }
    }
}

pub(super) fn in_bad(bad: &[(u64, u64, String)], p: u64) -> bool {
    bad.iter().any(|(o, l, _)| p >= *o && p < o + l)
}
