//! Reading the target back and judging every acknowledged record, sector by sector.
//!
//! A reader thread reads the span of the run in large aligned chunks, one chunk ahead of
//! the checker, so verify runs at the device's read bandwidth. Every sector's stamp is
//! decoded once; each acknowledged record covering it is judged against it.
//!
//! A sector is judged only for the latest acknowledged record covering it (see
//! [`visible_ranges`]): once a later record was acknowledged over a sector, the earlier
//! record's promise for that sector is void, whatever the drive holds there.

pub mod elsewhere;
mod judge;
mod part;
mod pipeline;
mod sparse;
mod summary;
mod visible;

pub use judge::ScanRun;
pub use part::{Part, readable_end, tidy_unreadable, whole_span};
#[cfg(feature = "test-support")]
pub use pipeline::{NO_READ_BUFFERS, starved_by_test};
pub use sparse::{Reads, SPARSE_RATIO, reads_of_run, sparse_at_most};
pub use summary::{SlotGrid, SummaryRead, summarise_early, summary_grid};
pub use visible::Visible;

use super::classify::SectorTally;
use crate::device::Device;
use crate::model::Ack;
use judge::Judge;
use pipeline::{Pipeline, block_of, dev_end};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The device's grid of reads: no chunk crosses a multiple of it (`pipeline::chunks_of`).
pub const GRID_BYTES: u64 = pipeline::CHUNK_BYTES;

/// What the scan found for each ack (same order as the input) and around them.
pub struct ScanResult {
    pub tallies: Vec<SectorTally>,
    /// (stream, seq) of this run's records found away from their home, and where.
    pub found_elsewhere: elsewhere::FoundElsewhere,
    pub bytes_read: u64,
    /// Ranges that could not be read: (offset, len, reason).
    pub unreadable: Vec<(u64, u64, String)>,
    /// (offset, len) left unread because a read did not complete within the timeout.
    /// Unlike a failed read this says nothing about the data (see `judge::timed_out`).
    pub timed_out: Option<(u64, u64)>,
    /// The one range the scan read without a gap, to its end (empty if it read
    /// nothing); None if its reads skipped bytes (the records' blocks apart) or one hung.
    /// Whether verify saw the whole region comes from this, not from a byte count.
    pub read_through: Option<(u64, u64)>,
}

/// Reads [start, end) of `dev` and judges every ack against it: the scan's own tests.
/// Verify judges through `verify::scale`, which calls [`scan_visible`].
#[cfg(test)]
pub fn scan(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    read_timeout: Duration,
) -> ScanResult {
    scan_with_progress(dev, run, acks, read_timeout, None, &|_, _| {})
}

/// `scan`, calling `progress(bytes_done, bytes_total)` after every chunk (for a progress
/// bar). `also`: a byte range to read as well as the records' span (the run's whole
/// region, so a misdirected copy that landed outside the span is found), clamped to
/// the device.
#[cfg(test)]
pub fn scan_with_progress(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    read_timeout: Duration,
    also: Option<(u64, u64)>,
    progress: &dyn Fn(u64, u64),
) -> ScanResult {
    let how = Inputs {
        also,
        ..Default::default()
    };
    scan_inner(dev, run, acks, how, read_timeout, progress).expect("a test's read buffers")
}

/// The scan with each ack's visible ranges already known (as
/// [`visible_ranges`] gives them over the whole run): verify at scale (`verify::scale`)
/// passes only the acks still visible somewhere, the latest at each location, so the
/// scan holds a region's worth of records however long the run was.
///
/// `early`: reads started before the acks were known ([`read_early`]); used if they
/// read exactly the span this scan needs, else dropped and the span read anew.
#[allow(clippy::too_many_arguments)]
pub fn scan_visible(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    visible: Visible,
    read_timeout: Duration,
    also: Option<(u64, u64)>,
    early: Option<EarlyRead>,
    progress: &dyn Fn(u64, u64),
) -> std::io::Result<ScanResult> {
    let how = Inputs {
        selected: None,
        visible: Some(visible),
        also,
        early,
        reads: Reads::Span,
        part: None,
    };
    scan_inner(dev, run, acks, how, read_timeout, progress)
}

