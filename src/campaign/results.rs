//! What the results file holds: one JSON header line, then one JSON line per finished
//! cycle (`results_file` opens, reads and appends it), and the summary of its cycles.

use crate::model::{ReportSummary, Verdict};
use crate::power::SwitchTiming;
use crate::power::fall::Fall;
use crate::stats::{clopper_pearson_upper, quantile};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const HEADER_FORMAT: &str = "plugpull-campaign/1";
pub const CYCLE_FORMAT: &str = "plugpull-campaign-cycle/1";
pub const SUMMARY_FORMAT: &str = "plugpull-campaign-summary/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub started_at: String,
    pub seed: u64,
    pub config: serde_json::Value,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LastAcked {
    pub stream: u16,
    pub seq: u64,
    pub offset: u64,
    pub flushed_ns: u64,
}

impl LastAcked {
    /// The ack of `a`.
    pub fn of(a: &crate::model::Ack) -> LastAcked {
        LastAcked {
            stream: a.record.stream,
            seq: a.record.seq,
            offset: a.record.offset,
            flushed_ns: a.flushed_ns,
        }
    }

    /// The ack flushed last among `acks`.
    pub fn newest(acks: &[crate::model::Ack]) -> Option<LastAcked> {
        acks.iter().max_by_key(|a| a.flushed_ns).map(LastAcked::of)
    }
}

/// One finished cycle.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CycleResult {
    pub format: String,
    /// 1-based.
    pub cycle: u64,
    /// In a campaign of several drives (`[[drives]]`), the drive's name; absent in a
    /// campaign of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive: Option<String>,
    /// Seed of the writer's placement and sizes for this cycle.
    pub seed: u64,
    pub run_id: String,
    pub started_at: String,
    /// Delay between acks flowing and the cut.
    pub delay_ms: f64,
    pub cut: Option<SwitchTiming>,
    pub restore: Option<SwitchTiming>,
    pub off_ms: f64,
    /// Records the writer acknowledged before the cut stopped it.
    pub acked_records: u64,
    /// Acks the witness confirmed durable.
    pub witness_durable: u64,
    pub last_acked: Option<LastAcked>,
    /// Why the writer stopped ("target failed: flush ..." is what a cut looks like).
    pub writer_stopped: String,
    /// Power on → drive found again.
    pub reattach_ms: Option<f64>,
    /// The verify report's summary: its verdict is ERROR when the cycle itself went
    /// wrong. Flat in the line, between `reattach_ms` and `unsafe_shutdowns_delta`.
    #[serde(flatten)]
    pub report: ReportSummary,
    /// Rise of the drive's unsafe-shutdown counter across the cut, where it exposes one
    /// (must be 1 for a real cut).
    pub unsafe_shutdowns_delta: Option<i64>,
    /// The drive's health counters before and after the cut and what changed
    /// (`device::health`); absent for a simulated drive or with
    /// `unsafe_shutdown_counter = false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::device::health::AcrossTheCut>,
    /// Set when the cycle could not be completed (switch error, writer never started).
    pub error: Option<String>,
    pub cycle_ms: f64,
    /// Ramp sweep: the fall time asked of the switch for this cut, ms (0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall_time_ms: Option<f64>,
    /// The rail's fall as the switch sampled it (firmware version 2, recorded traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fall: Option<Fall>,
    /// Whether the cut is proven: in a drive-only campaign by the evidence in
    /// `cut_evidence`, in whole-host mode by the rail falling to
    /// `campaign.cut_proof_threshold` of nominal (`None` there where the switch samples
    /// no rail and no proof is required). When false, `verdict` is
    /// never PASS: it is INCONCLUSIVE and `verify_verdict` keeps what verify said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_proven: Option<bool>,
    /// Verify's own verdict of a cycle whose cut was not proven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_verdict: Option<Verdict>,
    /// What proved a drive-only cut (`proof.rs`): `rail-fell`, `writer-lost-drive`,
    /// `switch-reports-off`, `unsafe-shutdown-counter-rose`. Empty when not proven.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut_evidence: Vec<String>,
    /// Whole-host mode: the verdict the agent reported when the controller's witness
    /// could not back it (`witness_backing.rs`); `verdict` is then ERROR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_verdict: Option<Verdict>,
    /// What `plugpull report` shows of the cycle's verify besides its summary, as the
    /// verify report has it: the drive's identity, the run's descriptor, the acks'
    /// timeline and the flush latencies (docs/campaign.md, "The HTML report"). Kept in
    /// drive-only cycles; absent in whole-host cycles (the agent reports its summary
    /// only) and in files made before they were kept.
    #[serde(flatten)]
    pub shown: ShownByTheReport,
}

