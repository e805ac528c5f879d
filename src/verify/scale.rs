//! Verify at scale: judge a run of any length in memory that grows with the region, not
//! with the run (issue 15: 100 M acks in <= 1 GiB with sequential placement).
//!
//! Why: holding every ack, its sector tally and its visible ranges cost about 200 bytes
//! per ack (2.6 M acks, 513 MB RSS); an hour of a drive answering 100k flushes/s is
//! 360 M acks. Only the latest acknowledged record at each location is ever read back:
//! every earlier one is superseded there. So the acks are read twice, streamed:
//! 1. paint: each ack paints its byte range with itself in a map of disjoint pieces
//!    (the later record, in (stream, seq) order as in `scan::visible_ranges`, wins a
//!    byte), so the map holds at most one piece per live record of the region (for
//!    records of one size on a grid, the common case, a flat table of one entry per
//!    slot instead: `verify::slots`);
//!    alongside, the checks of `witness::validate::check_run`, the last ack and the
//!    latency's coarse counts;
//! 2. the live records are read back and judged exactly as a whole scan would
//!    (`scan::scan_visible`), then the acks are streamed again: a live ack takes its
//!    tally, every other ack is wholly superseded, and `judge::Judging` adds each up
//!    in ack order as `judge::judge` does.
//!
//! The device's reads of the run's region start before step 1, so the first pass
//! overlaps I/O: for records of one size (the writer's settings), the whole region is
//! read and reduced to a summary per slot (`scan::summarise_early`), and only the slots
//! the summary cannot judge are read again after it; otherwise its first 128 MiB are
//! read ahead (`scan::read_early`).
//!
//! The result is the same report as `verify_device` (tests: `scale_tests`).

use super::classify::{SectorTally, classify_record};
use super::judge::{Judging, TimedOut};
use super::report::Report;
use super::scan::{self, Visible};
use super::slots::{LiveSlots, SlotFinder, SlotTable};
use crate::device::Device;
use crate::model::{Ack, RecordClass, RunDescriptor};
use crate::witness::validate::{AckRules, ImpossibleRun, LogViolations, SeqTracker};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The acks of a run, which can be read from the start more than once.
pub trait AckPasses {
    /// Calls `sink` with every ack, in ack order, in slices.
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError>;
}

impl AckPasses for Vec<Ack> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError> {
        self.chunks(4096).for_each(sink);
        Ok(())
    }
}

/// One piece of the painted map: [start, end) belongs to ack number `idx`.
struct Piece {
    end: u64,
    idx: u64,
    ack: Ack,
}

fn later(a: &Ack, b: &Ack) -> bool {
    (a.record.stream, a.record.seq) > (b.record.stream, b.record.seq)
}

/// What the first pass keeps.
struct Painted {
    /// The latest ack per slot while the records fit one (`slots` module docs); None
    /// once one did not, and `pieces` paints.
    slots: Option<SlotTable>,
    pieces: BTreeMap<u64, Piece>,
    acks: u64,
    last_ack_ns: u64,
    latency: super::distribution::LatencyCoarse,
    rules: Option<AckRules>,
    seqs: SeqTracker,
    violations: Option<LogViolations>,
}

impl Painted {
    fn new(d: &RunDescriptor) -> Painted {
        Painted::with_slots(d, Some(SlotTable::new(d.settings.region_offset)))
    }

    /// `slots`: the table to paint into first, or None to paint only the map.
    fn with_slots(d: &RunDescriptor, slots: Option<SlotTable>) -> Painted {
        Painted {
            slots,
            pieces: BTreeMap::new(),
            acks: 0,
            last_ack_ns: 0,
            latency: Default::default(),
            rules: AckRules::for_run(d).ok(),
            seqs: SeqTracker::default(),
            violations: None,
        }
    }

    /// Takes the next acks, in ack order.
    fn add_chunk(&mut self, chunk: &[Ack]) {
        // The log's checks a chunk at a time (one per-stream lookup table pass instead
        // of one per ack); a chunk that breaks a rule is checked again ack by ack, from
        // the same state (`check_batch` changes nothing on a violation), to count every
        // bad ack as `check_run` does.
        let whole = match &self.rules {
            Some(rules) => self.seqs.check_batch(rules, self.acks, chunk).is_ok(),
            None => true,
        };
        for a in chunk {
            self.add(a, !whole);
        }
    }

