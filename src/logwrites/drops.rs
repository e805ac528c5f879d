//! Drop states: replayed states with chosen writes left out, to show the judge can fail.
//! Why two kinds: leaving out a write that an ack depends on (durable before the judged
//! point) is what a lying drive does, and verify must say FAIL naming the record; leaving
//! out only writes after the last durable point is what an honest drive may do at a
//! power cut, and verify must still say PASS. The expectation is computed from the log
//! alone (which ack's sectors the left-out write held and no later write replaced),
//! never from verify.

use super::format::{Entry, FormatError, LogReader};
use super::image::ScratchImage;
use super::replay::{MainPass, PassError, expected_for, named_losses};
use crate::model::{Ack, RunLog, Verdict};
use crate::rng::Rng;
use crate::verify::verify_device_or_no_reads;
use serde::Serialize;
use std::collections::HashSet;
use std::io::Read;
use std::time::Duration;

/// Which kind of drop state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum DropKind {
    /// A write durable before the judged point left out: an acked record lost.
    #[serde(rename = "acked")]
    Acked,
    /// Only writes after the last durable point left out: nothing acked lost.
    #[serde(rename = "unacked")]
    Unacked,
}

/// One planned drop state.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: DropKind,
    /// The last log entry replayed.
    pub judged_at_entry: u64,
    /// Log entries left out.
    pub dropped: Vec<u64>,
    /// How many of the main pass's acks (in ackable order) are judged.
    pub acks: u32,
    pub expected: Verdict,
    /// The records whose loss the drop must show: (stream, seq).
    pub expected_lost: Vec<(u16, u64)>,
}

/// One judged drop state (the JSON of `plugpull replay --json`, `drops`).
#[derive(Clone, Debug, Serialize)]
pub struct DropState {
    pub kind: DropKind,
    pub judged_at_entry: u64,
    pub dropped_entries: Vec<u64>,
    pub acks: u32,
    pub expected: Verdict,
    pub verdict: Verdict,
    /// "stream S seq N" of each record the drop must show lost.
    pub expected_lost: Vec<String>,
    /// What verify named: "CLASS stream S seq N at byte B" (the first ten).
    pub found: Vec<String>,
    pub agrees: bool,
}

/// `n` drop states (half of each kind, the odd one an acked drop), chosen with `seed`.
/// Fewer when the log offers no candidates (no acks yet, or no write left unflushed).
pub fn plan(pass: &MainPass, witness_acks: &[Ack], n: u32, seed: u64) -> Vec<Plan> {
    let mut rng = Rng::new(seed);
    let n_unacked = n / 2;
    let n_acked = n - n_unacked;
    let mut out = vec![];
    let mut seen = HashSet::new();
    for _ in 0..n_acked * 64 {
        if out.len() as u32 >= n_acked {
            break;
        }
        if let Some(p) = plan_acked(pass, witness_acks, &mut rng)
            && seen.insert((p.judged_at_entry, p.dropped.clone()))
        {
            out.push(p);
        }
    }
    let acked_found = out.len() as u32;
    for _ in 0..n_unacked * 64 {
        if out.len() as u32 >= acked_found + n_unacked {
            break;
        }
        if let Some(p) = plan_unacked(pass, &mut rng)
            && seen.insert((p.judged_at_entry, p.dropped.clone()))
        {
            out.push(p);
        }
    }
    out
}

fn pick<T: Copy>(rng: &mut Rng, v: &[T]) -> Option<T> {
    (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize])
}

/// A durable point with acks, and a write durable by it that holds sectors of an ack
/// ackable there which no later write (up to the point) replaced.
fn plan_acked(pass: &MainPass, witness_acks: &[Ack], rng: &mut Rng) -> Option<Plan> {
    let with_acks: Vec<usize> = (0..pass.points.len())
        .filter(|&p| pass.points[p].acks > 0)
        .collect();
    let p = pick(rng, &with_acks)?;
    let at = pass.points[p].entry;
    let ackable = |i: usize| pass.ackable_at[i].is_some_and(|q| q as usize <= p);
    let candidates: Vec<usize> = (0..pass.writes.len())
        .filter(|&w| {
            let wi = &pass.writes[w];
            !wi.discard
                && wi.entry <= at
                && wi.durable_at.is_some_and(|q| q <= p)
                && wi.acks.iter().any(|&i| ackable(i))
        })
        .collect();
    let w = pick(rng, &candidates)?;
    let wi = &pass.writes[w];
    let later: Vec<(u64, u64)> = pass.writes[w + 1..]
        .iter()
        .take_while(|x| x.entry <= at)
        .map(|x| (x.offset, x.offset + x.len))
        .collect();
    let mut lost: Vec<(u16, u64)> = vec![];
    for &i in &wi.acks {
        let r = witness_acks[i].record;
        let held = (r.offset.max(wi.offset), r.end().min(wi.offset + wi.len));
        if ackable(i) && !subtract(vec![held], &later).is_empty() {
            lost.push((r.stream, r.seq));
        }
    }
    lost.dedup();
    (!lost.is_empty()).then(|| Plan {
        kind: DropKind::Acked,
        judged_at_entry: at,
        dropped: vec![wi.entry],
        acks: pass.points[p].acks,
        expected: Verdict::Fail,
        expected_lost: lost,
    })
}

