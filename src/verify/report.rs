//! The verify report: one struct, serialised as versioned JSON (docs/report.md) or
//! printed for people.

use crate::device::identity::DeviceIdentity;
use crate::model::peer_text::shown;
use crate::model::{
    ClassCounts, IoSettings, LossWindow, RecordClass, ReportSummary, RunDescriptor, Verdict,
    WitnessEvent,
};
use crate::units::{fmt_bytes, fmt_duration_us, thousands};
use crate::verify::evidence::{WriterEnd, writer_end};
use crate::verify::plain::{self, Facts, NoVerdictReason};
use crate::verify::verdict;
use serde::Serialize;
use std::collections::BTreeMap;

pub const REPORT_FORMAT: &str = "plugpull-verify/1";
/// Failing records listed individually in the report; the counts are always complete.
pub const MAX_FINDINGS: usize = 10_000;

/// One acknowledged record that did not survive as it should have.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub class: RecordClass,
    pub stream: u16,
    pub seq: u64,
    pub offset: u64,
    pub len_bytes: u64,
    /// Writer clock, ns since the epoch.
    pub submitted_ns: u64,
    pub flushed_ns: u64,
    /// How long before the run's last ack this record was acknowledged.
    pub acked_ms_before_last_ack: f64,
    /// Sector counts by what was found (only non-zero ones).
    pub sectors: BTreeMap<&'static str, u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_bits: Option<u64>,
    /// Where this record's data turned up instead (misdirected).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_at: Option<u64>,
    /// A record acknowledged later (flush completed before... see ordering_holes) survived.
    pub ordering_hole: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct OrderingHoles {
    /// Failing records whose flush completed before some surviving (intact) record was
    /// even submitted: the drive did not keep a prefix of the completed writes.
    pub count: u64,
    /// Submission time of the newest surviving record, writer clock.
    pub newest_survivor_submitted_ns: Option<u64>,
}

/// What the ack log proved about itself (docs/report.md, `ack_log`).
#[derive(Clone, Debug, Serialize)]
pub struct AckLogCheck {
    /// Where the acks came from: "witness HOST:PORT", a file path, or "caller" (library
    /// use: the caller vouches for the log).
    pub source: String,
    /// Whether the log proved it holds every acknowledged record, nothing more or less.
    pub whole: bool,
    /// How it proved that, or why it could not.
    pub wholeness: String,
    /// Damage found in the log or the witness journal: where, how many bytes, how many
    /// acks lost when known. Empty when none.
    pub damage: Vec<String>,
}

impl Default for AckLogCheck {
    fn default() -> Self {
        AckLogCheck {
            source: "caller".into(),
            whole: true,
            wholeness: "not checked: the caller handed over the acks".into(),
            damage: vec![],
        }
    }
}

