//! Did the power really drop? The proof of a campaign's cut.
//!
//! Why: a switch that "cuts" and returns without error proves nothing. A relay wired to
//! the wrong rail, a command that does nothing, a back-fed rail or a drive on another
//! supply all leave the drive powered, and verify then finds every acknowledged record
//! intact: a PASS through a power cut that never happened. So a drive-only cycle counts
//! only when something shows the drive lost power:
//! - `rail-fell`: the switch sampled the rail and it fell to `campaign.cut_proof_threshold`
//!   of nominal (`power::fall`);
//! - `writer-lost-drive`: after the cut was issued, the writer's write or flush failed
//!   with an error of a drive that is gone (`device::error::DRIVE_GONE_ERRNOS`: EIO,
//!   ENODEV, ENXIO, ENOTCONN, ECONNABORTED, ENOMEDIUM, EREMOTEIO), before the controller
//!   dropped the device itself;
//! - `switch-reports-off`: the switch, asked while power should be off, says it is off
//!   (only drivers that can read their state back);
//! - `unsafe-shutdown-counter-rose`: the drive's unsafe-shutdown counter rose across the
//!   cut.
//!
//! Evidence against the cut outranks evidence for it: a sampled rail that did not fall,
//! a switch that reads back "on", or (with `campaign.require_cut_proof`) no trace at all
//! make the cut not proven whatever else was seen. With no evidence either way it is
//! not proven either. A cut not proven is never a PASS (`CycleResult::apply_cut_proof`).
//!
//! Whole-host mode has only the rail to go by here ([`cut_proof`]): the writer dies with
//! its host, and the host's boot report is what says it came back.

use super::config::Settings;
use super::results::CycleResult;
use crate::power::{PowerError, PowerSwitch};
use crate::write::engine::Progress;
use std::time::{Duration, Instant};

pub const RAIL_FELL: &str = "rail-fell";
pub const WRITER_LOST_DRIVE: &str = "writer-lost-drive";
pub const SWITCH_REPORTS_OFF: &str = "switch-reports-off";
pub const COUNTER_ROSE: &str = "unsafe-shutdown-counter-rose";

use crate::device::error::DRIVE_GONE_ERRNOS;

/// The least time the writer is given after the cut to fail: the kernel takes a moment
/// to fail I/O to a drive that lost power, even when `campaign.off` is shorter.
pub const VANISH_WAIT: Duration = Duration::from_secs(1);

/// What one drive-only cycle saw of its cut.
#[derive(Clone, Debug, Default)]
pub struct CutEvidence {
    /// What failed under the writer after the cut, when it is a drive-gone error.
    pub writer_lost_drive: Option<String>,
    /// The switch's reading while power should be off (`Some(false)`: off).
    pub switch_on: Option<bool>,
    /// The sampled rail ([`rail`]): whether it fell far enough, and if not, why. `None`:
    /// no trace, and none required.
    pub rail: Option<(bool, String)>,
    pub unsafe_shutdowns_delta: Option<i64>,
}

/// The verdict on a cut: proven or not, by what, and if not, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutProof {
    pub proven: bool,
    /// The evidence that proved it (empty when not proven).
    pub evidence: Vec<String>,
    pub why_not: String,
}

impl CutEvidence {
    /// The rule of this module.
    pub fn judge(&self) -> CutProof {
        let not = |why: String| CutProof {
            proven: false,
            evidence: vec![],
            why_not: why,
        };
        if let Some((false, why)) = &self.rail {
            return not(why.clone());
        }
        if self.switch_on == Some(true) {
            return not("the switch reports power still on after the cut".into());
        }
        let mut evidence = vec![];
        if matches!(self.rail, Some((true, _))) {
            evidence.push(RAIL_FELL.to_string());
        }
        if self.writer_lost_drive.is_some() {
            evidence.push(WRITER_LOST_DRIVE.to_string());
        }
        if self.switch_on == Some(false) {
            evidence.push(SWITCH_REPORTS_OFF.to_string());
        }
        if self.unsafe_shutdowns_delta.is_some_and(|d| d >= 1) {
            evidence.push(COUNTER_ROSE.to_string());
        }
        if evidence.is_empty() {
            return not(
                "nothing shows the drive lost power: the writer met no drive-gone error after the cut, the switch cannot report its state, it sampled no rail, and the unsafe-shutdown counter did not rise (or cannot be read)"
                    .into(),
            );
        }
        CutProof {
            proven: true,
            evidence,
            why_not: String::new(),
        }
    }