/// The parts of `ranges` no range of `minus` covers.
fn subtract(mut ranges: Vec<(u64, u64)>, minus: &[(u64, u64)]) -> Vec<(u64, u64)> {
    for &(ms, me) in minus {
        let mut next = vec![];
        for (s, e) in ranges {
            if me <= s || ms >= e {
                next.push((s, e));
                continue;
            }
            if s < ms {
                next.push((s, ms));
            }
            if me < e {
                next.push((me, e));
            }
        }
        ranges = next;
    }
    ranges
}

/// A stretch of writes after a durable point (or the log's start) and before the next
/// one: a point in it, with one to three of its writes up to there left out.
fn plan_unacked(pass: &MainPass, rng: &mut Rng) -> Option<Plan> {
    // gap g: after point g-1 (g == 0: the log's start) and before point g.
    let bounds = |g: usize| {
        let lo = if g == 0 {
            None
        } else {
            Some(pass.points[g - 1].entry)
        };
        let hi = pass.points.get(g).map(|p| p.entry);
        (lo, hi)
    };
    let in_gap = |g: usize| -> Vec<u64> {
        let (lo, hi) = bounds(g);
        pass.writes
            .iter()
            .filter(|w| {
                !w.discard && lo.is_none_or(|l| w.entry > l) && hi.is_none_or(|h| w.entry < h)
            })
            .map(|w| w.entry)
            .collect()
    };
    let acks_of = |g: usize| if g == 0 { 0 } else { pass.points[g - 1].acks };
    let gaps: Vec<usize> = (0..=pass.points.len()).collect();
    let prefer: Vec<usize> = gaps.iter().copied().filter(|&g| acks_of(g) > 0).collect();
    let g = pick(rng, if prefer.is_empty() { &gaps } else { &prefer })?;
    let writes = in_gap(g);
    let q = pick(rng, &writes)?;
    let upto: Vec<u64> = writes.into_iter().filter(|&e| e <= q).collect();
    let k = 1 + rng.below(upto.len().min(3) as u64) as usize;
    let mut dropped: Vec<u64> = vec![];
    while dropped.len() < k {
        let e = pick(rng, &upto)?;
        if !dropped.contains(&e) {
            dropped.push(e);
        }
    }
    dropped.sort_unstable();
    Some(Plan {
        kind: DropKind::Unacked,
        judged_at_entry: q,
        dropped,
        acks: acks_of(g),
        expected: expected_for(acks_of(g)),
        expected_lost: vec![],
    })
}

/// Replays the log up to the plan's entry, leaving out its writes, and judges the image
/// with a whole verify. `open` gives a fresh reader of the log from its start.
pub fn run_plan<R: Read>(
    plan: &Plan,
    open: &dyn Fn() -> Result<LogReader<R>, FormatError>,
    image: &ScratchImage,
    pass: &MainPass,
    log: &RunLog,
    read_timeout: Duration,
) -> Result<DropState, PassError> {
    image.reset().map_err(PassError::Image)?;
    for e in open().map_err(PassError::Format)? {
        let e: Entry = e.map_err(PassError::Format)?;
        if e.index > plan.judged_at_entry {
            break;
        }
        if plan.dropped.binary_search(&e.index).is_err() {
            image.apply(&e).map_err(PassError::Image)?;
        }
    }
    let judged = RunLog {
        files: Default::default(),
        descriptor: log.descriptor.clone(),
        acks: super::judge::in_writer_order(pass.acks[..plan.acks as usize].to_vec()),
        events: vec![],
    };
    let report = verify_device_or_no_reads(image.device(), &judged, read_timeout)
        .map_err(PassError::ReadBuffers)?;
    let named: HashSet<(u16, u64)> = report.findings.iter().map(|f| (f.stream, f.seq)).collect();
    let all_named =
        report.findings_truncated || plan.expected_lost.iter().all(|k| named.contains(k));
    let agrees = report.verdict == plan.expected && (plan.expected != Verdict::Fail || all_named);
    Ok(DropState {
        kind: plan.kind,
        judged_at_entry: plan.judged_at_entry,
        dropped_entries: plan.dropped.clone(),
        acks: plan.acks,
        expected: plan.expected,
        verdict: report.verdict,
        expected_lost: plan
            .expected_lost
            .iter()
            .map(|(s, q)| format!("stream {s} seq {q}"))
            .collect(),
        found: named_losses(&report, 10),
        agrees,
    })
}

#[cfg(test)]
mod tests {
    use super::subtract;

    #[test]
    fn subtract_keeps_what_no_range_covers() {
        assert_eq!(
            subtract(vec![(0, 100)], &[(10, 20), (50, 200)]),
            vec![(0, 10), (20, 50)]
        );
        assert_eq!(subtract(vec![(0, 100)], &[(0, 100)]), vec![]);
        assert_eq!(subtract(vec![(0, 100)], &[(100, 200)]), vec![(0, 100)]);
    }
}