    /// `check`: run the log's checks on `a` (its chunk broke a rule).
    fn add(&mut self, a: &Ack, check: bool) {
        let idx = self.acks;
        self.acks += 1;
        self.last_ack_ns = self.last_ack_ns.max(a.flushed_ns);
        self.latency.add(a);
        if check
            && let Some(rules) = &self.rules
            && let Err(v) = self.seqs.check_batch(rules, idx, std::slice::from_ref(a))
        {
            match &mut self.violations {
                Some(f) => f.count += 1,
                None => self.violations = Some(LogViolations { first: v, count: 1 }),
            }
        }
        self.paint(idx, a);
    }

    /// Paints [offset, end) of `a`, except where a later record already holds a byte.
    fn paint(&mut self, idx: u64, a: &Ack) {
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

    fn put(&mut self, s: u64, e: u64, idx: u64, a: &Ack) {
        self.pieces.insert(
            s,
            Piece {
                end: e,
                idx,
                ack: *a,
            },
        );
    }

    /// The live acks (at least one byte still theirs) with their visible ranges (sorted,
    /// touching ranges merged) and numbers: in slot order from the table (no sort: slot
    /// order is offset order, the scan's own), in ack order from the map.
    fn live(self) -> Live {
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

/// [`Painted::live`] from the map's pieces.
fn live_of_pieces(pieces: BTreeMap<u64, Piece>) -> Live {
    // Drained into a flat vector and sorted by ack: a second tree keyed by ack would
    // double the peak (a tree costs about twice its entries).
    let mut flat: Vec<(u64, u64, u64, Ack)> = Vec::with_capacity(pieces.len());
    flat.extend(pieces.into_iter().map(|(s, p)| (p.idx, s, p.end, p.ack)));
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
pub(super) fn live_for_tests(
    d: &RunDescriptor,
    acks: &[Ack],
    slots: Option<SlotTable>,
) -> Vec<LiveRow> {
    let mut p = Painted::with_slots(d, slots);
    p.add_chunk(acks);
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
struct Live {
    idx: Vec<u64>,
    acks: Vec<Ack>,
    visible: Visible,
    /// Finds a live ack by its slot when the list is in slot order.
    find: Option<SlotFinder>,
}

impl Live {
    /// The place in the list of ack number `i` (the ack `a`), if it is live. The second
    /// pass asks for every ack in ack order; `next`, where the next live ack in ack order
    /// sits when the list is in ack order, moves past a found one.
    #[inline]
    fn place_of(&self, i: u64, a: &Ack, next: &mut usize) -> Option<usize> {
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

/// What a scaled verify gives besides the report: the run's validity (a log no writer
/// could produce gets no verdict; the caller decides, as with `refuse_impossible_run`).
pub struct Scaled {
    pub report: Report,
    /// A sample of the live acks (the latest ones at the most locations), for
    /// `select::check_identity`'s look for the run's stamps.
    pub sample: Vec<Ack>,
}

/// Checks every ack of `acks` (one pass): the same refusal as
/// `witness::validate::refuse_impossible_run`, then paints them.
fn first_pass(d: &RunDescriptor, acks: &dyn AckPasses) -> Result<Painted, super::VerifyError> {
    let mut painted = Painted::new(d);
    acks.pass(&mut |chunk| painted.add_chunk(chunk))?;
    let why = match (&painted.rules, &painted.violations) {
        (Some(_), None) => return Ok(painted),
        (Some(_), Some(v)) => format!(
            "{} of its {} acks cannot come from a plugpull writer; the first: {}",
            v.count, painted.acks, v.first
        ),
        (None, _) => match AckRules::for_run(d) {
            Err(f) => format!("its run descriptor cannot come from a plugpull writer: {f}"),
            Ok(_) => unreachable!("the same descriptor"),
        },
    };
    Err(ImpossibleRun { run: d.run_id, why }.into())
}

/// `verify_device_with_progress` for a run of any length: the acks are streamed twice
/// from `acks` (module docs). Refuses a log no writer could produce
/// ([`ImpossibleRun`], inside `VerifyError`) before judging the device (its region is
/// already being read then: `scan::read_early`).
pub fn verify_streamed(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &dyn Fn(u64, u64),
) -> Result<Scaled, super::VerifyError> {
    let t0 = Instant::now();
    // The run's region is read while the acks are painted: in the common case (a ring
    // over the whole region, or `scan_region`) it is exactly the span the scan needs;
    // when it is not, the scan drops these reads and reads its own span.
    let s = &d.settings;
    let region = (
        s.region_offset,
        s.region_offset.saturating_add(s.region_bytes),
    );
    // Records of one size (the writer's settings say so): the whole region is read now
    // and kept as a summary per slot (`scan::summarise_early`); else only its first
    // chunks are read ahead.
    let summarising = summary_grid(d).map(|grid| {
        let run = scan::ScanRun::from(d);
        scan::summarise_early(dev.clone(), run, grid, region.0, region.1, read_timeout)
    });
    let early = match summarising {
        None => Some(scan::read_early(dev.clone(), region.0, region.1)),
        Some(_) => None,
    };
    let mut painted = first_pass(d, acks)?;
    let (n, last_ack_ns) = (painted.acks, painted.last_ack_ns);
    let latency = std::mem::take(&mut painted.latency);
    let mut live = painted.live();
    let also = scan_region.then_some(region);
    let on_grid = live.find.as_ref().map(|f| f.grid());
    let result = match summarising {
        Some(sum) if on_grid == Some(sum.grid()) => {
            let acks = std::mem::take(&mut live.acks);
            let (r, acks) = scan::scan_summarised(dev, d, acks, sum, read_timeout, also, progress);
            live.acks = acks;
            r
        }
        // Not the grid summarised (another size, or the map painted): read anew.
        sum => {
            drop(sum);
            let visible = std::mem::take(&mut live.visible);
            scan::scan_visible(
                dev,
                d,
                &live.acks,
                visible,
                read_timeout,
                also,
                early,
                progress,
            )
        }
    };
    let elsewhere = &result.found_elsewhere;
    let class_of = |a: &Ack, t: &SectorTally| {
        classify_record(t, elsewhere.contains_key(&(a.record.stream, a.record.seq)))
    };
    let newest_survivor = live
        .acks
        .iter()
        .zip(&result.tallies)
        .filter(|(a, t)| class_of(a, t) == RecordClass::Intact)
        .map(|(a, _)| a.record.write_time_ns)
        .max();
    let mut judging = Judging::new(last_ack_ns, newest_survivor, &latency);
    let mut timed_out = result.timed_out.map(TimedOut::new);
    let (mut i, mut next_live, mut seen) = (0u64, 0usize, 0u64);
    acks.pass(&mut |chunk| {
        for a in chunk {
            let t = match live.place_of(i, a, &mut next_live) {
                Some(j) => result.tallies[j],
                None => SectorTally {
                    superseded: a.record.sectors,
                    ..Default::default()
                },
            };
            let c = class_of(a, &t);
            judging.add(a, c, &t, elsewhere);
            if let Some(to) = &mut timed_out {
                to.add(a, c);
            }
            i += 1;
        }
        seen = i;
    })?;
    if seen != n {
        return Err(super::VerifyError::AcksChanged {
            first: n,
            second: seen,
        });
    }
    let mut report = judging.finish();
    if let Some(to) = timed_out {
        to.apply(&mut report, read_timeout);
    }
    report.unreadable_ranges = result.unreadable;
    report.bytes_read = result.bytes_read;
    report.verify_ms = t0.elapsed().as_secs_f64() * 1e3;
    report.run = Some(d.clone());
    let every = (live.acks.len() / 256).max(1);
    let sample = live.acks.iter().step_by(every).copied().collect();
    Ok(Scaled { report, sample })
}

/// The slots to summarise the region by while the first pass runs: the writer's
/// records are all one size, and the region holds at most `slots::FREE_SLOTS` of them
/// (the summary's memory). Whether the acks really are those slots is known only after
/// the first pass (`verify_streamed` checks the slot table's grid).
fn summary_grid(d: &RunDescriptor) -> Option<scan::SlotGrid> {
    let s = &d.settings;
    let len = s.record_bytes_min;
    let fits = len == s.record_bytes_max
        && len > 0
        && len % crate::record::SECTOR as u64 == 0
        && s.region_bytes / len <= super::slots::FREE_SLOTS;
    fits.then_some(scan::SlotGrid {
        base: s.region_offset,
        len,
    })
}

/// The acks of a log file, read from the file at every pass (never held).
pub struct FilePasses<'a> {
    pub path: &'a std::path::Path,
    pub key: Option<&'a crate::wire::auth::Key>,
    /// The descriptor, events and wholeness the last pass read.
    pub last: std::cell::RefCell<
        Option<(
            crate::model::RunLog,
            crate::witness::store::checker::Wholeness,
        )>,
    >,
}

impl AckPasses for FilePasses<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError> {
        let got = crate::witness::store::reader::stream_log_file(self.path, self.key, sink)
            .map_err(|e| super::VerifyError::ReadingAcks {
                path: self.path.to_path_buf(),
                source: e.into(),
            })?;
        *self.last.borrow_mut() = Some(got);
        Ok(())
    }
}