/// The parts of a cycle's verify report the HTML report draws (`CycleResult::shown`):
/// JSON as the verify report writes them, read back by `report::input`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ShownByTheReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_timeline: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_latency: Option<serde_json::Value>,
}

impl ShownByTheReport {
    /// What `r` shows: its device (else the one the run's writer identified).
    pub fn of(r: &crate::verify::report::Report) -> ShownByTheReport {
        fn json<T: Serialize>(v: Option<&T>) -> Option<serde_json::Value> {
            v.and_then(|v| serde_json::to_value(v).ok())
        }
        let device = r.device.as_ref().or(r.run.as_ref().map(|d| &d.device));
        ShownByTheReport {
            device: json(device),
            run: json(r.run.as_ref()),
            ack_timeline: json(Some(&r.ack_timeline)).filter(|_| !r.ack_timeline.is_empty()),
            flush_latency: json(r.flush_latency.as_ref()),
        }
    }
}

/// The status of one cycle: its verdict, except that a cut not proven is its own.
pub const CUT_NOT_PROVEN: &str = "CUT-NOT-PROVEN";

impl CycleResult {
    /// The cycle's health notes, one indented line each, for the line that reports it.
    pub fn health_lines(&self) -> String {
        self.health
            .iter()
            .flat_map(|h| &h.notes)
            .map(|n| format!("\n  drive health: {n}"))
            .collect()
    }

    /// A cycle that has not got anywhere yet: verdict ERROR until a verify says otherwise.
    pub fn empty(cycle: u64, seed: u64) -> CycleResult {
        CycleResult {
            format: CYCLE_FORMAT.into(),
            cycle,
            drive: None,
            seed,
            run_id: String::new(),
            started_at: chrono::Utc::now().to_rfc3339(),
            delay_ms: 0.0,
            cut: None,
            restore: None,
            off_ms: 0.0,
            acked_records: 0,
            witness_durable: 0,
            last_acked: None,
            writer_stopped: String::new(),
            reattach_ms: None,
            report: ReportSummary::default(),
            unsafe_shutdowns_delta: None,
            health: None,
            error: None,
            cycle_ms: 0.0,
            fall_time_ms: None,
            fall: None,
            cut_proven: None,
            verify_verdict: None,
            cut_evidence: vec![],
            agent_verdict: None,
            shown: ShownByTheReport::default(),
        }
    }

    /// Whether this cycle is "cut not proven": the rail never fell far enough (or no
    /// trace came where one was required), and nothing was lost (a FAIL stays a FAIL:
    /// acknowledged data lost is a finding whatever the rail did).
    pub fn cut_not_proven(&self) -> bool {
        self.cut_proven == Some(false)
            && !matches!(self.report.verdict, Verdict::Fail | Verdict::Error)
    }

    /// PASS, FAIL, INCONCLUSIVE, ERROR or CUT-NOT-PROVEN.
    pub fn status(&self) -> &'static str {
        if self.cut_not_proven() {
            CUT_NOT_PROVEN
        } else {
            self.report.verdict.name()
        }
    }

    /// Records what the switch's trace proves. A cut not proven can never be a PASS: its
    /// verdict becomes INCONCLUSIVE, verify's own is kept in `verify_verdict`, and the
    /// summary sentence says why. Call after the verify summary is in `report`.
    pub fn apply_cut_proof(&mut self, proven: Option<bool>, why: &str) {
        self.cut_proven = proven;
        if proven == Some(false)
            && matches!(self.report.verdict, Verdict::Pass | Verdict::Inconclusive)
        {
            self.verify_verdict = Some(self.report.verdict);
            self.report.verdict = Verdict::Inconclusive;
            self.report.summary = format!(
                "cut not proven: {why}; verify said {}: {}",
                self.verify_verdict.unwrap(),
                self.report.summary
            );
        }
    }
}

