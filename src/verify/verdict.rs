//! The verdict as one pure function of the facts verify gathered: how many acknowledged
//! records were judged and how they fared, whether reads timed out, whether the device
//! was there at all, what the ack log proved about itself, what the medium proves about
//! the log, and how the writer stopped.
//!
//! Why one function: the facts arrive at different places (the scan, the log reader, the
//! medium sample, the witness's events), and a verdict adjusted at each of them depends
//! on the order the adjustments run in. Here each fact is recorded as it arrives and the
//! verdict is decided from all of them at once ([`decide`]), so the same facts always
//! give the same verdict and one table (the tests below) covers every combination.
//!
//! The rule, in order of precedence:
//! 1. a loss the drive proves is FAIL: a dead device with acknowledged records, or a
//!    failing record, unless a read timed out and no record that was read was damaged;
//! 2. otherwise damage in the ack log is INCONCLUSIVE (the acks it lost were not
//!    checked);
//! 3. otherwise the drive's own no-verdicts: a dead device without acks, a read that
//!    timed out;
//! 4. otherwise a log that cannot prove it is whole, even one holding no acks (it may
//!    be cut short inside its first frame of acks); then no acks at all;
//! 5. otherwise a PASS needs a log that the medium does not contradict, a writer no
//!    longer connected, evidence of a cut (or `--rehearsal`), and, for every caller, a
//!    record read back intact.

use super::evidence::WriterEnd;
use crate::model::Verdict;
use std::time::Duration;

/// A read that did not complete within the read timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadTimeout {
    /// Where the read that hung started.
    pub at_byte: u64,
    /// Acknowledged records it left unread that would otherwise have counted as
    /// failing (after a FAIL they are in no count: `judge::TimedOut`).
    pub unread: u64,
    /// Acknowledged records of the run.
    pub acks: u64,
    pub limit: Duration,
    /// Whether a record that was read is damaged: then the loss is proven anyway.
    pub damage_seen: bool,
}

/// Everything the verdict rests on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Acknowledged records judged.
    pub acked: u64,
    /// Records of a failing class (lost, stale, shorn, corrupt, misdirected, unreadable).
    pub failing: u64,
    /// Records read back intact.
    pub intact: u64,
    pub read_timeout: Option<ReadTimeout>,
    /// Why the target could not be opened or read at all.
    pub dead_device: Option<String>,
    /// Damage found in the ack log, one line per place.
    pub log_damage: Vec<String>,
    /// Whether the log proved it holds every ack, and how (or why not); None when the
    /// caller vouches for the log.
    pub log_whole: Option<(bool, String)>,
    /// What on the medium proves the log cannot hold every ack (`verify::beyond`).
    pub log_cannot_be_complete: Option<String>,
    /// How the writer stopped; None where nobody asked (a campaign cycle proves its cut
    /// itself).
    pub writer_end: Option<WriterEnd>,
    /// `--rehearsal`: the user checks a run without a cut on purpose.
    pub rehearsal: bool,
    /// Why the acks themselves are refused (a log no writer could produce, one that
    /// changed between the engine's passes): nothing was judged, whatever else is known.
    pub refused: Option<String>,
}

/// Which rule decided the verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// PASS: every acknowledged record survived.
    AllSurvived,
    /// FAIL: acknowledged records did not survive intact.
    Lost,
    /// FAIL with acks, else INCONCLUSIVE: the target could not be read at all.
    DeadDevice,
    /// The log holds no acknowledged record.
    NoAcks,
    /// A read hung and nothing read was damaged.
    ReadTimedOut,
    /// The ack log is damaged.
    LogDamaged,
    /// The ack log cannot prove it holds every ack.
    LogNotProvenWhole,
    /// The medium holds records the log should have acks for.
    LogCannotBeComplete,
    /// The writer was still connected when the acks were fetched.
    WriterStillConnected,
    /// The writer stopped before the power went.
    NoCut,
    /// Every acknowledged record was overwritten later: nothing was read back.
    NothingChecked,
    /// The acks were refused before any was judged.
    Refused,
}

/// The verdict and the rule that gave it.
pub fn decide(f: &Facts) -> (Verdict, Reason) {
    // Refused acks were never judged: nothing below, not even a count of failures made
    // before the refusal, speaks about the drive.
    if f.refused.is_some() {
        return (Verdict::Inconclusive, Reason::Refused);
    }
    let timed_out_clean = f.read_timeout.as_ref().is_some_and(|t| !t.damage_seen);
    if f.dead_device.is_some() && f.acked > 0 {
        return (Verdict::Fail, Reason::DeadDevice);
    }
    if f.dead_device.is_none() && f.acked > 0 && f.failing > 0 && !timed_out_clean {
        return (Verdict::Fail, Reason::Lost);
    }
    let no_verdict = |r| (Verdict::Inconclusive, r);
    if !f.log_damage.is_empty() {
        return no_verdict(Reason::LogDamaged);
    }
    if f.dead_device.is_some() {
        return no_verdict(Reason::DeadDevice);
    }
    if timed_out_clean {
        return no_verdict(Reason::ReadTimedOut);
    }
    // Before "no acks": a log cut short inside its first frame of acks holds none, and
    // saying the run has no acks would hide that the log is not whole.
    if f.log_whole.as_ref().is_some_and(|(whole, _)| !whole) {
        return no_verdict(Reason::LogNotProvenWhole);
    }
    if f.acked == 0 {
        return no_verdict(Reason::NoAcks);
    }
    if f.log_cannot_be_complete.is_some() {
        return no_verdict(Reason::LogCannotBeComplete);
    }
    if let Some(end) = &f.writer_end {
        if matches!(end, WriterEnd::StillConnected(_)) {
            return no_verdict(Reason::WriterStillConnected);
        }
        if !end.is_cut_evidence() && !f.rehearsal {
            return no_verdict(Reason::NoCut);
        }
    }
    // Whoever asks (verify, a campaign cycle, replay): a PASS rests on records read back.
    if f.intact == 0 {
        return no_verdict(Reason::NothingChecked);
    }
    (Verdict::Pass, Reason::AllSurvived)
}