/// How the writer stopped and what the verdict made of it.
#[derive(Clone, Debug, Serialize)]
pub struct WriterEndCheck {
    #[serde(flatten)]
    pub end: WriterEnd,
    /// Whether the end shows the power went while the writer was writing.
    pub cut_evidence: bool,
    /// `--rehearsal`: the user said no cut was made, and asked for a verdict on the data.
    pub rehearsal: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub format: &'static str,
    pub verdict: Verdict,
    /// One sentence saying why.
    pub summary: String,
    /// The verdict in plain words for someone who never heard of shorn writes
    /// (`verify::plain`); kept in step with `verdict` by [`Report::refresh_plain`].
    pub plain: String,
    pub counts: BTreeMap<&'static str, u64>,
    pub acked_records: u64,
    pub acked_bytes: u64,
    pub corrupt_bits: u64,
    pub loss_window: Option<LossWindow>,
    pub ordering_holes: OrderingHoles,
    /// Set when the target could not be opened or read at all.
    pub dead_device: Option<String>,
    /// Whether the ack log was whole and undamaged. A damaged log or one that cannot
    /// prove it is whole never gives PASS; a FAIL stays FAIL (the readable acks prove
    /// the loss). Derived from the facts by [`Report::conclude`].
    pub ack_log: AckLogCheck,
    /// How the run's writer stopped, from the witness's events (`verify::evidence`):
    /// null where nobody asked (a campaign cycle proves its cut itself).
    pub writer_end: Option<WriterEndCheck>,
    /// Runs of the same drive begun after this run's writer stopped (witness clock),
    /// whose records supersede this run's where they overwrote them
    /// (`verify::evidence::runs_after_the_end`).
    pub superseded_by_runs: Vec<String>,
    /// Ranges that returned errors or hung: [offset, len, reason].
    pub unreadable_ranges: Vec<(u64, u64, String)>,
    pub findings: Vec<Finding>,
    pub findings_truncated: bool,
    pub target: String,
    /// Set when the target lives in RAM (tmpfs, ramfs, a RAM disk): the verdict says
    /// nothing about any drive.
    pub ram_warning: Option<String>,
    pub device: Option<DeviceIdentity>,
    pub run: Option<RunDescriptor>,
    /// How the run was written, from its descriptor's settings ([`written_by`]): null
    /// when the descriptor does not record it.
    pub written_by: Option<String>,
    /// Records of the run found on the target past their stream's last acknowledged
    /// record (`verify::unacked`): never judged, never a failure. Null when not looked
    /// for.
    pub unacked_found: Option<super::unacked::UnackedFound>,
    pub bytes_read: u64,
    /// Whether every byte of the run's region was read (`--scan-region`, or a span of
    /// records that covers it), no read hanging first: then a write put in the wrong
    /// place inside the region was seen (`scan::ScanResult::read_through`).
    pub region_read: bool,
    /// More than `scan::elsewhere::MAX_NAMED` records of the run were found away from
    /// their home (a drive misplacing writes wholesale): too many to track, so none is
    /// classed misdirected; an acknowledged one among them counts as lost or stale.
    #[serde(default)]
    pub too_many_found_elsewhere: bool,
    pub verify_ms: f64,
    /// Every acknowledged record by ack time before the last ack and class (for charts).
    pub ack_timeline: Vec<super::distribution::TimelineBucket>,
    /// Write+flush latency of every acknowledged record (for charts); null without acks.
    pub flush_latency: Option<super::distribution::LatencySummary>,
    pub plugpull_version: &'static str,
    /// What the verdict was decided from (`verify::verdict`); each `note_*` adds one.
    #[serde(skip)]
    pub facts: verdict::Facts,
}

impl Report {
    /// What campaigns, the agent and the HTML report keep of this report.
    pub fn to_summary(&self) -> ReportSummary {
        ReportSummary {
            verdict: self.verdict,
            summary: self.summary.clone(),
            counts: ClassCounts::from(&self.counts),
            loss_window: self.loss_window.clone(),
            ordering_holes: self.ordering_holes.count,
            dead_device: self.dead_device.clone(),
        }
    }

    /// What the plain sentence is built from.
    pub fn plain_facts(&self) -> (ClassCounts, NoVerdictReason) {
        let counts = ClassCounts::from(&self.counts);
        // The rule that decided, when this report was judged here (a report read back
        // from JSON has no facts: then the counts and fields below tell).
        if self.facts != verdict::Facts::default() {
            use verdict::Reason as R;
            let reason = match verdict::decide(&self.facts).1 {
                R::NoAcks => NoVerdictReason::NoAcks,
                R::ReadTimedOut => NoVerdictReason::ReadTimedOut,
                R::NoCut => NoVerdictReason::NoCut,
                R::LogDamaged
                | R::LogNotProvenWhole
                | R::LogCannotBeComplete
                | R::WriterStillConnected
                | R::Refused => NoVerdictReason::LogNotTrusted,
                R::AllSurvived | R::Lost | R::DeadDevice | R::NothingChecked => {
                    NoVerdictReason::Unknown
                }
            };
            return (counts, reason);
        }
        let no_cut = self
            .writer_end
            .as_ref()
            .is_some_and(|w| !w.cut_evidence && !matches!(w.end, WriterEnd::StillConnected(_)));
        // A log not proven whole first, as `verdict::decide` does: one holding no acks
        // may be cut short.
        let reason = if !self.ack_log.whole {
            NoVerdictReason::LogNotTrusted
        } else if self.acked_records == 0 {
            NoVerdictReason::NoAcks
        } else if counts.get(RecordClass::Unreadable) > 0 {
            NoVerdictReason::ReadTimedOut
        } else if no_cut {
            NoVerdictReason::NoCut
        } else {
            NoVerdictReason::Unknown
        };
        (counts, reason)
    }

