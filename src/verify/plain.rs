//! The verdict in plain words: one or two sentences an IT manager understands, built from
//! the numbers ("This drive lost 512 writes it had confirmed as saved, ..."), and one-line
//! meanings of the report's terms (superseded, ordering holes, each failing class).
//!
//! Why apart from the report: verify's text and JSON, the demo, the campaign summary and
//! the HTML report all end with the same sentence, and each of them has a different
//! struct at hand; they all reduce to [`Facts`], so the wording is decided once and each
//! verdict's sentence is unit-tested here.

use crate::model::{ClassCounts, LossWindow, RecordClass, ReportSummary, Verdict};
use crate::units::thousands;

/// Why a run got no verdict, as far as the caller knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoVerdictReason {
    /// The witness holds no acknowledged records for the run.
    NoAcks,
    /// A read did not complete in time; nothing read was damaged.
    ReadTimedOut,
    /// The ack log is damaged or cannot prove it holds every ack.
    LogNotTrusted,
    /// The writer finished or was stopped before the power went (or the log does not
    /// show how it stopped): no acknowledged write was at risk.
    NoCut,
    /// Not known here (a campaign summary keeps only the counts).
    Unknown,
}

/// What the sentence is built from.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub verdict: Verdict,
    pub counts: &'a ClassCounts,
    pub loss_window: Option<&'a LossWindow>,
    pub dead_device: bool,
    /// Only read for INCONCLUSIVE.
    pub reason: NoVerdictReason,
    /// A run the user says had no power cut (`verify --rehearsal`): a PASS or a FAIL
    /// must not speak of one.
    pub rehearsal: bool,
    /// For a FAIL: acknowledged records a hung read left unread, in no count of
    /// `counts` (`judge::TimedOut`). They were not checked, so they are not lost.
    pub unread: u64,
    /// Verify did not read the whole region (it reads the live records' blocks unless
    /// `--scan-region`): a lost write may have landed where it did not look.
    pub region_unread: bool,
    /// More records of the run were found away from home than verify names
    /// (`scan::elsewhere`): their writes went to the wrong place, whatever their class.
    pub too_many_found_elsewhere: bool,
}