/// [`scan_visible`] reading only the records' own blocks, in runs of nearby ones
/// ([`Reads::Records`]), when they cover little of their span; the whole span when
/// they do not, or with `also`.
#[allow(clippy::too_many_arguments)]
pub fn scan_visible_sparse(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    visible: Visible,
    read_timeout: Duration,
    also: Option<(u64, u64)>,
    progress: &dyn Fn(u64, u64),
) -> std::io::Result<ScanResult> {
    let how = Inputs {
        selected: None,
        visible: Some(visible),
        also,
        early: None,
        reads: Reads::Records,
        part: None,
    };
    scan_inner(dev, run, acks, how, read_timeout, progress)
}

/// Judges `acks` (a part's live records, `visible` their visible ranges) within `part`.
pub fn scan_part(
    dev: Arc<dyn Device>,
    run: ScanRun,
    acks: &[Ack],
    visible: Visible,
    read_timeout: Duration,
    part: Part,
    progress: &dyn Fn(u64, u64),
) -> std::io::Result<ScanResult> {
    let how = Inputs {
        selected: None,
        visible: Some(visible),
        also: None,
        early: None,
        reads: part.reads,
        part: Some(part),
    };
    scan_inner(dev, run, acks, how, read_timeout, progress)
}

/// A part after a hung read: nothing read, every sector of its share of the span
/// unreadable, as the whole run's scan marks what a hang left unread.
fn judge_unread(
    span: &Span,
    run: ScanRun,
    acks: &[Ack],
    order: Vec<usize>,
    visible: Option<Visible>,
    read_timeout: Duration,
    result: &mut ScanResult,
) {
    result.read_through = None;
    if span.start < span.readable_end {
        result.unreadable.push((
            span.start,
            span.readable_end - span.start,
            format!("read did not complete within {read_timeout:?}"),
        ));
    }
    let visible = visible.unwrap_or_else(|| visible_ranges(acks).into());
    let mut judge = Judge::new(run, acks, order, visible);
    judge.judge_range(None, span.start, span.end, &mut result.tallies);
}

/// Reads of [from, to) of a device (whole blocks, clamped to the device), started before
/// the scan that judges them. Why: verify at scale judges only after a full pass over
/// the acks (`verify::scale`), about 0.1 µs per ack; starting the reads of the run's
/// region first lets that pass overlap the first [`pipeline::EARLY_POOL`] chunks per
/// reader of I/O instead of leaving the drive idle.
pub struct EarlyRead {
    pipeline: Pipeline,
}

/// Starts reading [from, to) of `dev` for a later [`scan_visible`]; an error when the
/// reads' buffers cannot be had.
pub fn read_early(dev: Arc<dyn Device>, from: u64, to: u64) -> std::io::Result<EarlyRead> {
    let block = block_of(dev.as_ref());
    let start = from / block * block;
    let readable_end = (to.div_ceil(block) * block).min(dev_end(dev.as_ref(), block));
    let readable_end = readable_end.max(start);
    #[cfg(feature = "test-support")]
    pipeline::starved_by_test(true)?;
    Ok(EarlyRead {
        pipeline: Pipeline::start(dev, start, readable_end, block, pipeline::EARLY_POOL)?,
    })
}

