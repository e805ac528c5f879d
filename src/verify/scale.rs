//! Verify at scale: judge a run of any length in memory that grows with the region, not
//! with the run (100 M acks in well under 1 GiB with sequential placement). This is the
//! whole-run half of the one engine every caller judges a device through (`engine`).
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
//!    (`scan::scan_visible`) on another thread, while this one streams the acks again
//!    and counts every ack that is not live (wholly superseded) in `judge::Judging`;
//!    when the reads end, each live ack is counted with its tally, and the failures
//!    are added to the losses in ack order, as `judge::judge` does. Why two threads:
//!    the second pass took 0.2-0.3 s for 2.6 M acks of 512 B after the reads ended
//!    (docs/performance.md "Verify read speed against dd").
//!
//! The device's reads of the run's region start before step 1, so the first pass
//! overlaps I/O: for records of one size (the writer's settings), the whole region is
//! read and reduced to a summary per slot (`scan::summarise_early`), and only the slots
//! the summary cannot judge are read again after it; otherwise its first 128 MiB are
//! read ahead (`scan::read_early`). When the acks are few for the region (a log file's
//! size bounds them; a 20,000-record random run on a 200 GiB drive), none of that: only
//! the live records' blocks are read (`scan::Reads`, `scan::scan_visible_sparse`).
//!
//! Tests: `scale_tests` compare its report with a slow reference judge written apart
//! from it (`scale_tests/reference.rs`).

use super::classify::{SectorTally, classify_record};
use super::judge::{Judging, TimedOut};
use super::paint::{Live, Paint};
use super::report::Report;
use super::scan;
use super::slots::SlotTable;
use crate::device::Device;
use crate::model::{Ack, RecordClass, RunDescriptor};
use crate::witness::validate::{AckRules, ImpossibleRun, LogViolations, SeqTracker};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The acks of a run, which can be read from the start more than once.
pub trait AckPasses {
    /// Calls `sink` with every ack, in ack order, in slices.
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError>;

    /// At least as many acks as a pass will give, if the source can tell before one
    /// (None: it cannot). Verify starts reading the whole region before the first pass
    /// only when this does not show the acks to be few for the region
    /// (`scan::sparse_at_most`);
    /// a bound too low costs only that overlap, never a wrong verdict.
    fn ack_count_hint(&self) -> Option<u64> {
        None
    }
}

impl AckPasses for Vec<Ack> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError> {
        self.chunks(4096).for_each(sink);
        Ok(())
    }

    fn ack_count_hint(&self) -> Option<u64> {
        Some(self.len() as u64)
    }
}

/// What the first pass keeps: the log's checks, its counts, and (unless the run is
/// judged a part at a time, `partition`) the painted map.
pub(super) struct Painted {
    paint: Option<Paint>,
    pub acks: u64,
    pub last_ack_ns: u64,
    pub latency: super::distribution::LatencyCoarse,
    rules: Option<AckRules>,
    seqs: SeqTracker,
    violations: Option<LogViolations>,
}

impl Painted {
    /// `paint`: the map to paint into, or None to check and count only.
    pub(super) fn new(d: &RunDescriptor, paint: Option<Paint>) -> Painted {
        Painted {
            paint,
            acks: 0,
            last_ack_ns: 0,
            latency: Default::default(),
            rules: AckRules::for_run(d).ok(),
            seqs: SeqTracker::default(),
            violations: None,
        }
    }

