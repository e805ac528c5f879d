//! The summary of a replay (the JSON of `plugpull replay --json`) and its text: the
//! durable points' and drop states' verdicts against their expectations, the notes.

use super::drops::{self, DropState};
use super::replay;
use crate::model::Verdict;
use crate::record::RunId;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

pub const REPLAY_FORMAT: &str = "plugpull-replay/1";

/// What a replay found (the JSON of `plugpull replay --json`).
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySummary {
    pub format: &'static str,
    pub log: String,
    #[serde(with = "crate::model::run_id_hex")]
    pub run: RunId,
    pub sector_bytes: u32,
    pub entries: u64,
    pub flushes: u64,
    pub fua_writes: u64,
    pub discards: u64,
    /// The names of the first [`replay::MAX_MARKS`] marks (a note counts them all).
    pub marks: Vec<String>,
    /// The run's acks at the witness.
    pub acks: usize,
    /// Of those, the ones the log made durable (the rest were never judged).
    pub acks_durable_in_log: usize,
    /// Sectors of the run the log wrote that belong to no ack (unacked writes).
    pub unacked_sectors: u64,
    pub durable_points: usize,
    pub durable_points_as_expected: usize,
    /// Durable points by verdict ("PASS", "INCONCLUSIVE" before the first ack, ...).
    pub point_verdicts: BTreeMap<&'static str, usize>,
    pub drop_states: usize,
    pub drop_states_as_expected: usize,
    /// Drop states by expected verdict.
    pub drop_expected: BTreeMap<&'static str, usize>,
    pub drops: Vec<DropState>,
    pub seed: u64,
    /// One line per verdict that disagrees with its expectation (past
    /// [`replay::MAX_DISAGREEMENT_LINES`] durable points, one line counting the rest).
    pub disagreement_lines: Vec<String>,
    pub disagreements: usize,
    pub replay_ms: f64,
    /// Judging the durable points: milliseconds per point and bytes read.
    pub judge_ms_per_point: f64,
    pub judge_bytes_read: u64,
    /// Warnings (acks the log never made durable, ...).
    pub notes: Vec<String>,
    /// Parts of the region the run was judged in: 1 when judged whole (`parts`).
    pub parts: usize,
}

impl ReplaySummary {
    /// The summary line: `replayed 412 durable points (412 PASS as expected), 20 drop
    /// states (10 FAIL, 10 PASS as expected): 0 disagreements`; with disagreements the
    /// parentheses say how many were as expected.
    pub fn line(&self) -> String {
        let drop_verdicts: BTreeMap<&'static str, usize> =
            self.drops.iter().fold(BTreeMap::new(), |mut m, d| {
                *m.entry(d.verdict.name()).or_insert(0) += 1;
                m
            });
        format!(
            "replayed {} durable points ({}), {} drop states ({}): {} disagreements",
            self.durable_points,
            tally(
                &self.point_verdicts,
                self.durable_points_as_expected,
                self.durable_points
            ),
            self.drop_states,
            tally(
                &drop_verdicts,
                self.drop_states_as_expected,
                self.drop_states
            ),
            self.disagreements
        )
    }

    /// The text output: notes, disagreements, then the summary line.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for d in &self.disagreement_lines {
            out.push_str(&format!("DISAGREEMENT: {d}\n"));
        }
        if self.drop_states > 0 {
            out.push_str(&format!("drop states chosen with --seed {}\n", self.seed));
        }
        out.push_str(&self.line());
        out.push('\n');
        out
    }
}

/// "2 FAIL, 3 PASS as expected", or "2 FAIL, 3 PASS; 3 as expected" when some were not.
fn tally(verdicts: &BTreeMap<&'static str, usize>, as_expected: usize, total: usize) -> String {
    if total == 0 {
        return "none".into();
    }
    let list: Vec<String> = verdicts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    if as_expected == total {
        format!("{} as expected", list.join(", "))
    } else {
        format!("{}; {as_expected} as expected", list.join(", "))
    }
}

/// What the summary says of the run besides the pass.
pub struct Counts {
    /// The log, as named on the command line.
    pub log: String,
    pub seed: u64,
    /// Drop states asked for, and the `--memory` the run was given.
    pub drops_asked: u32,
    pub memory_bytes: u64,
    pub run: RunId,
    /// The run's acks at the witness, and those the log made durable.
    pub acks: usize,
    pub acks_durable: usize,
    pub sector_bytes: u32,
    /// Parts of the region it was judged in (1: whole).
    pub parts: usize,
}

