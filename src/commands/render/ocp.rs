//! `verify --format ocp`: the verify report as one OCP test run (`crate::ocp`,
//! docs/ocp.md). Three steps: identify the target, load the acknowledgements, read back
//! and judge; the counts as measurements, each that must be 0 for a PASS with a
//! validator saying so; the verdict as a diagnosis and as the run's result.

use crate::device::identity::DeviceIdentity;
use crate::model::{RecordClass, Verdict};
use crate::ocp::dut::{drive_id, dut_info};
use crate::ocp::{
    Diagnosis, DiagnosisType, Measurement, Output, RunStart, Severity, Status, TestResult,
    ValidatorType,
};
use crate::verify::report::Report;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

/// How the command was run: what `testRunStart` says besides the device under test.
#[derive(Clone, Debug)]
pub struct Invocation {
    /// "plugpull-verify", "plugpull-campaign".
    pub name: &'static str,
    pub command_line: String,
    pub parameters: Map<String, Value>,
    /// When the command started (the `testRunStart` line's time).
    pub started: DateTime<Utc>,
}

impl Invocation {
    /// `name` run now with this process's arguments.
    pub fn now(name: &'static str, parameters: Map<String, Value>) -> Invocation {
        Invocation {
            name,
            command_line: crate::ocp::command_line(std::env::args()),
            parameters,
            started: Utc::now(),
        }
    }

    /// `schemaVersion` and `testRunStart` for the device under test `dut` (`ocp::dut`).
    pub fn start(&self, dut: Value) -> Output {
        let mut o = Output::starting_at(Some(self.started));
        o.run_start(&RunStart {
            name: self.name.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            command_line: self.command_line.clone(),
            parameters: self.parameters.clone(),
            dut_info: dut,
        });
        o.at(None);
        o
    }
}

/// The run's end for a verdict: PASS and FAIL complete; INCONCLUSIVE is NOT_APPLICABLE
/// with status SKIP (the specification allows NOT_APPLICABLE only with SKIP or ERROR:
/// verify ran but could not judge); ERROR (a campaign cycle that went wrong) is ERROR.
pub fn run_end(v: Verdict) -> (Status, TestResult) {
    match v {
        Verdict::Pass => (Status::Complete, TestResult::Pass),
        Verdict::Fail => (Status::Complete, TestResult::Fail),
        Verdict::Inconclusive => (Status::Skip, TestResult::NotApplicable),
        Verdict::Error => (Status::Error, TestResult::NotApplicable),
    }
}

/// A verdict as a diagnosis: PASS, FAIL, else UNKNOWN; `message` says why.
pub fn diagnosis(v: Verdict, message: String, hw: Option<&str>) -> Diagnosis {
    Diagnosis {
        verdict: v.name().into(),
        kind: match v {
            Verdict::Pass => DiagnosisType::Pass,
            Verdict::Fail => DiagnosisType::Fail,
            Verdict::Inconclusive | Verdict::Error => DiagnosisType::Unknown,
        },
        message,
        hardware_info_id: hw.map(str::to_string),
    }
}

/// The count of each record class as a measurement, the failure classes validated
/// equal to 0: what a PASS needs.
pub fn class_counts(count: impl Fn(RecordClass) -> u64, hw: Option<&str>) -> Vec<Measurement> {
    RecordClass::ALL
        .into_iter()
        .map(|c| {
            let m = Measurement::new(&format!("{c}_records"), count(c), "records").of(hw);
            if c.is_failure() {
                m.must(
                    ValidatorType::Equal,
                    0,
                    &format!("no acknowledged record {c} (PASS needs 0)"),
                )
            } else {
                m
            }
        })
        .collect()
}

/// The drive a report is about: the one verify read, else the one the run's writer
/// identified.
fn drive(r: &Report) -> Option<&DeviceIdentity> {
    r.device.as_ref().or(r.run.as_ref().map(|d| &d.device))
}