/// What a campaign found so far.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub cycles: u64,
    pub passed: u64,
    pub failed: u64,
    pub inconclusive: u64,
    /// Cycles whose rail never fell far enough: neither passed nor judged.
    pub cut_not_proven: u64,
    pub errors: u64,
    /// Failed / (passed + failed): cycles that reached a verdict.
    pub failure_rate: f64,
    /// Exact one-sided 95% upper bound (Clopper-Pearson) on the per-cycle failure rate.
    pub failure_rate_upper_95: f64,
    pub method: &'static str,
    /// Loss windows of the failing cycles, ms: min, p50, p90, max.
    pub loss_window_ms: Option<BTreeMap<&'static str, f64>>,
    pub lost_records_total: u64,
    /// First cycle that failed (drives that fail only after many cuts).
    pub first_failure_cycle: Option<u64>,
    pub dead_device_cycles: u64,
    /// Cycles whose drive health counters said something (`CycleResult::health`): an
    /// unsafe-shutdown counter that did not rise by exactly one, media errors, ...
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub health_noted_cycles: Vec<u64>,
    /// The campaign's verdict in plain words for someone who never heard of shorn writes
    /// (`verify::plain::campaign_sentence`); the text summary ends with it.
    pub plain: String,
    /// Ramp sweep: the same counts for each fall time (in the order of the sweep's
    /// values); empty without `campaign.fall_times`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by_fall_time: Vec<FallTimeGroup>,
}

/// One fall time of a ramp sweep: how its cycles ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FallTimeGroup {
    pub fall_time_ms: f64,
    pub cycles: u64,
    pub passed: u64,
    pub failed: u64,
    pub inconclusive: u64,
    pub cut_not_proven: u64,
    pub errors: u64,
    /// As the campaign's, over this fall time's judged cycles.
    pub failure_rate_upper_95: f64,
    /// The slowest measured fall to 10% of nominal among its cycles, µs.
    pub to_10_us_max: Option<f64>,
}

/// (passed, failed, inconclusive, cut not proven, errors) of `cycles`.
fn tally<'a>(cycles: impl Iterator<Item = &'a CycleResult>) -> [u64; 5] {
    let mut t = [0u64; 5];
    for c in cycles {
        let i = match (c.cut_not_proven(), c.report.verdict) {
            (true, _) => 3,
            (_, Verdict::Pass) => 0,
            (_, Verdict::Fail) => 1,
            (_, Verdict::Inconclusive) => 2,
            (_, Verdict::Error) => 4,
        };
        t[i] += 1;
    }
    t
}

fn by_fall_time(cycles: &[CycleResult]) -> Vec<FallTimeGroup> {
    let mut order: Vec<f64> = vec![];
    for ms in cycles.iter().filter_map(|c| c.fall_time_ms) {
        if !order.contains(&ms) {
            order.push(ms);
        }
    }
    order
        .into_iter()
        .map(|ms| {
            let group = || cycles.iter().filter(move |c| c.fall_time_ms == Some(ms));
            let [passed, failed, inconclusive, cut_not_proven, errors] = tally(group());
            FallTimeGroup {
                fall_time_ms: ms,
                cycles: group().count() as u64,
                passed,
                failed,
                inconclusive,
                cut_not_proven,
                errors,
                failure_rate_upper_95: clopper_pearson_upper(failed, passed + failed, 0.05),
                to_10_us_max: group()
                    .filter_map(|c| c.fall.as_ref().and_then(|f| f.to_10_us))
                    .max_by(f64::total_cmp),
            }
        })
        .collect()
}

