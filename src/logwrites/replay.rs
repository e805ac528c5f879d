//! The main pass: every entry of the log applied to the scratch image in order, and the
//! image judged at every durable point against the acks the writer could have received
//! by then (`track`). Why one image, incrementally: a state is the previous one plus one
//! entry, so replaying each from the start would cost the log's length per state.

use super::format::{Entry, FormatError, LogReader};
use super::image::ScratchImage;
use super::judge::PointJudge;
use super::track::{Tracker, WriteInfo};
use crate::model::{Ack, RecordClass, RunDescriptor, Verdict};
use crate::verify::report::Report;
use std::io::Read;
use std::time::{Duration, Instant};

/// One judged durable point.
#[derive(Clone, Debug)]
pub struct Point {
    /// The log entry (a flush or a FUA write) after which the state was judged.
    pub entry: u64,
    /// How many acks were judged: the first `acks` of [`MainPass::acks`].
    pub acks: u32,
    pub expected: Verdict,
    pub verdict: Verdict,
    /// Acked records in a failure class, and intact ones (what the tests compare
    /// between the incremental and the whole judge).
    pub failed: u32,
    pub intact: u32,
}

/// What the main pass found, and what the drop states need from it.
pub struct MainPass {
    pub points: Vec<Point>,
    /// Acks in the order they became ackable.
    pub acks: Vec<Ack>,
    /// Per witness ack: the durable point from which it is ackable (kept, like
    /// `writes`, only for drop states; else empty).
    pub ackable_at: Vec<Option<u32>>,
    pub writes: Vec<WriteInfo>,
    pub entries: u64,
    pub flushes: u64,
    pub fua_writes: u64,
    pub discards: u64,
    /// The names of the log's first [`MAX_MARKS`] marks, and how many marks it has.
    pub marks: Vec<String>,
    pub marks_total: u64,
    /// How many acks of the run the log never made durable, and the first of them.
    pub never_durable: usize,
    pub first_never_durable: Option<Ack>,
    /// Sectors of the run in the log that belong to no ack.
    pub unacked_sectors: u64,
    /// One line per durable point whose verdict disagrees with the expectation, the
    /// first [`MAX_DISAGREEMENT_LINES`] of them (the points say how many in all).
    pub disagreements: Vec<String>,
    pub judge_ms: f64,
    pub bytes_read: u64,
    /// More entries follow the ones the super block counts (see
    /// `LogReader::entry_follows`).
    pub uncounted_entries: bool,
}

/// Durable points whose disagreement is described in a line. Why a bound: once a
/// record is lost every later point disagrees, and a line (some 200 bytes) per point of
/// a log with a flush per record would outgrow the `--memory` the run was checked
/// against (24 bytes a point); the count of them stays exact.
pub const MAX_DISAGREEMENT_LINES: usize = 1000;

/// Marks whose names are kept. Why a bound: a mark's name takes up to its entry's
/// sector (4 KiB with 4096-byte blocks) where the memory check reckons 24 bytes an entry.
pub const MAX_MARKS: usize = 1000;

/// The verdict an honest replay must get for `acks` acknowledged records: PASS, or
/// INCONCLUSIVE while the writer can have received no ack yet.
pub fn expected_for(acks: u32) -> Verdict {
    if acks == 0 {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    }
}

/// "stream S seq N at byte B" for each failing record of a report (the first few).
pub fn named_losses(r: &Report, max: usize) -> Vec<String> {
    r.findings
        .iter()
        .take(max)
        .map(|f| {
            format!(
                "{} stream {} seq {} at byte {}",
                f.class.name(),
                f.stream,
                f.seq,
                f.offset
            )
        })
        .collect()
}

/// Why the main pass stopped.
#[derive(Debug)]
pub enum PassError {
    Format(FormatError),
    Image(std::io::Error),
    /// The scan's read buffers could not be had.
    ReadBuffers(std::io::Error),
}

/// What the main pass is asked to do besides judging every durable point.
#[derive(Clone, Copy, Debug)]
pub struct PassOptions {
    /// Judge each point with a whole verify (the reference).
    pub full_verify: bool,
    /// Keep what drop states are planned from (`MainPass::writes`, `ackable_at`).
    pub for_drops: bool,
    pub read_timeout: Duration,
    /// Judged in parts (`parts`): the byte range [start, end) of this part. Only entries
    /// touching it are applied, and only stamps at homes in it count as unacked, so each
    /// sector is counted by one part.
    pub part: Option<(u64, u64)>,
}

/// One judged durable point as a part gives it to [`main_pass_with`]'s caller: its
/// index, the point, and the report it came from (for the losses it names).
pub type PointSink<'s> = dyn FnMut(usize, &Point, &Report) + 's;

