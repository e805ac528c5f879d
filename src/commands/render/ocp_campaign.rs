//! `campaign --format ocp`: the campaign as one OCP test run (`crate::ocp`,
//! docs/ocp.md): a step per cycle of the results file (resumed cycles included) with its
//! verdict as a diagnosis and its counts as measurements, then a step with the summary.
//! Printed when the campaign ends, as the text and JSON summaries are: each cycle's
//! lines carry the times the results file has for it (its start, and its start plus its
//! length for its end), not the time they are printed.

use super::ocp::{Invocation, class_counts, diagnosis, run_end};
use crate::campaign::Finished;
use crate::campaign::results::CycleResult;
use crate::device::identity::DeviceIdentity;
use crate::model::Verdict;
use crate::ocp::dut::{drive_id, dut_info};
use crate::ocp::{Measurement, Output, Status, ValidatorType};
use chrono::{DateTime, TimeDelta, Utc};

/// The OCP lines of a finished campaign whose verdict (the command's exit status) is
/// `verdict`.
pub fn campaign(inv: &Invocation, f: &Finished, verdict: Verdict) -> String {
    let drives = drives(&f.cycles);
    let mut inv = inv.clone();
    if let Some(t) = time(&f.header.started_at) {
        inv.started = t;
    }
    inv.parameters.insert("seed".into(), f.header.seed.into());
    inv.parameters
        .insert("config".into(), f.header.config.clone());
    let mut o = inv.start(dut_info(&drives, None));
    for c in &f.cycles {
        let hw = device(c)
            .and_then(|d| drives.iter().position(|x| same(x, &d)))
            .map(drive_id);
        cycle(&mut o, c, hw.as_deref());
    }
    o.at(None);
    summary(&mut o, f, verdict);
    let (status, result) = run_end(verdict);
    o.run_end(status, result);
    o.finish()
}

fn cycle(o: &mut Output, c: &CycleResult, hw: Option<&str>) {
    let start = time(&c.started_at);
    o.at(start);
    // A fleet's drives share each cycle number, and drives of one model one hardware
    // id: the step names its drive, or a reader cannot tell which one failed.
    let s = o.step_start(&match &c.drive {
        Some(d) => format!("cycle {}: {d}", c.cycle),
        None => format!("cycle {}", c.cycle),
    });
    let r = &c.report;
    let ms = |name: &str, v: f64| Measurement::new(name, v, "ms");
    o.measurement(&s, ms("cut_delay_ms", c.delay_ms));
    o.measurement(&s, ms("off_ms", c.off_ms));
    if let Some(v) = c.reattach_ms {
        o.measurement(&s, ms("reattach_ms", v).of(hw));
    }
    o.measurement(
        &s,
        Measurement::new("acked_records", c.acked_records, "records"),
    );
    o.measurement(
        &s,
        Measurement::new("witness_durable_records", c.witness_durable, "records"),
    );
    if let Some(p) = c.cut_proven {
        o.measurement(
            &s,
            Measurement::new("cut_proven", p, "").must(
                ValidatorType::Equal,
                true,
                "the cut is proven",
            ),
        );
    }
    if let Some(d) = c.unsafe_shutdowns_delta {
        o.measurement(
            &s,
            Measurement::new("unsafe_shutdowns_delta", d, "")
                .must(
                    ValidatorType::Equal,
                    1,
                    "the drive counted one unsafe shutdown",
                )
                .of(hw),
        );
    }
    match &c.error {
        Some(e) => {
            o.at(end(start, c.cycle_ms));
            o.step_error(&s, "cycle-error", e);
            o.step_end(&s, Status::Error);
        }
        None => {
            for m in class_counts(|k| r.counts.get(k), hw) {
                o.measurement(&s, m);
            }
            o.measurement(
                &s,
                Measurement::new("ordering_holes", r.ordering_holes, "records")
                    .must(
                        ValidatorType::Equal,
                        0,
                        "no record lost while a later one survived",
                    )
                    .of(hw),
            );
            let w = r.loss_window.as_ref();
            o.measurement(
                &s,
                Measurement::new("loss_window_ms", w.map_or(0.0, |w| w.ms), "ms")
                    .must(ValidatorType::Equal, 0, "nothing lost (0: no loss window)")
                    .of(hw),
            );
            o.measurement(&s, Measurement::new("cycle_ms", c.cycle_ms, "ms"));
            o.at(end(start, c.cycle_ms));
            o.diagnosis(&s, diagnosis(r.verdict, r.summary.clone(), hw));
            o.step_end(&s, Status::Complete);
        }
    }
}

fn summary(o: &mut Output, f: &Finished, verdict: Verdict) {
    let s = o.step_start("campaign summary");
    let sum = &f.summary;
    let n = |name: &str, v: u64| Measurement::new(name, v, "cycles");
    o.measurement(&s, n("cycles", sum.cycles));
    o.measurement(&s, n("passed_cycles", sum.passed));
    o.measurement(
        &s,
        n("failed_cycles", sum.failed).must(ValidatorType::Equal, 0, "no cycle failed"),
    );
    o.measurement(&s, n("inconclusive_cycles", sum.inconclusive));
    o.measurement(&s, n("cut_not_proven_cycles", sum.cut_not_proven));
    o.measurement(
        &s,
        n("error_cycles", sum.errors).must(ValidatorType::Equal, 0, "no cycle went wrong"),
    );
    o.measurement(
        &s,
        Measurement::new("lost_records_total", sum.lost_records_total, "records"),
    );
    o.measurement(
        &s,
        Measurement::new("failure_rate", sum.failure_rate, "ratio"),
    );
    o.measurement(
        &s,
        Measurement::new("failure_rate_upper_95", sum.failure_rate_upper_95, "ratio"),
    );
    o.diagnosis(&s, diagnosis(verdict, sum.plain.clone(), None));
    o.step_end(&s, Status::Complete);
}

/// The drives the cycles' verify reports identified, each once, in the order first seen.
fn drives(cycles: &[CycleResult]) -> Vec<DeviceIdentity> {
    let mut out: Vec<DeviceIdentity> = vec![];
    for d in cycles.iter().filter_map(device) {
        if !out.iter().any(|x| same(x, &d)) {
            out.push(d);
        }
    }
    out
}

fn device(c: &CycleResult) -> Option<DeviceIdentity> {
    serde_json::from_value(c.shown.device.clone()?).ok()
}

/// The same drive: the same model, serial, firmware and path (a drive found again after
/// a cut may come back with another kernel name).
fn same(a: &DeviceIdentity, b: &DeviceIdentity) -> bool {
    (&a.model, &a.serial, &a.firmware, &a.target) == (&b.model, &b.serial, &b.firmware, &b.target)
}

fn time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn end(start: Option<DateTime<Utc>>, ms: f64) -> Option<DateTime<Utc>> {
    start.map(|t| t + TimeDelta::microseconds((ms * 1000.0) as i64))
}
