//! The fleet: which of these drives keeps its flushes? The same power cuts given to
//! several drives, and one matrix that compares them (docs/fleet.md).
//!
//! Why a matrix and not one report per drive: the question plugpull exists for is a
//! comparison (a consumer SSD against one with a capacitor bank, this batch against the
//! one we trust). Per drive: how many cuts it was given and how each was judged, what
//! the failing cuts lost, and how high its failure rate can be at 95% confidence; between
//! drives, Fisher's exact test on failing against clean cuts (`crate::stats`); and a flag on a
//! drive that claims power-loss protection and lost acknowledged writes.
//!
//! `demo` runs three simulated drives in this process; `text` renders the matrix.

pub mod demo;
pub mod text;

use crate::model::Verdict;
use crate::verify::report::Report;
use serde::{Deserialize, Serialize};

pub const FLEET_FORMAT: &str = "plugpull-fleet/1";

/// One drive of the fleet, as people name it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriveSpec {
    /// The name people use ("candidate A").
    pub name: String,
    /// Model and firmware, as identified (or as the simulated drive says).
    pub model: String,
    /// The drive is sold with power-loss protection.
    pub claims_plp: bool,
    /// Its write cache as the kernel reports it (`write back`, `write through`), and
    /// whether the kernel may use FUA writes: as identified, null when unknown.
    #[serde(default)]
    pub write_cache: Option<String>,
    #[serde(default)]
    pub fua: Option<bool>,
}

/// How one cut was judged on one drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING-KEBAB-CASE")]
pub enum CutOutcome {
    Pass,
    Fail,
    Inconclusive,
    /// The drive could not be read after the cut (gone, or every read failed).
    Dead,
}

/// One drive's result for one cut.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CutResult {
    pub outcome: CutOutcome,
    /// Acknowledged records the cut took (lost, stale, shorn, corrupt, misdirected,
    /// unreadable).
    pub acked_lost: u64,
    pub acked: u64,
    /// From the earliest failing record's ack to the run's last ack.
    pub loss_window_ms: Option<f64>,
    /// The rise of the drive's unsafe-shutdown counter across the cut (1 for a cut the
    /// drive was not told of), where it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsafe_shutdowns_delta: Option<i64>,
}

impl CutOutcome {
    pub fn name(self) -> &'static str {
        match self {
            CutOutcome::Pass => "PASS",
            CutOutcome::Fail => "FAIL",
            CutOutcome::Inconclusive => "INCONCLUSIVE",
            CutOutcome::Dead => "DEAD",
        }
    }
}

impl CutResult {
    /// What a verify report says of the cut.
    pub fn of(r: &Report) -> CutResult {
        let outcome = match (r.verdict, &r.dead_device) {
            (_, Some(_)) => CutOutcome::Dead,
            (Verdict::Pass, None) => CutOutcome::Pass,
            (Verdict::Fail, None) => CutOutcome::Fail,
            _ => CutOutcome::Inconclusive,
        };
        let acked_lost = crate::model::RecordClass::ALL
            .iter()
            .filter(|c| c.is_failure())
            .map(|c| r.counts.get(c.name()).copied().unwrap_or(0))
            .sum();
        CutResult {
            outcome,
            acked_lost,
            acked: r.counts.values().sum(),
            loss_window_ms: r.loss_window.as_ref().map(|w| w.ms),
            unsafe_shutdowns_delta: None,
        }
    }
}

/// One row of the matrix.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriveRow {
    #[serde(flatten)]
    pub drive: DriveSpec,
    /// Every cut, in order.
    pub cuts: Vec<CutResult>,
    pub pass: u64,
    pub fail: u64,
    pub inconclusive: u64,
    pub dead: u64,
    /// Acknowledged records lost in each failing cut, in order.
    pub acked_lost_per_failing_cut: Vec<u64>,
    pub worst_loss_window_ms: Option<f64>,
    /// The most its failure rate per judged cut (PASS or FAIL) can be, at 95%
    /// confidence (`crate::stats::clopper_pearson_upper`).
    pub failure_rate_upper_95: f64,
    /// It claims power-loss protection and lost acknowledged writes.
    pub plp_claim_broken: bool,
    /// One plain sentence for people.
    pub sentence: String,
}

impl DriveRow {
    pub fn new(drive: DriveSpec, cuts: Vec<CutResult>) -> DriveRow {
        let count = |o: CutOutcome| cuts.iter().filter(|c| c.outcome == o).count() as u64;
        let (pass, fail) = (count(CutOutcome::Pass), count(CutOutcome::Fail));
        let (inconclusive, dead) = (count(CutOutcome::Inconclusive), count(CutOutcome::Dead));
        let failing = cuts.iter().filter(|c| c.outcome == CutOutcome::Fail);
        let acked_lost_per_failing_cut: Vec<u64> = failing.clone().map(|c| c.acked_lost).collect();
        let worst_loss_window_ms = failing.filter_map(|c| c.loss_window_ms).reduce(f64::max);
        let mut row = DriveRow {
            plp_claim_broken: drive.claims_plp && fail > 0,
            drive,
            failure_rate_upper_95: crate::stats::clopper_pearson_upper(fail, pass + fail, 0.05),
            cuts,
            pass,
            fail,
            inconclusive,
            dead,
            acked_lost_per_failing_cut,
            worst_loss_window_ms,
            sentence: String::new(),
        };
        row.sentence = sentence(&row);
        row
    }

    /// Cuts judged PASS or FAIL.
    pub fn judged(&self) -> u64 {
        self.pass + self.fail
    }