/// The one-sentence summary for the verdict `reason` gave on `f`. A FAIL also says
/// what else is wrong (a damaged log, no cut seen unless `--rehearsal` said so), which
/// does not change it.
pub fn summary(f: &Facts, reason: Reason) -> String {
    let acked = crate::units::thousands(f.acked);
    let how = || {
        f.writer_end
            .as_ref()
            .map(WriterEnd::describe)
            .unwrap_or_default()
    };
    let mut s = match reason {
        Reason::AllSurvived => format!(
            "all {acked} acknowledged records survived (intact or legitimately overwritten)"
        ),
        Reason::Lost => {
            let mut s = format!(
                "{} of {acked} acknowledged records did not survive intact",
                crate::units::thousands(f.failing)
            );
            // The FAIL stands on the records read; those a hung read left were never
            // judged, and are in no count.
            if let Some(t) = f.read_timeout.as_ref().filter(|t| t.damage_seen) {
                let were = if t.unread == 1 {
                    "record was"
                } else {
                    "records were"
                };
                s += &format!(
                    "; {} other acknowledged {were} left unread and not judged: a read at \
                     byte {} did not complete within {:?}",
                    crate::units::thousands(t.unread),
                    t.at_byte,
                    t.limit
                );
            }
            s
        }
        Reason::DeadDevice => format!(
            "the device is dead: {}",
            f.dead_device.as_deref().unwrap_or_default()
        ),
        Reason::Refused => format!(
            "no verdict on the drive: the list of acknowledged writes was refused: {}",
            f.refused.as_deref().unwrap_or_default()
        ),
        Reason::NoAcks => {
            "the witness holds no acknowledged records for this run, so there is nothing to check"
                .to_string()
        }
        Reason::ReadTimedOut => {
            let t = f.read_timeout.as_ref().expect("a read timed out");
            format!(
                "a read at byte {} did not complete within {:?}, so {} of {} acknowledged \
                 records could not be checked (no damage was seen in the rest); this is not \
                 a verdict on the drive: run verify again, with a longer --read-timeout if \
                 this machine is busy",
                t.at_byte,
                t.limit,
                crate::units::thousands(t.unread),
                crate::units::thousands(t.acks)
            )
        }
        Reason::LogDamaged => format!(
            "the ack log is damaged, so acknowledged records it lost were not checked: \
             {} (of the {acked} records it still holds, none failed)",
            damage_text(&f.log_damage)
        ),
        Reason::LogNotProvenWhole if f.acked == 0 => format!(
            "the ack log holds no acknowledged records it can read, and cannot prove it \
             holds every ack (it may be cut short or damaged), so nothing could be \
             checked: {}",
            f.log_whole.as_ref().map_or("", |(_, how)| how.as_str())
        ),
        Reason::LogNotProvenWhole => format!(
            "all {acked} acknowledged records in the ack log survived, but the log cannot \
             prove it holds every ack: {}",
            f.log_whole.as_ref().map_or("", |(_, how)| how.as_str())
        ),
        Reason::LogCannotBeComplete => format!(
            "all {acked} acknowledged records in the ack log survived, but the log cannot \
             hold every ack: {}",
            f.log_cannot_be_complete.as_deref().unwrap_or_default()
        ),
        Reason::WriterStillConnected => format!(
            "all {acked} acknowledged records in the ack log survived, but the log \
             cannot hold every ack: the writer {}; verify after the power \
             cut, once the writer is gone",
            how()
        ),
        Reason::NoCut => format!(
            "no power cut during writing: the writer {}, so no acknowledged \
             write was put at risk by a power cut. Cut the power while \
             `plugpull write` runs; to judge a clean run on purpose, pass \
             --rehearsal",
            how()
        ),
        Reason::NothingChecked => format!(
            "none of the {acked} acknowledged records could be checked: all of them were \
             overwritten later (by later records or later runs), so nothing says \
             whether the drive kept them"
        ),
    };
    if matches!(reason, Reason::Lost | Reason::DeadDevice) && f.acked > 0 {
        if !f.log_damage.is_empty() {
            s += &format!(
                "; the ack log is also damaged: {}",
                damage_text(&f.log_damage)
            );
        }
        // With --rehearsal the user said there was no cut: no need to say so again.
        if !f.rehearsal && f.writer_end.as_ref().is_some_and(|e| !e.is_cut_evidence()) {
            s += &format!(
                "; no power cut was seen during writing: the writer {}",
                how()
            );
        }
    }
    s
}

/// The first place of damage, and how many more.
fn damage_text(damage: &[String]) -> String {
    let first = damage.first().map_or("", String::as_str);
    match damage.len() {
        0 | 1 => first.to_string(),
        n => format!("{first} (and {} more places)", n - 1),
    }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
