//! A replay judged in parts of the region, so what it holds stays within `--memory`
//! however many acks the run has. Why parts work: a record's class depends only on its
//! own sectors and on the acks overlapping it, which `parts_plan` keeps in its part; so
//! each part replays the whole log (applying only the entries touching its bytes) and
//! judges only its acks, and the parts' judgements at each durable point add up to the
//! whole run's. The durable points are the same log entries in every part, in order.
//!
//! Per durable point the parts merge as: acks, failed and intact summed; FAIL if any
//! part says FAIL; INCONCLUSIVE if any part does for a reason other than having no acks
//! or nothing intact yet; else what verify decides from the sums (PASS with acks and an
//! intact record, else INCONCLUSIVE). A record found away from its home in another part
//! is named lost there rather than misdirected (both failures: counts and verdicts do
//! not move). Drop states and `--full-verify` judge whole states with a whole verify,
//! so they are never judged in parts (`budget`).

use super::budget::LogShape;
use super::format::{FormatError, LogReader};
use super::image::ScratchImage;
use super::parts_plan::{Histogram, PartsPlan};
use super::replay::{
    MAX_DISAGREEMENT_LINES, MainPass, PassError, PassOptions, Point, expected_for, losses_suffix,
    main_pass_with,
};
use crate::model::{Ack, RunDescriptor, RunLog, Verdict};
use crate::verify::VerifyError;
use crate::witness::validate::{AckRules, ImpossibleRun, SeqTracker, refuse_impossible_run};
use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

/// Streams the run's acks in order to the sink, once per call; returns the log without
/// its acks (its descriptor, file names).
pub type AckStream<'s> = dyn FnMut(&mut dyn FnMut(&[Ack])) -> Result<RunLog, VerifyError> + 's;

/// Why a replay in parts stopped.
#[derive(Debug)]
pub enum PartsError {
    Pass(PassError),
    Acks(VerifyError),
    /// A part's durable points are not the first part's: the log changed under the run.
    LogChanged {
        part: usize,
    },
}

impl From<PassError> for PartsError {
    fn from(e: PassError) -> PartsError {
        PartsError::Pass(e)
    }
}

impl From<VerifyError> for PartsError {
    fn from(e: VerifyError) -> PartsError {
        PartsError::Acks(e)
    }
}

/// One pass over the acks: their histogram over the region, with every ack checked as
/// `witness::validate::refuse_impossible_run` checks a loaded run (a file name's ack is
/// checked in one more pass, only for runs that name files).
pub fn survey(d: &RunDescriptor, stream: &mut AckStream) -> Result<Histogram, VerifyError> {
    let s = &d.settings;
    let mut h = Histogram::new(
        s.region_offset,
        s.region_offset.saturating_add(s.region_bytes),
    );
    let rules = AckRules::for_run(d).map_err(|f| ImpossibleRun {
        run: d.run_id,
        why: format!("its run descriptor cannot come from a plugpull writer: {f}"),
    })?;
    let mut seqs = SeqTracker::default();
    let (mut i, mut bad, mut first) = (0u64, 0u64, None);
    let log = stream(&mut |batch| {
        for a in batch {
            h.add(&a.record);
            if let Err(v) = seqs.check_batch(&rules, i, std::slice::from_ref(a)) {
                bad += 1;
                first.get_or_insert(v);
            }
            i += 1;
        }
    })?;
    if let Some(v) = first {
        return Err(ImpossibleRun {
            run: d.run_id,
            why: format!(
                "{bad} of its {i} acks cannot come from a plugpull writer; the first: {v}"
            ),
        }
        .into());
    }
    if !log.files.is_empty() {
        let mut named = RunLog {
            files: Default::default(),
            descriptor: log.descriptor.clone(),
            acks: vec![],
            events: vec![],
        };
        let mut at = 0usize;
        stream(&mut |batch| {
            for a in batch {
                if let Some(n) = log.files.get(&at) {
                    named.files.insert(named.acks.len(), n.clone());
                    named.acks.push(*a);
                }
                at += 1;
            }
        })?;
        refuse_impossible_run(&named)?;
    }
    Ok(h)
}

/// The log's durable points and the most writes between two, from one pass over it.
pub fn shape<R: Read>(reader: LogReader<R>) -> Result<LogShape, FormatError> {
    let mut shape = LogShape::default();
    let mut pending = 0u64;
    for e in reader {
        let e = e?;
        if e.is_write() || e.is_discard() {
            pending += 1;
            shape.pending_writes_at_most = shape.pending_writes_at_most.max(pending);
        }
        if e.is_durable_point() {
            shape.durable_points += 1;
            pending = 0;
        }
    }
    Ok(shape)
}

/// The merged judgement of every part.
pub struct Judged {
    /// The points, counts and notes as a whole pass gives them (its `acks` empty).
    pub pass: MainPass,
    /// Acks the log made durable, over all parts.
    pub acks_durable: usize,
}