/// The OCP lines of a device verify's report.
pub fn verify(inv: &Invocation, r: &Report) -> String {
    let drives: Vec<DeviceIdentity> = drive(r).cloned().into_iter().collect();
    let hw_id = drive_id(0);
    let hw = (!drives.is_empty()).then_some(hw_id.as_str());
    let mut o = inv.start(dut_info(&drives, r.run.as_ref().map(|d| d.host.as_str())));

    let s = o.step_start("identify the target");
    if let Some(d) = drives.first() {
        o.measurement(
            &s,
            Measurement::new("target_bytes", d.size_bytes, "bytes").of(hw),
        );
    }
    if let Some(run) = &r.run {
        o.log(&s, Severity::Info, &format!("run {}", run.run_id));
    }
    if let Some(dead) = &r.dead_device {
        o.log(
            &s,
            Severity::Error,
            &format!("the target could not be read: {dead}"),
        );
    }
    if let Some(w) = &r.ram_warning {
        o.log(&s, Severity::Warning, w);
    }
    o.step_end(&s, Status::Complete);

    let s = o.step_start("load the acknowledgements");
    o.measurement(
        &s,
        Measurement::new("acked_records", r.acked_records, "records").must(
            ValidatorType::GreaterThan,
            0,
            "a verdict needs acknowledged records",
        ),
    );
    o.measurement(&s, Measurement::new("acked_bytes", r.acked_bytes, "bytes"));
    o.measurement(
        &s,
        Measurement::new("ack_log_whole", r.ack_log.whole, "").must(
            ValidatorType::Equal,
            true,
            "the ack log proved it holds every acknowledged record",
        ),
    );
    let log = &r.ack_log;
    o.log(
        &s,
        Severity::Info,
        &format!("acks from {}: {}", log.source, log.wholeness),
    );
    for d in &log.damage {
        o.log(&s, Severity::Warning, &format!("ack log damage: {d}"));
    }
    if let Some(w) = &r.writer_end {
        let m = Measurement::new("cut_evidence", w.cut_evidence, "");
        // A rehearsal asks for a verdict without a cut.
        o.measurement(
            &s,
            if w.rehearsal {
                m
            } else {
                m.must(
                    ValidatorType::Equal,
                    true,
                    "the writer stopped the way a power cut stops it",
                )
            },
        );
    }
    o.step_end(&s, Status::Complete);

    let s = o.step_start("read back and judge");
    for m in class_counts(|c| r.counts.get(c.name()).copied().unwrap_or(0), hw) {
        o.measurement(&s, m);
    }
    let zero = |name: &str, v: u64, unit: &str, why: &str| {
        Measurement::new(name, v, unit)
            .must(ValidatorType::Equal, 0, why)
            .of(hw)
    };
    o.measurement(
        &s,
        zero("corrupt_bits", r.corrupt_bits, "bits", "no flipped bit"),
    );
    o.measurement(
        &s,
        zero(
            "ordering_holes",
            r.ordering_holes.count,
            "records",
            "no record lost while a later one survived",
        ),
    );
    let window = r.loss_window.as_ref();
    o.measurement(
        &s,
        Measurement::new("loss_window_ms", window.map_or(0.0, |w| w.ms), "ms")
            .must(ValidatorType::Equal, 0, "nothing lost (0: no loss window)")
            .of(hw),
    );
    o.measurement(
        &s,
        Measurement::new(
            "loss_window_records",
            window.map_or(0, |w| w.records),
            "records",
        )
        .of(hw),
    );
    o.measurement(
        &s,
        Measurement::new("bytes_read", r.bytes_read, "bytes").of(hw),
    );
    o.measurement(&s, Measurement::new("verify_time_ms", r.verify_ms, "ms"));
    for (offset, len, reason) in r.unreadable_ranges.iter().take(MAX_RANGES_LOGGED) {
        o.log(
            &s,
            Severity::Warning,
            &format!("unreadable: {len} bytes at {offset}: {reason}"),
        );
    }
    o.diagnosis(
        &s,
        diagnosis(r.verdict, sentences(&r.summary, &r.plain), hw),
    );
    o.step_end(&s, Status::Complete);

    let (status, result) = run_end(r.verdict);
    o.run_end(status, result);
    o.finish()
}

/// Unreadable ranges logged one by one; their count is always in `unreadable_records`.
const MAX_RANGES_LOGGED: usize = 100;

/// The OCP lines of a run that ended without a report: `symptom` and `message` as an
/// error of the run, its end `status` with NOT_APPLICABLE (ERROR for an error exit,
/// SKIP where no verdict could be given).
pub fn no_report(
    inv: &Invocation,
    target: &str,
    status: Status,
    symptom: &str,
    message: &str,
) -> String {
    let mut o = inv.start(crate::ocp::dut::unidentified(target));
    o.run_error(symptom, message);
    o.run_end(status, TestResult::NotApplicable);
    o.finish()
}

/// `a` and `b` as two sentences.
fn sentences(a: &str, b: &str) -> String {
    let a = a.trim_end();
    if a.ends_with(['.', '!', '?']) || b.is_empty() {
        format!("{a} {b}").trim_end().to_string()
    } else {
        format!("{a}. {b}")
    }
}