/// Slots judged by [`scan_summarised`] from their summary, and read again (tests: that
/// both happen).
#[cfg(test)]
pub static SUMMARY_COUNTS: [std::sync::atomic::AtomicU64; 2] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// [`scan_visible`] for live acks that are each one whole slot of `summary`'s grid, in
/// slot order (handed to the summarising thread, which judges them as the reads go by,
/// and given back), judged from the summary of the region read during the first pass
/// ([`summarise_early`]): a slot that held one record whole and intact is judged by
/// that record; the others (damage) are read again and judged from their bytes, as a
/// whole scan would. The result is a whole scan's over the same span, with two
/// differences outside the verdict: `bytes_read` counts the span once, not the slots
/// read again, and a slot that fails to read again only now adds its failed blocks to
/// `unreadable` (a drive whose reads change between two reads). When the span is not
/// what the summary read, or a read timed out, the span is scanned anew.
#[allow(clippy::too_many_arguments)]
pub fn scan_summarised(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: Vec<Ack>,
    summary: SummaryRead,
    read_timeout: Duration,
    also: Option<(u64, u64)>,
    progress: &dyn Fn(u64, u64),
) -> std::io::Result<(ScanResult, Vec<Ack>)> {
    let run = run.into();
    let whole = Visible::whole_records(acks.len());
    if acks.is_empty() {
        drop(summary);
        let r = scan_visible(dev, run, &acks, whole, read_timeout, also, None, progress)?;
        return Ok((r, acks));
    }
    // Slot order is offset order (checked while judging: `off_grid`), so the first and
    // the last ack give the span.
    let span = Span::new(dev.as_ref(), &acks, &[0, acks.len() - 1], also);
    let (mut sum, judged) = summary.finish(acks);
    let summary::Judged {
        acks,
        mut tallies,
        again,
        off_grid,
        ..
    } = judged;
    let fits = sum.reads == (span.start, span.readable_end, span.block) && sum.timed_out.is_none();
    if !fits || off_grid {
        let r = scan_visible(dev, run, &acks, whole, read_timeout, also, None, progress)?;
        return Ok((r, acks));
    }
    let mut unreadable = vec![];
    if span.readable_end < span.end {
        unreadable.push((
            span.readable_end,
            span.end - span.readable_end,
            "beyond the end of the device".to_string(),
        ));
    }
    #[cfg(test)]
    {
        let judged = (acks.len() - again.len()) as u64;
        SUMMARY_COUNTS[0].fetch_add(judged, std::sync::atomic::Ordering::SeqCst);
        SUMMARY_COUNTS[1].fetch_add(again.len() as u64, std::sync::atomic::Ordering::SeqCst);
    }
    let reads = summary::Reread {
        dev: dev.clone(),
        span: (span.start, span.readable_end, span.end, span.block),
        bad: &sum.bad,
        read_timeout,
    };
    let again = reads.judge(run, &acks, again, whole, &mut tallies)?;
    unreadable.append(&mut sum.bad);
    unreadable.extend(again.new_bad);
    progress(span.end - span.start, span.end - span.start);
    let result = ScanResult {
        tallies,
        found_elsewhere: sum.found_elsewhere,
        bytes_read: sum.bytes_read,
        unreadable,
        timed_out: again.timed_out,
        read_through: match again.timed_out {
            None => Some((span.start, span.readable_end)),
            Some(_) => None,
        },
    };
    Ok((result, acks))
}

/// What to judge besides the acks, and what is already under way.
#[derive(Default)]
struct Inputs<'a> {
    /// Judge only these acks (`scan_selected`).
    selected: Option<&'a [usize]>,
    /// The acks' visible ranges, if known (else computed from all of them).
    visible: Option<Visible>,
    also: Option<(u64, u64)>,
    early: Option<EarlyRead>,
    reads: Reads,
    /// Judge only the bytes of one part of a run judged in parts.
    part: Option<Part>,
}

