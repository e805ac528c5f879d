//! `plugpull verify`: read the target back, bypassing the page cache, and judge every
//! acknowledged record against what the witness holds.
//!
//! Why per record and not per location: the witness's list of promises is the truth, and
//! every promise gets exactly one class from the decision table in `classify`. Locations
//! that were legitimately overwritten later (a ring that wrapped, an unacknowledged write
//! that survived) are "superseded", never failures: no false alarms on an honest drive.

pub mod classify;
pub mod report;
pub mod scan;

use crate::ack::{Ack, RunLog, RunSelector};
use crate::cli::VerifyArgs;
use crate::device::{Device, FileDevice, identity};
use anyhow::{Context, Result, bail};
use classify::{RecordClass, classify_record};
use report::{Finding, LossWindow, MAX_FINDINGS, OrderingHoles, REPORT_FORMAT, Report, Verdict};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Judges every ack of `log` against `dev`.
pub fn verify_device(dev: Arc<dyn Device>, log: &RunLog, read_timeout: Duration) -> Report {
    let t0 = Instant::now();
    let acks = &log.acks;
    let result = scan::scan(dev, log.descriptor.run_id, acks, read_timeout);
    let classes: Vec<RecordClass> = acks
        .iter()
        .zip(&result.tallies)
        .map(|(a, t)| {
            classify_record(
                t,
                result
                    .found_elsewhere
                    .contains_key(&(a.record.stream, a.record.seq)),
            )
        })
        .collect();
    let mut report = judge(acks, &classes, &result.tallies, &result.found_elsewhere);
    report.unreadable_ranges = result.unreadable;
    report.bytes_read = result.bytes_read;
    report.verify_ms = t0.elapsed().as_secs_f64() * 1e3;
    report.run = Some(log.descriptor.clone());
    report
}

/// Counts, loss window, ordering holes and the verdict from per-record classes.
fn judge(
    acks: &[Ack],
    classes: &[RecordClass],
    tallies: &[classify::SectorTally],
    elsewhere: &std::collections::HashMap<(u16, u64), u64>,
) -> Report {
    let mut counts = Report::counts_zero();
    for c in classes {
        *counts.get_mut(c.name()).unwrap() += 1;
    }
    let last_ack_ns = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
    let newest_survivor = acks
        .iter()
        .zip(classes)
        .filter(|(_, c)| **c == RecordClass::Intact)
        .map(|(a, _)| a.record.write_time_ns)
        .max();
    let mut findings = vec![];
    let (mut lost_records, mut lost_bytes, mut earliest_lost_ns, mut holes, mut bits) =
        (0u64, 0u64, u64::MAX, 0u64, 0u64);
    for ((a, c), t) in acks.iter().zip(classes).zip(tallies) {
        bits += t.corrupt_bits;
        if !c.is_failure() {
            continue;
        }
        lost_records += 1;
        lost_bytes += a.record.len_bytes();
        earliest_lost_ns = earliest_lost_ns.min(a.flushed_ns);
        let hole = newest_survivor.is_some_and(|s| s > a.flushed_ns);
        holes += hole as u64;
        if findings.len() < MAX_FINDINGS {
            let sectors = [
                ("intact", t.intact),
                ("superseded", t.superseded),
                ("old", t.old),
                ("blank", t.blank),
                ("foreign", t.foreign),
                ("corrupt", t.corrupt),
                ("misplaced", t.misplaced),
                ("unreadable", t.unreadable),
            ]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
            findings.push(Finding {
                class: *c,
                stream: a.record.stream,
                seq: a.record.seq,
                offset: a.record.offset,
                len_bytes: a.record.len_bytes(),
                submitted_ns: a.record.write_time_ns,
                flushed_ns: a.flushed_ns,
                acked_ms_before_last_ack: last_ack_ns.saturating_sub(a.flushed_ns) as f64 / 1e6,
                sectors,
                corrupt_bits: (t.corrupt_bits > 0).then_some(t.corrupt_bits),
                found_at: elsewhere
                    .get(&(a.record.stream, a.record.seq))
                    .copied()
                    .filter(|_| *c == RecordClass::Misdirected),
                ordering_hole: hole,
            });
        }
    }
    let (verdict, summary) = if acks.is_empty() {
        (
            Verdict::Inconclusive,
            "the witness holds no acknowledged records for this run, so there is nothing to check"
                .to_string(),
        )
    } else if lost_records > 0 {
        (
            Verdict::Fail,
            format!(
                "{lost_records} of {} acknowledged records did not survive intact",
                acks.len()
            ),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "all {} acknowledged records survived (intact or legitimately overwritten)",
                acks.len()
            ),
        )
    };
    Report {
        format: REPORT_FORMAT,
        verdict,
        summary,
        counts,
        acked_records: acks.len() as u64,
        acked_bytes: acks.iter().map(|a| a.record.len_bytes()).sum(),
        corrupt_bits: bits,
        loss_window: (lost_records > 0).then(|| LossWindow {
            records: lost_records,
            bytes: lost_bytes,
            ms: last_ack_ns.saturating_sub(earliest_lost_ns) as f64 / 1e6,
        }),
        ordering_holes: OrderingHoles {
            count: holes,
            newest_survivor_submitted_ns: newest_survivor,
        },
        dead_device: None,
        unreadable_ranges: vec![],
        findings_truncated: lost_records as usize > findings.len(),
        findings,
        target: String::new(),
        device: None,
        run: None,
        bytes_read: 0,
        verify_ms: 0.0,
        plugpull_version: env!("CARGO_PKG_VERSION"),
    }
}