impl<'a> Facts<'a> {
    /// From the summary a campaign, the agent or the HTML report keeps: the reason for an
    /// INCONCLUSIVE is guessed from the counts (no acks; unreadable records are what a
    /// read timeout leaves), else unknown.
    pub fn from_summary(s: &'a ReportSummary) -> Facts<'a> {
        let reason = if s.counts.total() == 0 {
            NoVerdictReason::NoAcks
        } else if s.counts.get(RecordClass::Unreadable) > 0 {
            NoVerdictReason::ReadTimedOut
        } else {
            NoVerdictReason::Unknown
        };
        Facts {
            verdict: s.verdict,
            counts: &s.counts,
            loss_window: s.loss_window.as_ref(),
            dead_device: s.dead_device.is_some(),
            reason,
            rehearsal: false,
            unread: 0,
            region_unread: false,
            too_many_found_elsewhere: false,
        }
    }
}

/// The plain sentence(s) for a verdict.
pub fn sentence(f: &Facts) -> String {
    let acked = f.counts.total();
    match f.verdict {
        Verdict::Pass if f.rehearsal => format!(
            "This drive kept every write it confirmed as saved ({} {}), but the power was not cut while they were written (a rehearsal): this says nothing about power loss.",
            thousands(acked),
            writes(acked)
        ),
        Verdict::Pass => format!(
            "This drive kept every write it confirmed as saved ({} {}) through this power cut.",
            thousands(acked),
            writes(acked)
        ),
        Verdict::Fail if f.dead_device => format!(
            "This drive could not be read at all after the power cut, so none of the {} {} it had confirmed as saved can be reached. Everything on a drive that does not come back after a power cut is out of reach until it is repaired or replaced.",
            thousands(acked),
            writes(acked)
        ),
        Verdict::Fail => fail_sentence(f, acked + f.unread),
        Verdict::Inconclusive => match f.reason {
            NoVerdictReason::NoAcks => "This test says nothing about the drive: no write had been confirmed as saved when the power went out, so there was nothing to check.".into(),
            NoVerdictReason::ReadTimedOut => "This test says nothing about the drive yet: part of it could not be read in time (the drive was slow or the computer too busy), and nothing that was read was damaged. Run verify again.".into(),
            NoVerdictReason::LogNotTrusted if acked == 0 => "This test cannot vouch for the drive: the list of confirmed writes kept on the other machine is damaged or incomplete, and no write it lists could be read from it, so nothing was checked.".into(),
            NoVerdictReason::LogNotTrusted => format!(
                "This test cannot vouch for the drive: the list of confirmed writes kept on the other machine is damaged or incomplete, although none of the {} {} it does list were lost.",
                thousands(acked),
                writes(acked)
            ),
            NoVerdictReason::NoCut => "This test says nothing about the drive: the program writing to it stopped by itself, with no power cut while it was writing, so no write it had confirmed as saved was put at risk. Cut the power while the writer is still running.".into(),
            NoVerdictReason::Unknown => "This test gave no verdict on the drive, and none of the writes that could be checked were lost. Run it again.".into(),
        },
        Verdict::Error => "This test says nothing about the drive: the test itself went wrong before the drive could be checked.".into(),
    }
}

fn fail_sentence(f: &Facts, acked: u64) -> String {
    let failing = f.counts.failing();
    let mut s = format!(
        "This drive lost {} of the {} {} it had confirmed as saved",
        thousands(failing),
        thousands(acked),
        writes(acked)
    );
    // A rehearsal had no power cut: the losses are dated from the writer's end instead.
    let end = match f.rehearsal {
        true => "the writer stopped",
        false => "the power went out",
    };
    match f.loss_window {
        // `ms` runs from the oldest failing record's ack to the run's last ack, and the
        // power went out after that last ack: so "at least".
        Some(w) if w.ms >= 0.05 => {
            s += &format!(
                ", reaching back at least {} before {end}.",
                crate::units::fmt_duration_ms(w.ms)
            )
        }
        _ => s += &format!(", the newest ones just before {end}."),
    }
    if f.unread > 0 {
        s += &format!(
            " {} more of them could not be read in time, so they were not checked.",
            thousands(f.unread)
        );
    }
    let has = |cs: &[RecordClass]| cs.iter().any(|c| f.counts.get(*c) > 0);
    use RecordClass::*;
    if has(&[Lost, Stale, Unreadable]) {
        s += " A database on this drive can lose committed transactions.";
    }
    if has(&[Shorn, Corrupt]) {
        s += " Files on this drive can be left half-written or damaged.";
    }
    if has(&[Misdirected]) || f.too_many_found_elsewhere {
        s += " It also put data in the wrong place, which can damage other files.";
    }
    if f.region_unread && has(&[Lost]) {
        s += " A lost write may have been written elsewhere on the drive: verify \
              --scan-region reads the whole region to find writes put in the wrong place.";
    }
    s
}

/// What a campaign's sentence is built from: verdicts over all its power cuts.
#[derive(Clone, Copy, Debug, Default)]
pub struct CampaignFacts {
    pub cycles: u64,
    pub passed: u64,
    pub failed: u64,
    /// Failing records over all cycles.
    pub lost_records: u64,
    /// Cuts after which the drive did not come back.
    pub dead_cycles: u64,
    /// The 95% upper bound on the share of cuts that lose data, 0..1, when none failed.
    pub upper_95: f64,
    /// Cuts whose rail never fell far enough (campaign CUT-NOT-PROVEN): neither passed nor
    /// failed, and said apart from cuts that merely gave no answer.
    pub cut_not_proven: u64,
}

/// The plain sentence(s) for many power cuts of one drive (a campaign, a multi-run
/// report).
pub fn campaign_sentence(f: &CampaignFacts) -> String {
    let judged = f.passed + f.failed;
    let unjudged = f.cycles - judged.min(f.cycles);
    let not_proven = f.cut_not_proven.min(unjudged);
    let mut also = match not_proven {
        0 => String::new(),
        1 => "; 1 more cut did not prove the power fell, so it does not count".into(),
        n => format!(
            "; {} more cuts did not prove the power fell, so they do not count",
            thousands(n)
        ),
    };
    also += &match unjudged - not_proven {
        0 => String::new(),
        1 => "; 1 more cut gave no answer".into(),
        n => format!("; {} more cuts gave no answer", thousands(n)),
    };
    if f.failed > 0 {
        let mut s = format!(
            "This drive lost writes it had confirmed as saved in {} of {} power {} ({} {} in all",
            thousands(f.failed),
            thousands(judged),
            cuts(judged),
            thousands(f.lost_records),
            writes(f.lost_records)
        );
        if f.dead_cycles > 0 {
            s += &format!(
                ", and did not come back at all after {} of them",
                thousands(f.dead_cycles)
            );
        }
        s += &format!("{also}). A database on this drive can lose committed transactions.");
        s
    } else if f.passed > 0 {
        format!(
            "This drive kept every write it confirmed as saved through all {} power {} that were checked{also}. That still allows it to lose data in up to {:.1}% of power cuts (95% confidence); more cuts narrow this.",
            thousands(f.passed),
            cuts(f.passed),
            f.upper_95 * 100.0
        )
    } else {
        let proof = match not_proven {
            0 => String::new(),
            n if n == f.cycles => {
                " (the power was never proven to have fallen: check the switch and its wiring)"
                    .into()
            }
            n => format!(" ({} of them did not prove the power fell)", thousands(n)),
        };
        format!(
            "These tests say nothing about the drive yet: none of the {} power {} gave an answer{proof}.",
            thousands(f.cycles),
            cuts(f.cycles)
        )
    }
}

fn cuts(n: u64) -> &'static str {
    if n == 1 { "cut" } else { "cuts" }
}