/// [`scan`], judging only the acks at the indexes in `selected` (their tallies; the
/// others' stay empty) and reading only the span those cover. Visibility is still
/// decided over all of `acks`, so a selected record's sector that a later ack covers is
/// superseded exactly as in a whole scan. Why: `plugpull replay` judges thousands of
/// replayed states that each differ from the last in a few records
/// (`crate::logwrites::judge`); re-reading the whole region for each costs the region's
/// read per state (25 ms for 16 MiB: a minute for a few thousand states).
pub fn scan_selected(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    selected: &[usize],
    read_timeout: Duration,
) -> std::io::Result<ScanResult> {
    let how = Inputs {
        selected: Some(selected),
        ..Default::default()
    };
    scan_inner(dev, run, acks, how, read_timeout, &|_, _| {})
}

fn scan_inner(
    dev: Arc<dyn Device>,
    run: impl Into<ScanRun>,
    acks: &[Ack],
    how: Inputs,
    read_timeout: Duration,
    progress: &dyn Fn(u64, u64),
) -> std::io::Result<ScanResult> {
    let Inputs {
        selected,
        visible,
        also,
        early,
        reads,
        part,
    } = how;
    let mut result = ScanResult {
        tallies: vec![SectorTally::default(); acks.len()],
        found_elsewhere: elsewhere::FoundElsewhere::new(),
        bytes_read: 0,
        unreadable: vec![],
        timed_out: None,
        read_through: Some((0, 0)),
    };
    let order: Vec<usize> = match selected {
        Some(sel) => sel.to_vec(),
        None => (0..acks.len()).collect(),
    };
    // A part with no records still reads its share of the span (what lies there may be
    // a record of the run written in the wrong place).
    if order.is_empty() && part.is_none() {
        return Ok(result);
    }
    let span = match &part {
        None => Span::new(dev.as_ref(), acks, &order, also),
        Some(p) => Span::of_part(dev.as_ref(), p),
    };
    if span.readable_end < span.end {
        result.unreadable.push((
            span.readable_end,
            span.end - span.readable_end,
            "beyond the end of the device".to_string(),
        ));
    }
    // What to read: the whole span, or only the records' blocks when they are sparse in
    // it (a few thousand records spread over a large drive: reading the span took two
    // minutes for 20,000 records over 200 GiB).
    let record_runs = match (reads, also) {
        (Reads::Records, None) => Some(sparse::record_runs(
            acks,
            &order,
            (span.start, span.readable_end),
            span.block,
        )),
        _ => None,
    };
    if part.is_some_and(|p| p.hung) {
        judge_unread(
            &span,
            run.into(),
            acks,
            order,
            visible,
            read_timeout,
            &mut result,
        );
        return Ok(result);
    }
    // The reads first, so they run while the judge is set up (a sort of the acks).
    let wanted = (span.start, span.readable_end, span.block);
    let (pipeline, runs) = match (early, record_runs) {
        (early, Some(runs)) => {
            drop(early);
            let runs = Arc::new(runs);
            let p = Pipeline::start_runs(dev, runs.clone(), span.block, pipeline::POOL)?;
            (p, runs)
        }
        (Some(e), None) if e.pipeline.reads == wanted => {
            (e.pipeline, Arc::new(vec![(span.start, span.readable_end)]))
        }
        (other, None) => {
            drop(other);
            let p = Pipeline::start(
                dev,
                span.start,
                span.readable_end,
                span.block,
                pipeline::POOL,
            )?;
            (p, Arc::new(vec![(span.start, span.readable_end)]))
        }
    };
    result.read_through = match runs.as_slice() {
        [] => Some((span.start, span.start)),
        [one] => Some(*one),
        _ => None,
    };
    let visible = visible.unwrap_or_else(|| visible_ranges(acks).into());
    let mut judge = Judge::new(run.into(), acks, order, visible);
    let total: u64 = runs.iter().map(|&(s, e)| e.saturating_sub(s)).sum::<u64>()
        + (span.end - span.readable_end);
    let (mut at, mut done) = (span.start, 0u64);
    for (c_off, c_len) in pipeline::chunks_of(&runs) {
        let Some(c) = pipeline.next(read_timeout) else {
            // A hung read: mark the rest unreadable and stop waiting. The reader thread
            // is abandoned (it exits with the process).
            result.timed_out = Some((c_off, span.readable_end - c_off));
            result.read_through = None;
            result.unreadable.push((
                c_off,
                span.readable_end - c_off,
                format!("read did not complete within {read_timeout:?}"),
            ));
            at = c_off;
            break;
        };
        debug_assert_eq!((c.offset, c.len as u64), (c_off, c_len));
        result.bytes_read += c_len;
        result.unreadable.extend(c.bad.iter().cloned());
        judge.note_found_elsewhere(&c, &mut result.found_elsewhere);
        judge.judge_range(Some(&c), c_off, c_off + c_len, &mut result.tallies);
        at = c_off + c_len;
        done += c_len;
        progress(done, total);
        pipeline.recycle(c);
    }
    // Past the device end or after a hung read: every remaining sector of every record
    // is unreadable.
    if at < span.end {
        judge.judge_range(None, at, span.end, &mut result.tallies);
        progress(total, total);
    }
    Ok(result)
}

