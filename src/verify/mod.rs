//! `plugpull verify`: read the target back, bypassing the page cache, and judge every
//! acknowledged record against what the witness holds.
//!
//! Why per record and not per location: the witness's list of promises is the truth, and
//! every promise gets exactly one class from the decision table in `classify`. Locations
//! that were legitimately overwritten later (a ring that wrapped, an unacknowledged write
//! that survived) are "superseded", never failures: no false alarms on an honest drive.

pub mod beyond;
pub mod budget;
pub mod classify;
pub mod distribution;
pub mod engine;
pub mod evidence;
pub mod gone;
pub mod judge;
pub mod load;
pub mod medium;
pub mod options;
mod paint;
pub mod partition;
pub mod plain;
pub mod progress;
pub mod report;
pub mod scale;
#[cfg(test)]
mod scale_tests;
pub mod scan;
pub mod select;
mod slots;
mod streamed;
#[cfg(test)]
mod summary_tests;
pub mod temp_log;
#[cfg(test)]
mod tests;
pub mod unacked;
pub mod verdict;
mod witnessed;

use crate::device::{Device, identity};
use crate::model::{RecordClass, RunLog};
use classify::classify_record;
pub use judge::dead_device_report;
pub use load::{LoadedRun, load_run, load_run_checked};
pub use options::{AckSource, VerifyError, VerifyOptions};
use report::Report;
use std::sync::Arc;
use std::time::Duration;
pub use streamed::Verified;
use temp_log::TempLog;

/// Judges every ack of `log` against `dev`, through the engine `plugpull verify` ships
/// (`engine::verify_streamed_run`, the log's acks as its passes).
pub fn verify_device(dev: Arc<dyn Device>, log: &RunLog, read_timeout: Duration) -> Report {
    verify_device_with_progress(dev, log, read_timeout, false, &|_, _| {})
}

/// `verify_device`, reporting `(bytes_done, bytes_total)` of the scan as it goes, within
/// the default budget: for the callers that hold a run's acks (replay, tests);
/// `plugpull verify` and the cycles stream theirs from a file.
///
/// A log no writer could produce gets no verdict (as `plugpull verify` refuses it): the
/// report is INCONCLUSIVE and says why, since the callers (a campaign's cycle, the
/// agent, a replay) record a report rather than stop on an error.
pub fn verify_device_with_progress(
    dev: Arc<dyn Device>,
    log: &RunLog,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    let budget = budget::Budget::default();
    verify_device_within(dev, log, read_timeout, scan_region, progress, &budget)
        .unwrap_or_else(|e| refused_with_later_runs(log, &e))
}

/// [`verify_device`] for a caller that must stop rather than record a report when verify
/// could not read at all (its read buffers could not be had): `plugpull replay`, which
/// compares verdicts, would otherwise count a machine short of memory as verify
/// disagreeing with the log.
pub fn verify_device_or_no_reads(
    dev: Arc<dyn Device>,
    log: &RunLog,
    read_timeout: Duration,
) -> Result<Report, std::io::Error> {
    let budget = budget::Budget::default();
    match verify_device_within(dev, log, read_timeout, false, &|_, _| {}, &budget) {
        Ok(r) => Ok(r),
        Err(VerifyError::ReadBuffers(e)) => Err(e),
        Err(e) => Ok(refused_with_later_runs(log, &e)),
    }
}

/// [`refused_report`], naming the runs begun after this one ended.
fn refused_with_later_runs(log: &RunLog, e: &VerifyError) -> Report {
    let mut r = refused_report(log, e);
    r.superseded_by_runs = evidence::runs_after_the_end(&log.events)
        .iter()
        .map(|r| r.hex())
        .collect();
    r
}

/// [`verify_device_with_progress`] within `budget`; the engine's refusal as an error.
pub fn verify_device_within(
    dev: Arc<dyn Device>,
    log: &RunLog,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
    budget: &budget::Budget,
) -> Result<Report, VerifyError> {
    let later = evidence::runs_after_the_end(&log.events);
    let run = scan::ScanRun::with_later_runs(&log.descriptor, &later);
    let mut report = engine::verify_streamed_run(
        dev,
        &log.descriptor,
        run,
        &log.acks,
        read_timeout,
        scan_region,
        progress,
        budget,
    )?
    .report;
    report.superseded_by_runs = later.iter().map(|r| r.hex()).collect();
    report.note_log_damage(crate::witness::store::checker::damage_details(log));
    Ok(report)
}