/// One line saying what a class means, for the legend after the counts.
pub fn meaning(c: RecordClass) -> &'static str {
    match c {
        RecordClass::Intact => "the confirmed write is there, whole and correct",
        RecordClass::Superseded => {
            "overwritten later by a newer write of the same test, as intended: not a failure"
        }
        RecordClass::Lost => {
            "a write confirmed as saved is gone: older data (or nothing) is where it was written"
        }
        RecordClass::Stale => {
            "a write confirmed as saved is gone: data from an earlier test is where it was written"
        }
        RecordClass::Shorn => {
            "a write confirmed as saved is only partly there: torn at a sector boundary"
        }
        RecordClass::Corrupt => "a write confirmed as saved is there, but with wrong bits",
        RecordClass::Misdirected => "a write confirmed as saved landed at the wrong address",
        RecordClass::Unreadable => "the drive returned an error (or no answer) reading it back",
    }
}

/// The legend for `verify --help`: what each class and "ordering holes" mean.
pub fn help_legend() -> String {
    let mut o = String::from("What the report's words mean:\n");
    for c in RecordClass::ALL {
        let tag = if c.is_failure() { " (a failure)" } else { "" };
        o += &format!("  {:<12} {}{tag}\n", c.name(), meaning(c));
    }
    o += &format!("  ordering holes: {ORDERING_HOLES}\n");
    o += "  loss window: how far back before the power cut the drive lost writes it had confirmed";
    o
}

/// What "ordering holes" means, in one line.
pub const ORDERING_HOLES: &str = "writes lost although they were confirmed before other writes the drive kept were even started: the drive did not keep its writes in order";

/// The legend lines (`class: meaning`) for the classes present in `counts` that need
/// one (superseded and every failing class; intact speaks for itself).
pub fn legend(counts: &ClassCounts) -> Vec<(RecordClass, &'static str)> {
    RecordClass::ALL
        .into_iter()
        .filter(|c| *c != RecordClass::Intact && counts.get(*c) > 0)
        .map(|c| (c, meaning(c)))
        .collect()
}