    /// The verdict in plain words, from the report as it is now.
    pub fn plain_sentence(&self) -> String {
        let (counts, reason) = self.plain_facts();
        plain::sentence(&Facts {
            verdict: self.verdict,
            counts: &counts,
            loss_window: self.loss_window.as_ref(),
            dead_device: self.dead_device.is_some(),
            reason,
            rehearsal: self
                .writer_end
                .as_ref()
                .is_some_and(|w| w.rehearsal && !w.cut_evidence),
            unread: self.unread_not_counted(),
            region_unread: self.region_unread(),
            too_many_found_elsewhere: self.too_many_found_elsewhere,
        })
    }

    /// Whether verify left some of the run's region unread (the live records' blocks
    /// only, without `--scan-region`): a write put in the wrong place there was not
    /// seen.
    pub fn region_unread(&self) -> bool {
        self.run.is_some() && !self.region_read
    }

    /// Acknowledged records a hung read left unread that are in no count: after a
    /// FAIL (`judge::TimedOut`); after an INCONCLUSIVE timeout they count as unreadable.
    pub fn unread_not_counted(&self) -> u64 {
        self.facts
            .read_timeout
            .as_ref()
            .filter(|t| t.damage_seen)
            .map_or(0, |t| t.unread)
    }

    /// Sets `plain` from the verdict and counts; called wherever those change.
    pub fn refresh_plain(&mut self) {
        self.plain = self.plain_sentence();
    }

    /// Decides the verdict, its summary and the plain words from the facts recorded so
    /// far (`verify::verdict`), and what the ack log proved with them. Called wherever a
    /// fact is recorded, so the report always shows the verdict of all its facts.
    pub fn conclude(&mut self) {
        let f = &self.facts;
        let (verdict, reason) = verdict::decide(f);
        self.verdict = verdict;
        self.summary = verdict::summary(f, reason);
        let still_connected = reason == verdict::Reason::WriterStillConnected;
        self.ack_log.damage = f.log_damage.clone();
        self.ack_log.whole = f.log_damage.is_empty()
            && f.refused.is_none()
            && f.log_whole.as_ref().is_none_or(|(whole, _)| *whole)
            && f.log_cannot_be_complete.is_none()
            && !still_connected;
        self.ack_log.wholeness = if f.refused.is_some() {
            "the log holds what no plugpull writer can produce".into()
        } else if let Some(why) = &f.log_cannot_be_complete {
            why.clone()
        } else if !f.log_damage.is_empty() {
            "the log is damaged".into()
        } else if still_connected {
            let how = f.writer_end.as_ref().map(WriterEnd::describe);
            format!(
                "the log cannot be complete: the writer {}",
                how.unwrap_or_default()
            )
        } else if let Some((_, how)) = &f.log_whole {
            how.clone()
        } else {
            AckLogCheck::default().wholeness
        };
        self.refresh_plain();
    }

    /// Records damage found in the ack log. Without a FAIL, the verdict becomes
    /// INCONCLUSIVE: the acks lost to the damage were never checked.
    pub fn note_log_damage(&mut self, damage: Vec<String>) {
        if damage.is_empty() {
            return;
        }
        self.facts.log_damage = damage;
        self.conclude();
    }

    /// Records where the acks came from and whether the ack log proved it is whole.
    /// Without a FAIL, a log that cannot prove it is whole gives INCONCLUSIVE.
    pub fn note_log_wholeness(&mut self, source: String, whole: bool, how: String) {
        self.ack_log.source = source;
        self.facts.log_whole = Some((whole, how));
        self.conclude();
    }

    /// Records how the writer stopped (from the run's events, `verify::evidence`): no
    /// PASS without evidence of a cut unless `rehearsal`, none while the writer was
    /// still connected, none without a record read back (`verify::verdict`).
    pub fn note_writer_end(&mut self, events: &[WitnessEvent], rehearsal: bool) {
        let end = writer_end(events);
        self.writer_end = Some(WriterEndCheck {
            cut_evidence: end.is_cut_evidence(),
            end: end.clone(),
            rehearsal,
        });
        self.facts.writer_end = Some(end);
        self.facts.rehearsal = rehearsal;
        self.conclude();
    }