    /// Records the judgement in `r` (after verify's summary is in it): the evidence, and
    /// a verdict that is never PASS when the cut is not proven.
    pub fn apply(&self, r: &mut CycleResult) {
        let p = self.judge();
        r.cut_evidence = p.evidence;
        r.apply_cut_proof(Some(p.proven), &p.why_not);
    }
}

/// Waits, after the cut was issued, until the writer fails or `wait` passes; returns what
/// failed when it failed the way a drive without power fails. `failed_before`: the writer
/// had already failed before the cut, which then proves nothing.
pub fn writer_lost_drive(
    progress: &Progress,
    failed_before: bool,
    wait: Duration,
) -> Option<String> {
    if failed_before {
        return None;
    }
    let t0 = Instant::now();
    loop {
        if let Some(f) = progress.failure() {
            let gone = f
                .raw_os_error
                .is_some_and(|e| DRIVE_GONE_ERRNOS.contains(&e));
            return gone.then(|| {
                format!(
                    "{} failed {:.0} ms after the cut: {}",
                    f.during,
                    t0.elapsed().as_secs_f64() * 1e3,
                    f.error
                )
            });
        }
        if t0.elapsed() >= wait {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The switch's reading while power should be off; a switch that cannot be asked (or
/// fails to answer) gives no evidence either way.
pub fn switch_on(power: &mut dyn PowerSwitch) -> Option<bool> {
    power.state().ok().flatten()
}

/// Reads the rail's fall from the switch (while power is still off) into `r`: whether it
/// proves the cut and, if not, why. `None` when the switch samples no rail and none is
/// required (`Some((false, ..))` when one is required and none came).
pub fn rail(
    r: &mut CycleResult,
    s: &Settings,
    power: &mut dyn PowerSwitch,
) -> Result<Option<(bool, String)>, PowerError> {
    let threshold = s.file.campaign.cut_proof_threshold;
    let Some(trace) = power.last_fall()? else {
        return Ok(s.file.campaign.require_cut_proof.then(|| {
            (
                false,
                "the switch reported no fall trace (campaign.require_cut_proof)".into(),
            )
        }));
    };
    let fall = crate::power::fall::analyze(&trace);
    let proven = fall.proven(threshold);
    let why = format!(
        "rail {} fell only to {:.2} V, above {:.0}% of its nominal {:.2} V",
        fall.channel,
        fall.min_mv as f64 / 1e3,
        threshold * 100.0,
        fall.nominal_mv as f64 / 1e3
    );
    r.fall = Some(fall);
    Ok(Some((proven, why)))
}

/// Whole-host mode's proof: the rail alone, `None` where the switch samples none and no
/// proof is required.
pub fn cut_proof(
    r: &mut CycleResult,
    s: &Settings,
    power: &mut dyn PowerSwitch,
) -> Result<(Option<bool>, String), PowerError> {
    Ok(match rail(r, s, power)? {
        Some((proven, why)) => (Some(proven), why),
        None => (None, String::new()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_against_the_cut_outranks_evidence_for_it() {
        let lost = Some("flush failed".to_string());
        let e = |f: fn(&mut CutEvidence)| {
            let mut e = CutEvidence {
                writer_lost_drive: lost.clone(),
                ..Default::default()
            };
            f(&mut e);
            e.judge()
        };
        let p = e(|_| {});
        assert!(p.proven);
        assert_eq!(p.evidence, [WRITER_LOST_DRIVE]);
        assert!(!e(|e| e.rail = Some((false, "stuck".into()))).proven);
        assert!(!e(|e| e.switch_on = Some(true)).proven);
        let p = e(|e| {
            e.rail = Some((true, String::new()));
            e.switch_on = Some(false);
            e.unsafe_shutdowns_delta = Some(1);
        });
        assert_eq!(
            p.evidence,
            [
                RAIL_FELL,
                WRITER_LOST_DRIVE,
                SWITCH_REPORTS_OFF,
                COUNTER_ROSE
            ]
        );
    }

    #[test]
    fn no_evidence_is_no_proof() {
        let p = CutEvidence::default().judge();
        assert!(!p.proven);
        assert!(p.why_not.contains("nothing shows the drive lost power"));
        let p = CutEvidence {
            unsafe_shutdowns_delta: Some(0),
            switch_on: None,
            ..Default::default()
        }
        .judge();
        assert!(!p.proven);
        let p = CutEvidence {
            unsafe_shutdowns_delta: Some(1),
            ..Default::default()
        }
        .judge();
        assert_eq!(p.evidence, [COUNTER_ROSE]);
    }
}