fn writes(n: u64) -> &'static str {
    if n == 1 { "write" } else { "writes" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(RecordClass, u64)]) -> ClassCounts {
        let mut c = ClassCounts::zero();
        for (k, n) in pairs {
            c.add(*k, *n);
        }
        c
    }

    fn facts<'a>(v: Verdict, c: &'a ClassCounts, w: Option<&'a LossWindow>) -> Facts<'a> {
        Facts {
            verdict: v,
            counts: c,
            loss_window: w,
            dead_device: false,
            reason: NoVerdictReason::Unknown,
            rehearsal: false,
            unread: 0,
            region_unread: false,
            too_many_found_elsewhere: false,
        }
    }

    #[test]
    fn pass_counts_every_kept_write() {
        let c = counts(&[(RecordClass::Intact, 1000), (RecordClass::Superseded, 234)]);
        assert_eq!(
            sentence(&facts(Verdict::Pass, &c, None)),
            "This drive kept every write it confirmed as saved (1,234 writes) through this power cut."
        );
    }

    #[test]
    fn fail_says_how_many_how_far_back_and_what_it_means() {
        let c = counts(&[
            (RecordClass::Intact, 98863),
            (RecordClass::Lost, 472),
            (RecordClass::Shorn, 40),
        ]);
        let w = LossWindow {
            records: 512,
            bytes: 2 << 20,
            ms: 24.3,
        };
        assert_eq!(
            sentence(&facts(Verdict::Fail, &c, Some(&w))),
            "This drive lost 512 of the 99,375 writes it had confirmed as saved, reaching back at least 24 ms before the power went out. A database on this drive can lose committed transactions. Files on this drive can be left half-written or damaged."
        );
    }

    #[test]
    fn fail_with_only_misdirected_writes_names_that_consequence_only() {
        let c = counts(&[(RecordClass::Intact, 9), (RecordClass::Misdirected, 1)]);
        let s = sentence(&facts(Verdict::Fail, &c, None));
        assert!(s.starts_with("This drive lost 1 of the 10 writes"), "{s}");
        assert!(
            s.ends_with("It also put data in the wrong place, which can damage other files."),
            "{s}"
        );
        assert!(!s.contains("database"), "{s}");
    }

    /// Records a hung read left unread are not lost: they are named apart, and the
    /// writes confirmed count them.
    #[test]
    fn a_fail_after_a_read_timeout_names_the_unread_apart() {
        let c = counts(&[(RecordClass::Intact, 6), (RecordClass::Lost, 1)]);
        let f = Facts {
            unread: 3,
            ..facts(Verdict::Fail, &c, None)
        };
        assert_eq!(
            sentence(&f),
            "This drive lost 1 of the 10 writes it had confirmed as saved, the newest ones just before the power went out. 3 more of them could not be read in time, so they were not checked. A database on this drive can lose committed transactions."
        );
    }

    /// A rehearsal had no power cut: a FAIL dates its losses from the writer's end.
    #[test]
    fn a_rehearsal_fail_does_not_speak_of_a_power_cut() {
        let c = counts(&[(RecordClass::Intact, 9), (RecordClass::Lost, 1)]);
        let w = LossWindow {
            records: 1,
            bytes: 4096,
            ms: 24.3,
        };
        let f = Facts {
            rehearsal: true,
            ..facts(Verdict::Fail, &c, Some(&w))
        };
        let s = sentence(&f);
        assert!(
            s.starts_with("This drive lost 1 of the 10 writes it had confirmed as saved, reaching back at least 24 ms before the writer stopped."),
            "{s}"
        );
        assert!(!s.contains("power"), "{s}");
    }

    /// Lost writes when verify did not read the whole region: the words say how to look
    /// for them elsewhere; never when it did, nor for other failures.
    #[test]
    fn a_lost_write_points_to_scan_region_only_when_the_region_was_not_read() {
        let lost = counts(&[(RecordClass::Intact, 9), (RecordClass::Lost, 1)]);
        let shorn = counts(&[(RecordClass::Intact, 9), (RecordClass::Shorn, 1)]);
        let hint = "verify --scan-region reads the whole region";
        let f = |c, region_unread| Facts {
            region_unread,
            ..facts(Verdict::Fail, c, None)
        };
        assert!(sentence(&f(&lost, true)).ends_with(
            " A lost write may have been written elsewhere on the drive: verify --scan-region reads the whole region to find writes put in the wrong place."
        ));
        assert!(!sentence(&f(&lost, false)).contains(hint));
        assert!(!sentence(&f(&shorn, true)).contains(hint));
    }

    #[test]
    fn a_dead_drive_is_out_of_reach() {
        let c = counts(&[(RecordClass::Unreadable, 1)]);
        let f = Facts {
            dead_device: true,
            ..facts(Verdict::Fail, &c, None)
        };
        assert!(sentence(&f).starts_with(
            "This drive could not be read at all after the power cut, so none of the 1 write it had confirmed"
        ));
    }

    #[test]
    fn inconclusive_says_why_there_is_no_verdict() {
        let none = ClassCounts::zero();
        let some = counts(&[(RecordClass::Intact, 5)]);
        let mut f = facts(Verdict::Inconclusive, &none, None);
        f.reason = NoVerdictReason::NoAcks;
        assert!(sentence(&f).contains("nothing to check"));
        f.reason = NoVerdictReason::ReadTimedOut;
        assert!(sentence(&f).contains("Run verify again"));
        f.reason = NoVerdictReason::LogNotTrusted;
        assert!(
            sentence(&f).contains("no write it lists could be read from it"),
            "{}",
            sentence(&f)
        );
        let mut f = facts(Verdict::Inconclusive, &some, None);
        f.reason = NoVerdictReason::LogNotTrusted;
        assert!(sentence(&f).contains("none of the 5 writes it does list were lost"));
        f.reason = NoVerdictReason::Unknown;
        assert!(sentence(&f).starts_with("This test gave no verdict"));
        assert!(sentence(&facts(Verdict::Error, &none, None)).contains("went wrong"));
    }

    #[test]
    fn the_reason_is_guessed_from_a_summary() {
        let s = ReportSummary {
            verdict: Verdict::Inconclusive,
            ..Default::default()
        };
        assert_eq!(Facts::from_summary(&s).reason, NoVerdictReason::NoAcks);
        let s = ReportSummary {
            verdict: Verdict::Inconclusive,
            counts: counts(&[(RecordClass::Intact, 3), (RecordClass::Unreadable, 2)]),
            ..Default::default()
        };
        assert_eq!(
            Facts::from_summary(&s).reason,
            NoVerdictReason::ReadTimedOut
        );
    }

    #[test]
    fn legend_lists_only_present_classes_that_need_words() {
        let c = counts(&[
            (RecordClass::Intact, 3),
            (RecordClass::Superseded, 1),
            (RecordClass::Shorn, 2),
        ]);
        let l: Vec<_> = legend(&c).into_iter().map(|(c, _)| c).collect();
        assert_eq!(l, [RecordClass::Superseded, RecordClass::Shorn]);
    }

    #[test]
    fn campaign_sentences_for_fail_pass_and_no_answer() {
        let f = CampaignFacts {
            cycles: 20,
            passed: 16,
            failed: 3,
            lost_records: 1234,
            dead_cycles: 1,
            upper_95: 0.0,
            cut_not_proven: 0,
        };
        assert_eq!(
            campaign_sentence(&f),
            "This drive lost writes it had confirmed as saved in 3 of 19 power cuts (1,234 writes in all, and did not come back at all after 1 of them; 1 more cut gave no answer). A database on this drive can lose committed transactions."
        );
        let f = CampaignFacts {
            cycles: 100,
            passed: 100,
            upper_95: 0.03,
            ..Default::default()
        };
        assert_eq!(
            campaign_sentence(&f),
            "This drive kept every write it confirmed as saved through all 100 power cuts that were checked. That still allows it to lose data in up to 3.0% of power cuts (95% confidence); more cuts narrow this."
        );
        let f = CampaignFacts {
            cycles: 2,
            ..Default::default()
        };
        assert!(campaign_sentence(&f).starts_with("These tests say nothing about the drive yet"));
    }

    /// A cut whose rail never fell far enough is neither a pass nor "no answer": the
    /// sentence says it did not count, apart from cuts that gave no answer.
    #[test]
    fn campaign_sentences_tell_unproven_cuts_apart() {
        let f = CampaignFacts {
            cycles: 10,
            passed: 7,
            cut_not_proven: 2,
            upper_95: 0.35,
            ..Default::default()
        };
        assert_eq!(
            campaign_sentence(&f),
            "This drive kept every write it confirmed as saved through all 7 power cuts that were checked; 2 more cuts did not prove the power fell, so they do not count; 1 more cut gave no answer. That still allows it to lose data in up to 35.0% of power cuts (95% confidence); more cuts narrow this."
        );
        let f = CampaignFacts {
            cycles: 3,
            cut_not_proven: 3,
            ..Default::default()
        };
        assert_eq!(
            campaign_sentence(&f),
            "These tests say nothing about the drive yet: none of the 3 power cuts gave an answer (the power was never proven to have fallen: check the switch and its wiring)."
        );
    }

    /// Every count in a campaign's sentence reads grouped by thousands.
    #[test]
    fn campaign_sentences_separate_thousands() {
        let f = CampaignFacts {
            cycles: 12_000,
            passed: 8_000,
            cut_not_proven: 1_500,
            upper_95: 0.0004,
            ..Default::default()
        };
        assert_eq!(
            campaign_sentence(&f),
            "This drive kept every write it confirmed as saved through all 8,000 power cuts that were checked; 1,500 more cuts did not prove the power fell, so they do not count; 2,500 more cuts gave no answer. That still allows it to lose data in up to 0.0% of power cuts (95% confidence); more cuts narrow this."
        );
    }
}