    /// Records that the medium proves the log cannot hold every ack (`verify::beyond`):
    /// without a FAIL, the verdict becomes INCONCLUSIVE.
    pub fn note_log_cannot_be_complete(&mut self, why: Option<String>) {
        let Some(why) = why else {
            return;
        };
        self.facts.log_cannot_be_complete = Some(why);
        self.conclude();
    }

    /// Sets the run judged, and what its descriptor says of how it was written.
    pub fn set_run(&mut self, d: &RunDescriptor) {
        self.written_by = written_by(&d.settings.io);
        self.run = Some(d.clone());
    }

    /// The human summary.
    pub fn to_text(&self) -> String {
        let mut o = String::new();
        self.text_run(&mut o);
        self.text_target(&mut o);
        self.text_warnings(&mut o);
        self.text_counts(&mut o);
        self.text_loss(&mut o);
        self.text_findings(&mut o);
        o += &format!("VERDICT: {} - {}\n", self.verdict.name(), self.summary);
        o += &format!("In plain words: {}\n", self.plain_sentence());
        o
    }

    /// The run: id, start, host and writer settings.
    fn text_run(&self, o: &mut String) {
        if let Some(r) = &self.run {
            let s = &r.settings;
            *o += &format!(
                "run {} started {} on {} ({}, {} records, {} stream(s), {})\n",
                r.run_id,
                // Seconds, in UTC: the writer's nanoseconds and offset help no reader.
                crate::units::fmt_utc_rfc3339(&r.started_at)
                    .unwrap_or_else(|| shown(&r.started_at).into_owned()),
                shown(&r.host),
                s.flush.name(),
                if s.record_bytes_min == s.record_bytes_max {
                    fmt_bytes(s.record_bytes_min)
                } else {
                    format!(
                        "{}-{}",
                        fmt_bytes(s.record_bytes_min),
                        fmt_bytes(s.record_bytes_max)
                    )
                },
                s.streams,
                s.placement
            );
            match &self.written_by {
                Some(w) => *o += &format!("written by {w}\n"),
                None => *o += "written by: not recorded in the run descriptor (engine, depth)\n",
            }
        }
    }

    /// The target and the drive identity.
    fn text_target(&self, o: &mut String) {
        *o += &format!("target {}", self.target);
        if let Some(d) = &self.device {
            let mut parts = vec![];
            if let Some(m) = &d.model {
                parts.push(m.clone());
            }
            if let Some(s) = &d.serial {
                parts.push(format!("serial {s}"));
            }
            if let Some(w) = &d.write_cache {
                parts.push(format!("write cache: {w}"));
            }
            if !parts.is_empty() {
                *o += &format!(" ({})", parts.join(", "));
            }
        }
        *o += "\n";
    }

    /// RAM, dead device and ack log warnings.
    fn text_warnings(&self, o: &mut String) {
        if let Some(w) = &self.ram_warning {
            *o += &format!("WARNING: {w}\n");
        }
        if let Some(d) = &self.dead_device {
            *o += &format!("dead device: {d}\n");
        }
        for d in &self.ack_log.damage {
            *o += &format!("ack log damage: {d}\n");
        }
        if !self.ack_log.whole && self.ack_log.damage.is_empty() {
            *o += &format!("ack log not proven whole: {}\n", self.ack_log.wholeness);
        }
        if let Some(w) = &self.writer_end {
            let evidence = match (w.cut_evidence, w.rehearsal) {
                (true, _) => "evidence of a power cut during writing",
                (false, true) => "no power cut during writing (--rehearsal)",
                (false, false) => "no evidence of a power cut during writing",
            };
            *o += &format!("writer: {}: {evidence}\n", shown(&w.end.describe()));
        }
        if !self.superseded_by_runs.is_empty() {
            *o += &format!(
                "later runs of this drive (begun after this run's writer stopped), whose \
                 records supersede this run's where they overwrote them: {}\n",
                self.superseded_by_runs.join(", ")
            );
        }
    }