/// The report on `log` when the engine gave no judgment (`e`: a log no writer could
/// produce, one that changed between its passes, one that could not be read): counted
/// as a dead device's are (every ack named, none read; the log's damage noted), then
/// the verdict withheld, since the acks themselves are in doubt.
pub fn refused_report(log: &RunLog, e: &VerifyError) -> Report {
    let why = crate::exit::error_chain(e);
    let mut r = dead_device_report(log, why.clone());
    r.dead_device = None;
    r.loss_window = None;
    r.facts.dead_device = None;
    r.facts.refused = Some(why);
    r.conclude();
    r
}

/// [`refused_report`] on run `d` of `acked` acks that are not held (a fetched run
/// judged from its file): the acks are counted, none named, since none was judged.
pub fn refused_report_of(d: &crate::model::RunDescriptor, acked: u64, e: &VerifyError) -> Report {
    let log = RunLog {
        files: Default::default(),
        descriptor: d.clone(),
        acks: vec![],
        events: vec![],
    };
    let mut r = refused_report(&log, e);
    r.acked_records = acked;
    r.facts.acked = acked;
    r.conclude();
    r
}

/// The report (and each record's class) from what a scan found for each ack: the
/// classify and judge half of [`verify_device`], for callers that scan in pieces
/// (`scan::scan_selected`; `plugpull replay` keeps the tallies of records nothing
/// touched since the last state it judged).
pub fn judge_tallies(
    acks: &[crate::model::Ack],
    tallies: &[classify::SectorTally],
    found_elsewhere: &judge::FoundElsewhere,
) -> (Report, Vec<RecordClass>) {
    let classes: Vec<RecordClass> = acks
        .iter()
        .zip(tallies)
        .map(|(a, t)| {
            classify_record(
                t,
                found_elsewhere.contains_key(&(a.record.stream, a.record.seq)),
            )
        })
        .collect();
    let report = judge::judge(acks, &classes, tallies, found_elsewhere);
    (report, classes)
}

/// `plugpull verify`: loads the run, judges the target (or reports it dead) and returns
/// the report; the command renders it, then tells the witness. The verdict decides the
/// exit code.
pub fn run(o: &VerifyOptions) -> Result<Verified, VerifyError> {
    if !o.target.exists() && o.run.is_none() && matches!(o.acks, AckSource::Witness(_)) {
        return Err(VerifyError::TargetMissing(o.target.clone()));
    }
    // The one identification of the target: every step below is given it.
    let device = o.target.exists().then(|| identify_target(&o.target));
    match &o.acks {
        AckSource::File(path) => {
            // A log in a witness directory is read with the directory's journal
            // overlaid: streamed from a copy that has it (in TMPDIR, removed after).
            let copy = TempLog::new("overlaid");
            let overlaid =
                crate::witness::store::reader::copy_overlaid(path, &copy.0).map_err(|e| {
                    VerifyError::ReadingAcks {
                        path: path.clone(),
                        source: e.into(),
                    }
                })?;
            match overlaid {
                None => streamed::run_streamed(o, device.as_ref(), path, None, None),
                Some(journal) => {
                    streamed::run_streamed(o, device.as_ref(), &copy.0, None, Some((path, journal)))
                }
            }
        }
        AckSource::Witness(addr) => witnessed::run_witnessed(o, device.as_ref(), addr),
    }
}

/// Tells the witness the verdict on `run` (when the acks came from one), so `plugpull
/// runs` shows which runs were verified. A witness that cannot take it costs a warning,
/// never the verdict: the note is for people, the verdict stands on the acks and the
/// drive. Called after the report is shown, so a slow witness never delays it.
pub fn tell_the_witness(o: &VerifyOptions, run: crate::record::RunId, report: &Report) {
    let AckSource::Witness(addr) = &o.acks else {
        return;
    };
    let mark = crate::wire::msg::VerdictMark {
        run_id: run.hex(),
        verdict: report.verdict.name().to_string(),
        failing: report.to_summary().counts.failing(),
        target: report.target.clone(),
        verified_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let key = match crate::wire::auth::load_key(o.key_file.as_deref()) {
        Ok(k) => k,
        Err(_) => return,
    };
    if let Err(e) = crate::witness::client::record_verdict(addr, key.as_ref(), &mark) {
        eprintln!(
            "plugpull verify: note: the verdict stands, but the witness did not record it \
             (`plugpull runs` will show this run as not verified): {}",
            crate::exit::error_chain(&e)
        );
    }
}

/// Identifies the target: once per verify (`identifications` counts them in tests).
fn identify_target(target: &std::path::Path) -> identity::DeviceIdentity {
    #[cfg(test)]
    IDENTIFIED.with(|n| n.set(n.get() + 1));
    identity::identify(target)
}

#[cfg(test)]
thread_local! {
    static IDENTIFIED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// How many times this thread identified a target.
#[cfg(test)]
pub(crate) fn identifications() -> u32 {
    IDENTIFIED.with(|n| n.get())
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod run_tests;