/// Judges the log in the parts of `plan`. `open` gives a fresh reader of the log from
/// its start, `points` is how many durable points it has (the merged points are
/// reserved once, 24 bytes each).
#[allow(clippy::too_many_arguments)]
pub fn judge_in_parts<R: Read>(
    open: &dyn Fn() -> Result<LogReader<R>, FormatError>,
    image: &ScratchImage,
    descriptor: &RunDescriptor,
    stream: &mut AckStream,
    plan: &PartsPlan,
    points: u64,
    read_timeout: Duration,
) -> Result<Judged, PartsError> {
    let mut merged: Vec<Point> = Vec::with_capacity(points.min(1 << 32) as usize);
    // Per point, the losses the first failing part named: the first points only.
    let mut losses: BTreeMap<usize, String> = BTreeMap::new();
    let mut whole: Option<MainPass> = None;
    let (mut acks_durable, mut never_durable, mut unacked) = (0usize, 0usize, 0u64);
    let mut first_never: Option<(u64, Ack)> = None;
    let (mut judge_ms, mut bytes_read) = (0.0, 0u64);
    for p in 0..plan.len() {
        let (start, end) = plan.range(p);
        let mut acks: Vec<Ack> = Vec::with_capacity(plan.acks[p] as usize);
        let mut witness_index: Vec<u64> = Vec::with_capacity(plan.acks[p] as usize);
        let mut g = 0u64;
        stream(&mut |batch| {
            for a in batch {
                if (start..end).contains(&a.record.offset) {
                    acks.push(*a);
                    witness_index.push(g);
                }
                g += 1;
            }
        })?;
        if p > 0 {
            image.reset().map_err(PassError::Image)?;
        }
        let o = PassOptions {
            full_verify: false,
            for_drops: false,
            read_timeout,
            part: Some((start, end)),
        };
        let (mut changed, mut seen) = (false, 0usize);
        let mut sink = |k: usize, point: &Point, report: &crate::verify::report::Report| {
            seen += 1;
            let state = part_state(point);
            if p == 0 {
                merged.push(Point {
                    verdict: state,
                    ..point.clone()
                });
            } else if let Some(m) = merged.get_mut(k).filter(|m| m.entry == point.entry) {
                m.acks += point.acks;
                m.failed += point.failed;
                m.intact += point.intact;
                m.verdict = worse(m.verdict, state);
            } else {
                changed = true;
            }
            if state != Verdict::Pass {
                let fits = losses.len() < MAX_DISAGREEMENT_LINES
                    || losses.last_key_value().is_some_and(|(&last, _)| k < last);
                if fits && !losses.contains_key(&k) {
                    losses.insert(k, losses_suffix(report));
                    if losses.len() > MAX_DISAGREEMENT_LINES {
                        losses.pop_last();
                    }
                }
            }
        };
        let pass = main_pass_with(
            open().map_err(PassError::Format)?,
            image,
            descriptor,
            &acks,
            o,
            &mut sink,
        )?;
        let entries_before = whole.as_ref().map_or(pass.entries, |w| w.entries);
        if changed || seen != merged.len() || pass.entries != entries_before {
            return Err(PartsError::LogChanged { part: p });
        }
        acks_durable += pass.acks.len();
        never_durable += pass.never_durable;
        if let Some(a) = pass.first_never_durable {
            let i = acks
                .iter()
                .position(|x| *x == a)
                .expect("an ack of the part");
            if first_never.is_none_or(|(w, _)| witness_index[i] < w) {
                first_never = Some((witness_index[i], a));
            }
        }
        unacked += pass.unacked_sectors;
        judge_ms += pass.judge_ms;
        bytes_read += pass.bytes_read;
        if whole.is_none() {
            whole = Some(MainPass {
                acks: vec![],
                ..pass
            });
        }
    }
    let mut pass = whole.expect("a plan has one part at least");
    let mut lines = vec![];
    for (k, m) in merged.iter_mut().enumerate() {
        m.verdict = decided(m);
        m.expected = expected_for(m.acks);
        if m.verdict != m.expected && lines.len() < MAX_DISAGREEMENT_LINES {
            lines.push(format!(
                "durable point {k} (log entry {}, {} acks): expected {}, verify says {}: {} of the acknowledged records failed, {} intact (judged in {} parts){}",
                m.entry,
                m.acks,
                m.expected.name(),
                m.verdict.name(),
                m.failed,
                m.intact,
                plan.len(),
                losses.get(&k).map_or("", String::as_str)
            ));
        }
    }
    pass.points = merged;
    pass.disagreements = lines;
    pass.never_durable = never_durable;
    pass.first_never_durable = first_never.map(|(_, a)| a);
    pass.unacked_sectors = unacked;
    pass.judge_ms = judge_ms;
    pass.bytes_read = bytes_read;
    Ok(Judged { pass, acks_durable })
}

/// What a part's verdict at a point says for the merge: FAIL; INCONCLUSIVE for a reason
/// the sums cannot show (not no acks, not nothing intact); else PASS (the sums decide).
fn part_state(p: &Point) -> Verdict {
    match p.verdict {
        Verdict::Fail => Verdict::Fail,
        Verdict::Pass => Verdict::Pass,
        _ if p.acks > 0 && p.intact > 0 => p.verdict,
        _ => Verdict::Pass,
    }
}

fn worse(a: Verdict, b: Verdict) -> Verdict {
    let rank = |v: Verdict| match v {
        Verdict::Fail => 2,
        Verdict::Pass => 0,
        _ => 1,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// The merged point's verdict, as verify decides from the summed counts.
fn decided(m: &Point) -> Verdict {
    match m.verdict {
        Verdict::Pass if m.acks == 0 || m.intact == 0 => Verdict::Inconclusive,
        v => v,
    }
}