    /// Acknowledged records and the count of each class.
    fn text_counts(&self, o: &mut String) {
        *o += &format!(
            "acknowledged records (durable at the witness): {} ({})\n",
            thousands(self.acked_records),
            fmt_bytes(self.acked_bytes)
        );
        for c in RecordClass::ALL {
            let n = self.counts[c.name()];
            if n > 0 || !c.is_failure() {
                *o += &format!("  {:<12} {:>10}", c.name(), thousands(n));
                if c == RecordClass::Corrupt && n > 0 {
                    *o += &format!("   ({} flipped bits)", thousands(self.corrupt_bits));
                }
                *o += "\n";
            }
        }
        if self.too_many_found_elsewhere {
            *o += &format!(
                "  more than {} records of this run were found away from their home: too many to name; a record found only elsewhere counts as lost, not misdirected\n",
                thousands(crate::verify::scan::elsewhere::MAX_NAMED as u64)
            );
        }
        if let Some(u) = &self.unacked_found {
            *o += &format!(
                "written past the last ack (never acknowledged, not judged, not a failure): {} record(s) found on the target ({} whole, {} in part), {} place(s) looked at\n",
                thousands(u.records),
                thousands(u.whole),
                thousands(u.partial),
                thousands(u.looked_for)
            );
        }
        let unread = self.unread_not_counted();
        if unread > 0 {
            *o += &format!(
                "  {:<12} {:>10}   (a read timed out: not judged, in no count above)\n",
                "unread",
                thousands(unread)
            );
        }
        let counts = ClassCounts::from(&self.counts);
        for (c, m) in plain::legend(&counts) {
            *o += &format!("    {}: {m}\n", c.name());
        }
    }

    /// The loss window, ordering holes and unreadable ranges.
    fn text_loss(&self, o: &mut String) {
        if let Some(w) = &self.loss_window {
            *o += &format!(
                "loss window: {} record(s), {}, acknowledged up to {:.1} ms before the last ack\n",
                thousands(w.records),
                fmt_bytes(w.bytes),
                w.ms
            );
        }
        if self.ordering_holes.count > 0 {
            *o += &format!(
                "ordering holes: {} failing record(s) were flushed before a record that survived was even submitted\n    ({})\n",
                thousands(self.ordering_holes.count),
                plain::ORDERING_HOLES
            );
        }
        for (off, len, why) in self.unreadable_ranges.iter().take(5) {
            *o += &format!("unreadable: {} at offset {off}: {why}\n", fmt_bytes(*len));
        }
    }

    /// The most recently acknowledged failing records.
    fn text_findings(&self, o: &mut String) {
        if !self.findings.is_empty() {
            *o += "failing records (most recent acks first):\n";
            let mut f: Vec<&Finding> = self.findings.iter().collect();
            f.sort_by_key(|x| std::cmp::Reverse(x.flushed_ns));
            for x in f.iter().take(10) {
                *o += &format!(
                    "  {:<11} stream {} seq {:<8} offset {:<12} {:>9}  acked {:.1} ms before the last ack{}{}\n",
                    x.class.name(),
                    x.stream,
                    x.seq,
                    x.offset,
                    fmt_bytes(x.len_bytes),
                    x.acked_ms_before_last_ack,
                    x.corrupt_bits
                        .map(|b| format!(", {b} bits flipped"))
                        .unwrap_or_default(),
                    x.found_at
                        .map(|a| format!(", found at {a}"))
                        .unwrap_or_default(),
                );
            }
            if self.findings.len() > 10 {
                *o += &format!(
                    "  ... and {} more (see --json)\n",
                    thousands(self.findings.len() as u64 - 10)
                );
            }
        }
    }
}

/// How a run was written, from its settings: "io_uring at depth 32, a flush every 32
/// writes or 10 ms", "sync at depth 1"; None when the descriptor records no engine.
pub fn written_by(io: &IoSettings) -> Option<String> {
    let mut t = shown(io.engine.as_deref()?).into_owned();
    if let Some(n) = io.iodepth {
        t += &format!(" at depth {}", thousands(n as u64));
    }
    let within = io.flush_within_us.map(|us| fmt_duration_us(us as f64));
    match (io.flush_every, within) {
        (Some(k), Some(w)) => {
            t += &format!(", a flush every {} writes or {w}", thousands(k as u64))
        }
        (Some(k), None) => t += &format!(", a flush every {} writes", thousands(k as u64)),
        (None, Some(w)) => t += &format!(", a flush within {w}"),
        (None, None) => {}
    }
    Some(t)
}