/// Replays every entry of `reader` into `image`, judging each durable point.
pub fn main_pass<R: Read>(
    reader: LogReader<R>,
    image: &ScratchImage,
    descriptor: &RunDescriptor,
    witness_acks: &[Ack],
    o: PassOptions,
) -> Result<MainPass, PassError> {
    let mut points = vec![];
    let mut lines = vec![];
    let mut pass = main_pass_with(
        reader,
        image,
        descriptor,
        witness_acks,
        o,
        &mut |k, point, report| {
            if point.verdict != point.expected && lines.len() < MAX_DISAGREEMENT_LINES {
                lines.push(format!(
                    "durable point {k} (log entry {}, {} acks): expected {}, verify says {}: {}{}",
                    point.entry,
                    point.acks,
                    point.expected.name(),
                    point.verdict.name(),
                    report.summary,
                    losses_suffix(report)
                ));
            }
            points.push(point.clone());
        },
    )?;
    pass.points = points;
    pass.disagreements = lines;
    Ok(pass)
}

/// [`main_pass`] handing each judged point to `sink` instead of keeping it: the
/// returned pass has no points and no disagreement lines.
pub fn main_pass_with<R: Read>(
    mut reader: LogReader<R>,
    image: &ScratchImage,
    descriptor: &RunDescriptor,
    witness_acks: &[Ack],
    o: PassOptions,
    sink: &mut PointSink,
) -> Result<MainPass, PassError> {
    let dev = image.device();
    let mut tracker = Tracker::new(descriptor.run_id, witness_acks, o.for_drops);
    tracker.part = o.part;
    let mut judge = PointJudge::new(
        descriptor.clone(),
        witness_acks,
        o.full_verify,
        o.read_timeout,
    );
    let mut pass = MainPass {
        points: vec![],
        acks: vec![],
        ackable_at: if o.for_drops {
            vec![None; witness_acks.len()]
        } else {
            vec![]
        },
        writes: vec![],
        entries: 0,
        flushes: 0,
        fua_writes: 0,
        discards: 0,
        marks: vec![],
        marks_total: 0,
        never_durable: 0,
        first_never_durable: None,
        unacked_sectors: 0,
        disagreements: vec![],
        judge_ms: 0.0,
        bytes_read: 0,
        uncounted_entries: false,
    };
    let mut points = 0usize;
    for e in reader.by_ref() {
        let e: Entry = e.map_err(PassError::Format)?;
        pass.entries += 1;
        count(&mut pass, &e);
        tracker.note(&e, points);
        let touches = o
            .part
            .is_none_or(|(s, end)| e.offset < end && e.offset.saturating_add(e.len) > s);
        if touches {
            image.apply(&e).map_err(PassError::Image)?;
        } else {
            image.check_bounds(&e).map_err(PassError::Image)?;
        }
        if touches && (e.is_write() || e.is_discard()) {
            judge.note_dirty(e.offset, e.len);
        }
        if !e.is_durable_point() {
            continue;
        }
        let ready = tracker.take_ackable();
        if o.for_drops {
            for &i in &ready {
                pass.ackable_at[i] = Some(points as u32);
            }
        }
        judge.add(ready);
        let t0 = Instant::now();
        let report = judge.judge(&dev).map_err(PassError::ReadBuffers)?;
        pass.judge_ms += t0.elapsed().as_secs_f64() * 1e3;
        // The judged acks fit in u32 (`PointJudge::new`), so do their counts.
        let judged = judge.acks.len() as u32;
        let point = Point {
            entry: e.index,
            acks: judged,
            expected: expected_for(judged),
            verdict: report.verdict,
            failed: RecordClass::ALL
                .iter()
                .filter(|c| c.is_failure())
                .map(|c| report.counts.get(c.name()).copied().unwrap_or(0))
                .sum::<u64>() as u32,
            intact: report
                .counts
                .get(RecordClass::Intact.name())
                .copied()
                .unwrap_or(0) as u32,
        };
        sink(points, &point, &report);
        points += 1;
    }
    let (never, first) = tracker.never_ackable();
    pass.never_durable = never;
    pass.first_never_durable = first.map(|i| witness_acks[i]);
    pass.unacked_sectors = tracker.unacked_sectors;
    pass.uncounted_entries = reader.entry_follows();
    pass.writes = tracker.writes.take().unwrap_or_default();
    pass.bytes_read = judge.bytes_read;
    pass.acks = judge.acks;
    Ok(pass)
}

fn count(pass: &mut MainPass, e: &Entry) {
    if e.is_flush() {
        pass.flushes += 1;
    }
    if e.is_fua() && e.is_write() {
        pass.fua_writes += 1;
    }
    if e.is_discard() {
        pass.discards += 1;
    }
    if let Some(m) = &e.mark {
        pass.marks_total += 1;
        if pass.marks.len() < MAX_MARKS {
            pass.marks.push(m.clone());
        }
    }
}

/// " (lost: ...)" naming the first failing records of a report, or nothing.
pub fn losses_suffix(r: &Report) -> String {
    let named = named_losses(r, 3);
    if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join("; "))
    }
}