/// A report for a target that cannot be opened or read at all.
pub fn dead_device_report(log: &RunLog, why: String) -> Report {
    let classes = vec![RecordClass::Unreadable; log.acks.len()];
    let tallies: Vec<_> = log
        .acks
        .iter()
        .map(|a| classify::SectorTally {
            unreadable: a.record.sectors,
            ..Default::default()
        })
        .collect();
    let mut r = judge(&log.acks, &classes, &tallies, &Default::default());
    r.verdict = if log.acks.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Fail
    };
    r.summary = format!("the device is dead: {why}");
    r.dead_device = Some(why);
    r.run = Some(log.descriptor.clone());
    r
}

/// Loads the run's acks from a log file or the witness.
pub fn load_run(a: &VerifyArgs) -> Result<RunLog> {
    let run = match &a.run {
        Some(r) => Some(
            crate::record::RunId::parse(r)
                .with_context(|| format!("--run '{r}' is not a run id (32 hex digits)"))?,
        ),
        None => None,
    };
    let log = if let Some(path) = &a.acks {
        crate::ack::log::read_log_file(path)
            .with_context(|| format!("reading acks from {}", path.display()))?
    } else {
        let witness = a
            .witness
            .as_deref()
            .expect("clap requires --witness or --acks");
        let sel = match run {
            Some(r) => RunSelector::Run(r),
            None => RunSelector::LatestForDevice(identity::identify(&a.target).key()),
        };
        let key = crate::ack::auth::load_key(a.key_file.as_deref())?;
        crate::ack::client::fetch_with_key(witness, &sel, key.as_ref())?
    };
    if let Some(r) = run {
        if log.descriptor.run_id != r {
            bail!("the ack log is for run {}, not {r}", log.descriptor.run_id);
        }
    }
    Ok(log)
}

pub fn run(a: VerifyArgs) -> Result<i32> {
    let log = load_run(&a)?;
    if !a.target.exists() {
        bail!(
            "{} does not exist: give the path of the device or file the run wrote to (run {} wrote to {})",
            a.target.display(),
            log.descriptor.run_id,
            log.descriptor.device.target
        );
    }
    let device = identity::identify(&a.target);
    let mut report = match FileDevice::open_read(&a.target) {
        Ok(dev) => verify_device(Arc::new(dev), &log, a.read_timeout),
        Err(e) => dead_device_report(&log, format!("{e:#}")),
    };
    report.target = a.target.display().to_string();
    report.device = Some(device);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if a.quiet {
        println!("VERDICT: {} - {}", report.verdict.name(), report.summary);
    } else {
        print!("{}", report.to_text());
    }
    Ok(report.verdict.exit_code())
}