pub fn summarize(cycles: &[CycleResult]) -> Summary {
    let [passed, failed, inconclusive, cut_not_proven, errors] = tally(cycles.iter());
    let judged = passed + failed;
    let mut windows: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.report.loss_window.as_ref().map(|w| w.ms))
        .collect();
    windows.sort_by(f64::total_cmp);
    Summary {
        format: SUMMARY_FORMAT,
        cycles: cycles.len() as u64,
        passed,
        failed,
        inconclusive,
        cut_not_proven,
        errors,
        failure_rate: if judged == 0 {
            0.0
        } else {
            failed as f64 / judged as f64
        },
        failure_rate_upper_95: clopper_pearson_upper(failed, judged, 0.05),
        method: "exact one-sided Clopper-Pearson, 95%",
        loss_window_ms: (!windows.is_empty()).then(|| {
            [("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("max", 1.0)]
                .into_iter()
                .map(|(k, q)| (k, quantile(&windows, q).unwrap_or(0.0)))
                .collect()
        }),
        lost_records_total: cycles
            .iter()
            .filter_map(|c| c.report.loss_window.as_ref().map(|w| w.records))
            .sum(),
        first_failure_cycle: cycles
            .iter()
            .find(|c| c.report.verdict == Verdict::Fail)
            .map(|c| c.cycle),
        dead_device_cycles: cycles
            .iter()
            .filter(|c| c.report.dead_device.is_some())
            .count() as u64,
        health_noted_cycles: cycles
            .iter()
            .filter(|c| c.health.as_ref().is_some_and(|h| !h.notes.is_empty()))
            .map(|c| c.cycle)
            .collect(),
        plain: String::new(),
        by_fall_time: by_fall_time(cycles),
    }
    .with_plain_sentence()
}

impl Summary {
    fn with_plain_sentence(mut self) -> Summary {
        self.plain =
            crate::verify::plain::campaign_sentence(&crate::verify::plain::CampaignFacts {
                cycles: self.cycles,
                passed: self.passed,
                failed: self.failed,
                lost_records: self.lost_records_total,
                dead_cycles: self.dead_device_cycles,
                upper_95: self.failure_rate_upper_95,
                cut_not_proven: self.cut_not_proven,
            });
        self
    }

    pub fn to_text(&self) -> String {
        use crate::units::{fmt_duration_ms, fmt_duration_us, thousands as n};
        let judged = self.passed + self.failed;
        let mut o = format!(
            "campaign: {} cycle(s): {} passed, {} failed, {} inconclusive, {}{} error(s)\n",
            n(self.cycles),
            n(self.passed),
            n(self.failed),
            n(self.inconclusive),
            if self.cut_not_proven > 0 || !self.by_fall_time.is_empty() {
                format!("{} cut not proven, ", n(self.cut_not_proven))
            } else {
                String::new()
            },
            n(self.errors)
        );
        o += &format!(
            "failure rate: {:.2}% ({} of {} judged cycles); 95% upper bound {:.2}% ({})\n",
            self.failure_rate * 100.0,
            n(self.failed),
            n(judged),
            self.failure_rate_upper_95 * 100.0,
            self.method
        );
        if self.failed == 0 && judged > 0 {
            o += &format!(
                "  with no failure in {} cycles, the drive may still fail up to {:.2}% of cuts (rule of three: 3/n = {:.2}%)\n",
                n(judged),
                self.failure_rate_upper_95 * 100.0,
                300.0 / judged as f64
            );
        }
        if let Some(w) = &self.loss_window_ms {
            o += &format!(
                "loss window before the last ack: min {}, p50 {}, p90 {}, max {}; {} acknowledged record(s) lost in all\n",
                fmt_duration_ms(w["min"]),
                fmt_duration_ms(w["p50"]),
                fmt_duration_ms(w["p90"]),
                fmt_duration_ms(w["max"]),
                n(self.lost_records_total)
            );
        }
        if let Some(c) = self.first_failure_cycle {
            o += &format!("first failure in cycle {c}\n");
        }
        if self.dead_device_cycles > 0 {
            o += &format!(
                "the drive did not come back after {} cut(s)\n",
                n(self.dead_device_cycles)
            );
        }
        if !self.health_noted_cycles.is_empty() {
            let list: Vec<String> = self
                .health_noted_cycles
                .iter()
                .map(|c| c.to_string())
                .collect();
            o += &format!(
                "the drive's health counters noted something in cycle(s) {} (their health.notes in the results file)\n",
                list.join(", ")
            );
        }
        if self.cut_not_proven > 0 {
            o += &format!(
                "{} cycle(s) cut not proven: the rail never fell far enough, so they count as neither pass nor fail\n",
                n(self.cut_not_proven)
            );
        }
        for g in &self.by_fall_time {
            o += &format!(
                "fall time {:>9}: {} cycle(s): {} passed, {} failed, {} inconclusive, {} cut not proven, {} error(s); 95% upper bound {:.2}%{}\n",
                format!("{} ms", g.fall_time_ms),
                n(g.cycles),
                n(g.passed),
                n(g.failed),
                n(g.inconclusive),
                n(g.cut_not_proven),
                n(g.errors),
                g.failure_rate_upper_95 * 100.0,
                g.to_10_us_max
                    .map(|us| format!("; slowest fall to 10%: {}", fmt_duration_us(us)))
                    .unwrap_or_default()
            );
        }
        o += &format!("In plain words: {}\n", self.plain);
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as the string-typed results file wrote it: it must read back and be
    /// written again byte for byte (the results file is the campaign's resume state).
    #[test]
    fn an_old_cycle_line_round_trips_byte_for_byte() {
        let lines = [
            r#"{"format":"plugpull-campaign-cycle/1","cycle":3,"seed":99,"run_id":"00ff","started_at":"2026-01-01T00:00:00+00:00","delay_ms":12.5,"cut":null,"restore":null,"off_ms":1000.0,"acked_records":40,"witness_durable":40,"last_acked":{"stream":0,"seq":39,"offset":159744,"flushed_ns":17},"writer_stopped":"target failed: flush returned EIO","reattach_ms":3.25,"verdict":"FAIL","summary":"2 lost","counts":{"corrupt":0,"intact":38,"lost":2,"misdirected":0,"shorn":0,"stale":0,"superseded":0,"unreadable":0},"loss_window":{"records":2,"bytes":8192,"ms":1.5},"ordering_holes":1,"dead_device":null,"unsafe_shutdowns_delta":1,"error":null,"cycle_ms":2000.0}"#,
            r#"{"format":"plugpull-campaign-cycle/1","cycle":4,"seed":7,"run_id":"","started_at":"x","delay_ms":0.0,"cut":null,"restore":null,"off_ms":0.0,"acked_records":0,"witness_durable":0,"last_acked":null,"writer_stopped":"","reattach_ms":null,"verdict":"ERROR","summary":"","counts":{},"loss_window":null,"ordering_holes":0,"dead_device":null,"unsafe_shutdowns_delta":null,"error":"no acks","cycle_ms":1.0}"#,
        ];
        for line in lines {
            let c: CycleResult = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), line);
        }
    }

    /// The campaign's text groups every count by thousands and gives the loss window and
    /// fall times as spans; the JSON keeps plain numbers.
    #[test]
    fn the_summary_text_separates_thousands() {
        let s = Summary {
            format: "plugpull-campaign/1",
            cycles: 1_200,
            passed: 1_000,
            failed: 150,
            inconclusive: 30,
            cut_not_proven: 0,
            errors: 20,
            failure_rate: 150.0 / 1_150.0,
            failure_rate_upper_95: 0.15,
            method: "exact one-sided Clopper-Pearson, 95%",
            loss_window_ms: Some(
                [
                    ("min", 1.5),
                    ("p50", 24.3),
                    ("p90", 340.0),
                    ("max", 2_400.0),
                ]
                .into_iter()
                .collect(),
            ),
            lost_records_total: 5_214,
            first_failure_cycle: Some(1_017),
            dead_device_cycles: 1_100,
            health_noted_cycles: vec![],
            plain: "p".into(),
            by_fall_time: vec![],
        };
        let text = s.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "campaign: 1,200 cycle(s): 1,000 passed, 150 failed, 30 inconclusive, 20 error(s)",
                "failure rate: 13.04% (150 of 1,150 judged cycles); 95% upper bound 15.00% (exact one-sided Clopper-Pearson, 95%)",
                "loss window before the last ack: min 1.5 ms, p50 24 ms, p90 340 ms, max 2.4 s; 5,214 acknowledged record(s) lost in all",
                "first failure in cycle 1017",
                "the drive did not come back after 1,100 cut(s)",
                "In plain words: p",
            ]
        );
    }
}