pub fn summarise(
    c: Counts,
    mut pass: replay::MainPass,
    states: Vec<DropState>,
    t0: Instant,
) -> ReplaySummary {
    let mut point_verdicts = BTreeMap::new();
    for p in &pass.points {
        *point_verdicts.entry(p.verdict.name()).or_insert(0) += 1;
    }
    let mut drop_expected = BTreeMap::new();
    for d in &states {
        *drop_expected.entry(d.expected.name()).or_insert(0) += 1;
    }
    let as_expected = pass
        .points
        .iter()
        .filter(|p| p.verdict == p.expected)
        .count();
    let points_disagreeing = pass.points.len() - as_expected;
    let mut lines = std::mem::take(&mut pass.disagreements);
    if points_disagreeing > lines.len() {
        lines.push(format!(
            "{} more durable points disagree, not listed (the first {} are)",
            crate::units::thousands((points_disagreeing - lines.len()) as u64),
            lines.len()
        ));
    }
    let drops_disagreeing = states.iter().filter(|d| !d.agrees).count();
    for d in states.iter().filter(|d| !d.agrees) {
        lines.push(format!(
            "drop state ({}) at log entry {} without entries {:?} ({} acks): expected {}{}, verify says {}{}",
            match d.kind {
                drops::DropKind::Acked => "an acked write left out",
                drops::DropKind::Unacked => "unacked writes left out",
            },
            d.judged_at_entry,
            d.dropped_entries,
            d.acks,
            d.expected.name(),
            if d.expected_lost.is_empty() {
                String::new()
            } else {
                format!(" naming {}", d.expected_lost.join(", "))
            },
            d.verdict.name(),
            if d.found.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.found.join("; "))
            }
        ));
    }
    let mut notes = vec![];
    if let Some(first) = pass.first_never_durable.map(|a| a.record) {
        notes.push(format!(
            "{} of the run's {} acks have no durable write in the log (first: stream {} seq {}); they were never judged: was the run written through the log-writes target from its start?",
            pass.never_durable,
            c.acks,
            first.stream,
            first.seq
        ));
    }
    if pass.marks_total > pass.marks.len() as u64 {
        notes.push(format!(
            "the log has {} marks; the first {} are listed",
            crate::units::thousands(pass.marks_total),
            pass.marks.len()
        ));
    }
    if pass.uncounted_entries {
        notes.push(format!(
            "more entries follow the {} the log's super block counts; they were not replayed: the kernel writes the final count at `dmsetup remove` (and at FUA writes and marks), so remove the target before reading its log",
            pass.entries
        ));
    }
    if c.drops_asked > 0 && states.len() < c.drops_asked as usize {
        notes.push(format!(
            "{} of {} drop states found candidates (an acked drop needs a durable write of an acked record; an unacked drop a write after the last durable point)",
            states.len(),
            c.drops_asked
        ));
    }
    if c.parts > 1 {
        notes.push(format!(
            "judged in {} parts of the region (--memory {}): the run does not fit whole",
            c.parts,
            crate::units::fmt_bytes(c.memory_bytes)
        ));
    }
    let disagreements = points_disagreeing + drops_disagreeing;
    ReplaySummary {
        format: REPLAY_FORMAT,
        log: c.log.clone(),
        run: c.run,
        sector_bytes: c.sector_bytes,
        entries: pass.entries,
        flushes: pass.flushes,
        fua_writes: pass.fua_writes,
        discards: pass.discards,
        marks: pass.marks,
        acks: c.acks,
        acks_durable_in_log: c.acks_durable,
        unacked_sectors: pass.unacked_sectors,
        durable_points: pass.points.len(),
        durable_points_as_expected: as_expected,
        point_verdicts,
        drop_states: states.len(),
        drop_states_as_expected: states.iter().filter(|d| d.agrees).count(),
        drop_expected,
        drops: states,
        seed: c.seed,
        disagreement_lines: lines,
        disagreements,
        replay_ms: t0.elapsed().as_secs_f64() * 1e3,
        judge_ms_per_point: if pass.points.is_empty() {
            0.0
        } else {
            pass.judge_ms / pass.points.len() as f64
        },
        judge_bytes_read: pass.bytes_read,
        notes,
        parts: c.parts,
    }
}

/// The exit verdict of a summary: PASS with no disagreement, else FAIL.
pub fn outcome(s: &ReplaySummary) -> Verdict {
    if s.disagreements == 0 {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}