/// The bytes to read: the records' span (and `also`), in whole device blocks, and how
/// much of it the device holds.
struct Span {
    block: u64,
    start: u64,
    end: u64,
    /// `end`, or the device's end if that comes first.
    readable_end: u64,
}

impl Span {
    /// `order`: the indexes of the acks to judge (not empty).
    fn new(dev: &dyn Device, acks: &[Ack], order: &[usize], also: Option<(u64, u64)>) -> Span {
        let records = (
            order.iter().map(|&i| acks[i].record.offset).min().unwrap(),
            order.iter().map(|&i| acks[i].record.end()).max().unwrap(),
        );
        let block = block_of(dev);
        let (start, end) = whole_span(dev, records, also);
        Span {
            block,
            start,
            end,
            readable_end: end.min(dev_end(dev, block)).max(start),
        }
    }

    /// The part's share of the whole run's span: [`Part::span`] within [`Part::owned`].
    fn of_part(dev: &dyn Device, p: &Part) -> Span {
        let block = block_of(dev);
        let start = p.span.0.max(p.owned.0);
        let end = p.span.1.min(p.owned.1).max(start);
        Span {
            block,
            start,
            end,
            readable_end: end.min(dev_end(dev, block)).max(start),
        }
    }
}

/// For each ack (same order), the byte ranges of its record that no later acknowledged
/// record covers, sorted. "Later" is (stream, seq) order: a stream's records are
/// acknowledged in seq order, and streams own disjoint shares of the region.
pub fn visible_ranges(acks: &[Ack]) -> Vec<Vec<(u64, u64)>> {
    let mut order: Vec<usize> = (0..acks.len()).collect();
    order.sort_by_key(|&i| (acks[i].record.stream, acks[i].record.seq));
    // Non-overlapping painted intervals: start -> (end, ack index). Later paint wins.
    let mut paint: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for i in order {
        let (s, e) = (acks[i].record.offset, acks[i].record.end());
        if s >= e {
            continue;
        }
        // An interval starting before `s` that reaches into [s, e): keep its head (and
        // its tail past `e`).
        if let Some((&ps, &(pe, pi))) = paint.range(..s).next_back()
            && pe > s
        {
            paint.insert(ps, (s, pi));
            if pe > e {
                paint.insert(e, (pe, pi));
            }
        }
        let inside: Vec<u64> = paint.range(s..e).map(|(&k, _)| k).collect();
        for k in inside {
            let (pe, pi) = paint.remove(&k).expect("key just listed");
            if pe > e {
                paint.insert(e, (pe, pi));
            }
        }
        paint.insert(s, (e, i));
    }
    let mut out = vec![Vec::new(); acks.len()];
    for (s, (e, i)) in paint {
        match out[i].last_mut() {
            Some((_, pe)) if *pe == s => *pe = e,
            _ => out[i].push((s, e)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