    /// Takes the next acks, in ack order.
    pub(super) fn add_chunk(&mut self, chunk: &[Ack]) {
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
        if let Some(p) = &mut self.paint {
            p.paint(idx, a);
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
fn first_pass(
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    held_at_most: u64,
) -> Result<Painted, super::VerifyError> {
    let paint = Paint::new(Some(SlotTable::new(d.settings.region_offset)));
    let mut painted = Painted::new(d, Some(paint));
    let mut outgrew = false;
    acks.pass(&mut |chunk| {
        if outgrew {
            return;
        }
        painted.add_chunk(chunk);
        let held = painted.paint.as_ref().map_or(0, |p| {
            use super::partition::plan::{LIVE_RECORD_BYTES, WHOLE_GRID_LIVE_RECORD_BYTES};
            p.held_bytes(WHOLE_GRID_LIVE_RECORD_BYTES, LIVE_RECORD_BYTES)
        });
        outgrew = held > held_at_most;
    })?;
    if outgrew {
        return Err(super::VerifyError::OutgrewTheBudget);
    }
    refuse_impossible(d, painted)
}

/// The log's checks of the first pass: `painted` back if every ack could come from a
/// plugpull writer, else the refusal (`witness::validate::refuse_impossible_run`'s).
pub(super) fn refuse_impossible(
    d: &RunDescriptor,
    painted: Painted,
) -> Result<Painted, super::VerifyError> {
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

/// The whole run judged at once, its live records held in memory (module docs); the
/// caller has checked that they fit the budget (`engine::verify_streamed_run`).
/// `held_at_most`: the bytes its painted records may take; past them it stops, before
/// any judging, with [`VerifyError::OutgrewTheBudget`](super::VerifyError).
#[allow(clippy::too_many_arguments)]
pub fn verify_whole_run(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    run: scan::ScanRun,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
    held_at_most: u64,
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
    // Few acks for the region (the source can tell before the first pass): no early read
    // of the whole region; the scan reads the live records' blocks (`scan::Reads`).
    let sparse = !scan_region && scan::sparse_at_most(d, acks.ack_count_hint());
    let summarising = scan::summary_grid(d, super::slots::FREE_SLOTS)
        .filter(|_| !sparse)
        .map(|grid| {
            scan::summarise_early(
                dev.clone(),
                run.clone(),
                grid,
                region.0,
                region.1,
                read_timeout,
            )
        });
    // Reads ahead are only faster: without the memory for them (128 MiB ahead of a
    // large region) the scan reads after the first pass, with buffers of its own, and
    // verify stops with `ReadBuffers` only if even those cannot be had.
    let summarising = summarising.and_then(Result::ok);
    let early = match summarising {
        None if !sparse => scan::read_early(dev.clone(), region.0, region.1).ok(),
        _ => None,
    };
    let mut painted = first_pass(d, acks, held_at_most)?;
    let (n, last_ack_ns) = (painted.acks, painted.last_ack_ns);
    let latency = std::mem::take(&mut painted.latency);
    let mut live = painted.paint.take().expect("first_pass paints").live();
    // The acks counted now: if they are few for the region after all (a log file's size
    // bounds them loosely), the early reads stop and the scan reads only their blocks.
    let sparse =
        scan::reads_of_run(d, acks.ack_count_hint(), n, scan_region) == scan::Reads::Records;
    let (summarising, early) = match sparse {
        true => (None, None),
        false => (summarising, early),
    };
    let also = scan_region.then_some(region);
    let on_grid = live.find.as_ref().map(|f| f.grid());
    let mut judging = Judging::new(last_ack_ns, None, &latency);
    // The region is read (and for the most part already judged, `summarise_early`) on
    // other threads while this one streams the acks a second time and counts every ack
    // that no longer shows anywhere: only the live ones are left for after the reads.
    let scan_acks = std::mem::take(&mut live.acks);
    let visible = std::mem::take(&mut live.visible);
    let (result, scan_acks, counted) = std::thread::scope(|s| {
        let scan = s.spawn(move || match summarising {
            Some(sum) if on_grid == Some(sum.grid()) => {
                match scan::scan_summarised(dev, run, scan_acks, sum, read_timeout, also, progress)
                {
                    Ok((r, a)) => (Ok(r), a),
                    Err(e) => (Err(e), vec![]),
                }
            }
            // Not the grid summarised (another size, or the map painted): read anew.
            None if sparse => {
                let r = scan::scan_visible_sparse(
                    dev,
                    run,
                    &scan_acks,
                    visible,
                    read_timeout,
                    also,
                    progress,
                );
                (r, scan_acks)
            }
            sum => {
                drop(sum);
                let r = scan::scan_visible(
                    dev,
                    run,
                    &scan_acks,
                    visible,
                    read_timeout,
                    also,
                    early,
                    progress,
                );
                (r, scan_acks)
            }
        });
        let counted = count_the_superseded(acks, &live, &mut judging);
        match scan.join() {
            Ok((r, a)) => (r, a, counted),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    live.acks = scan_acks;
    let seen = counted?;
    let result = result.map_err(super::VerifyError::ReadBuffers)?;
    if seen != n {
        return Err(super::VerifyError::AcksChanged {
            first: n,
            second: seen,
        });
    }
    let elsewhere = &result.found_elsewhere;
    // The live acks, in the order of the list; the failures' findings in ack order.
    let mut newest_survivor = None;
    let mut failures: Vec<(u64, usize, RecordClass)> = vec![];
    for (j, (a, t)) in live.acks.iter().zip(&result.tallies).enumerate() {
        let c = classify_record_lazily(t, || {
            elsewhere.contains_key(&(a.record.stream, a.record.seq))
        });
        judging.count_class(a, c, t);
        match c {
            RecordClass::Intact => {
                newest_survivor = newest_survivor.max(Some(a.record.write_time_ns));
            }
            c if c.is_failure() => failures.push((live.idx[j], j, c)),
            _ => {}
        }
    }
    failures.sort_unstable_by_key(|f| f.0);
    judging.set_newest_survivor(newest_survivor);
    judging.set_unread(result.timed_out);
    for &(_, j, c) in &failures {
        judging.add_loss(&live.acks[j], c, &result.tallies[j], elsewhere);
    }
    // A hung read (rare): which acks it left unread takes one more pass.
    let timed_out = match result.timed_out {
        None => None,
        Some(range) => {
            let mut to = TimedOut::new(range, last_ack_ns, newest_survivor);
            let mut c_of = class_in_ack_order(&live, &result.tallies, elsewhere);
            acks.pass(&mut |chunk| chunk.iter().for_each(|a| to.add(a, c_of(a))))?;
            Some(to)
        }
    };
    let reads = super::judge::ReadsDone {
        unreadable: result.unreadable,
        bytes_read: result.bytes_read,
        read_through: result.read_through,
        too_many_found_elsewhere: elsewhere.too_many(),
    };
    let report = judging.finish_run(d, timed_out.map(|to| (to, read_timeout)), reads, t0);
    let every = (live.acks.len() / 256).max(1);
    let sample = live.acks.iter().step_by(every).copied().collect();
    Ok(Scaled { report, sample })
}

/// The second pass over the acks, while the region is read: counts every ack's
/// latency and size, and the class of every ack that is not live (wholly superseded: a
/// later ack covers all of it), into `judging`. Returns how many acks the pass saw.
fn count_the_superseded(
    acks: &dyn AckPasses,
    live: &Live,
    judging: &mut Judging,
) -> Result<u64, super::VerifyError> {
    let (mut i, mut next_live) = (0u64, 0usize);
    acks.pass(&mut |chunk| {
        for a in chunk {
            judging.count_ack(a);
            if live.place_of(i, a, &mut next_live).is_none() {
                let t = SectorTally {
                    superseded: a.record.sectors,
                    ..Default::default()
                };
                judging.count_class(a, RecordClass::Superseded, &t);
            }
            i += 1;
        }
    })?;
    Ok(i)
}

/// `classify_record`, asking whether the record was found elsewhere only when that
/// decides the class (a lookup per ack showed in verify's profile).
pub(super) fn classify_record_lazily(
    t: &SectorTally,
    found_elsewhere: impl FnOnce() -> bool,
) -> RecordClass {
    match classify_record(t, false) {
        RecordClass::Stale | RecordClass::Lost => classify_record(t, found_elsewhere()),
        c => c,
    }
}

/// The class of each ack, asked in ack order: superseded unless live.
fn class_in_ack_order<'a>(
    live: &'a Live,
    tallies: &'a [SectorTally],
    elsewhere: &'a super::judge::FoundElsewhere,
) -> impl FnMut(&Ack) -> RecordClass + 'a {
    let (mut i, mut next_live) = (0u64, 0usize);
    move |a| {
        let c = match live.place_of(i, a, &mut next_live) {
            Some(j) => classify_record_lazily(&tallies[j], || {
                elsewhere.contains_key(&(a.record.stream, a.record.seq))
            }),
            None => RecordClass::Superseded,
        };
        i += 1;
        c
    }
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

    /// From the file's size: an ack takes at least one bit of the log (its lane and
    /// time deltas are bit-packed, docs/format.md), so the log holds at most 8 per byte.
    fn ack_count_hint(&self) -> Option<u64> {
        let bytes = std::fs::metadata(self.path).ok()?.len();
        Some(bytes.saturating_mul(8))
    }
}