    /// DEAD cuts that took acknowledged records with the drive (it held confirmed
    /// writes, and never came back to give them): not a judged cut, but writes lost,
    /// so the fleet's verdict is FAIL as the campaign's exit status is.
    pub fn dead_with_losses(&self) -> u64 {
        self.cuts
            .iter()
            .filter(|c| c.outcome == CutOutcome::Dead && c.acked_lost > 0)
            .count() as u64
    }

    /// The drive lost acknowledged writes in some cut: FAIL, or DEAD with losses.
    pub fn lost_acked_writes(&self) -> bool {
        self.fail > 0 || self.dead_with_losses() > 0
    }
}

/// The plain sentence of a row: what the drive did, and what to do about it.
fn sentence(r: &DriveRow) -> String {
    let who = format!("{} ({})", r.drive.name, r.drive.model);
    let n = r.cuts.len() as u64;
    let unjudged = match (r.inconclusive, r.dead) {
        (0, 0) => String::new(),
        (i, 0) => format!(" ({i} could not be judged)"),
        (0, d) => format!(" (the drive was dead after {d})"),
        (i, d) => format!(" ({i} could not be judged, the drive was dead after {d})"),
    };
    if r.fail > 0 {
        let plp = match r.drive.claims_plp {
            true => ", although it claims power-loss protection",
            false => "",
        };
        return format!(
            "{who} lost writes it had confirmed in {} of {n} power cuts{plp}{unjudged}: do not use it for a database or a ZFS log device.",
            r.fail
        );
    }
    if r.dead_with_losses() > 0 {
        return format!(
            "{who} did not come back after {} of {n} power cuts, taking writes it had confirmed{unjudged}: do not use it for a database or a ZFS log device.",
            r.dead_with_losses()
        );
    }
    if r.judged() == 0 {
        return format!("{who}: none of its {n} power cuts could be judged{unjudged}.");
    }
    let bound = format!(
        "its failure rate per cut is below {:.1}% at 95% confidence",
        r.failure_rate_upper_95 * 100.0
    );
    match r.judged() == n {
        true => format!("{who} kept every write it confirmed in all {n} power cuts: {bound}."),
        false => format!(
            "{who} kept every write it confirmed in the {} of {n} power cuts that could be judged{unjudged}: {bound}.",
            r.judged()
        ),
    }
}

/// Fisher's exact test between two drives.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pair {
    pub a: String,
    pub b: String,
    /// Two-sided p-value on (failing, clean) judged cuts of each.
    pub p_value: f64,
}

/// The whole comparison.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Matrix {
    pub format: String,
    pub seed: u64,
    /// Power cuts given to every drive.
    pub cuts: u64,
    pub drives: Vec<DriveRow>,
    /// Every pair of drives, in the rows' order.
    pub pairs: Vec<Pair>,
}

impl Matrix {
    pub fn new(seed: u64, drives: Vec<DriveRow>) -> Matrix {
        let mut pairs = vec![];
        for (i, a) in drives.iter().enumerate() {
            for b in &drives[i + 1..] {
                pairs.push(Pair {
                    a: a.drive.name.clone(),
                    b: b.drive.name.clone(),
                    p_value: crate::stats::fisher_exact_two_sided(a.fail, a.pass, b.fail, b.pass),
                });
            }
        }
        Matrix {
            format: FLEET_FORMAT.into(),
            seed,
            cuts: drives
                .iter()
                .map(|d| d.cuts.len() as u64)
                .max()
                .unwrap_or(0),
            drives,
            pairs,
        }
    }

    /// The matrix its own cuts make, or why this one is not it: a document whose counts,
    /// losses, claims or pairs disagree with its cuts is damaged (hand-edited, or made
    /// by something else), and a page of it would show a verdict its cuts do not.
    /// The one returned is rebuilt from the cuts, so its rates, p-values and sentences
    /// are the cuts' too.
    pub fn checked(self) -> Result<Matrix, String> {
        let rebuilt = Matrix::new(
            self.seed,
            self.drives
                .iter()
                .map(|d| DriveRow::new(d.drive.clone(), d.cuts.clone()))
                .collect(),
        );
        if rebuilt.cuts != self.cuts {
            return Err(format!(
                "it says {} power cuts and its drives have {}",
                self.cuts, rebuilt.cuts
            ));
        }
        for (had, made) in self.drives.iter().zip(&rebuilt.drives) {
            let counts = |r: &DriveRow| {
                (
                    [r.pass, r.fail, r.inconclusive, r.dead],
                    r.acked_lost_per_failing_cut.clone(),
                    r.plp_claim_broken,
                )
            };
            if counts(had) != counts(made) {
                return Err(format!(
                    "the row of drive {:?} disagrees with its own cuts",
                    had.drive.name
                ));
            }
        }
        let names = |m: &Matrix| -> Vec<(String, String)> {
            m.pairs.iter().map(|p| (p.a.clone(), p.b.clone())).collect()
        };
        if names(&self) != names(&rebuilt) {
            return Err("its pairs are not the pairs of its drives".into());
        }
        Ok(rebuilt)
    }

    /// FAIL when any drive lost acknowledged writes, PASS when every drive passed every
    /// cut, INCONCLUSIVE otherwise.
    pub fn verdict(&self) -> Verdict {
        if self.drives.iter().any(DriveRow::lost_acked_writes) {
            Verdict::Fail
        } else if self.drives.iter().all(|d| d.pass == d.cuts.len() as u64) {
            Verdict::Pass
        } else {
            Verdict::Inconclusive
        }
    }
}

#[cfg(test)]
mod tests;
