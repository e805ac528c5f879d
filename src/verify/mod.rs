//! `plugpull verify`: read the target back, bypassing the page cache, and judge every
//! acknowledged record against what the witness holds.
//!
//! Why per record and not per location: the witness's list of promises is the truth, and
//! every promise gets exactly one class from the decision table in `classify`. Locations
//! that were legitimately overwritten later (a ring that wrapped, an unacknowledged write
//! that survived) are "superseded", never failures: no false alarms on an honest drive.

pub mod classify;
pub mod distribution;
pub mod judge;
pub mod load;
pub mod medium;
pub mod progress;
pub mod report;
pub mod scan;
pub mod select;
#[cfg(test)]
mod tests;

use crate::device::{Device, FileDevice, identity};
use crate::exit::BoxedError;
use crate::model::RunLog;
use crate::record::RunId;
use crate::witness::validate::ImpossibleRun;
use classify::{RecordClass, classify_record};
pub use judge::dead_device_report;
pub use load::{LoadedRun, load_run, load_run_checked};
use report::{Report, Verdict};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the acks to judge come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckSource {
    /// Fetched from the witness at HOST:PORT.
    Witness(String),
    /// Read from a log file (a witness log or `plugpull fetch` output).
    File(PathBuf),
}

/// Everything `verify` needs to know; the command line's `plugpull verify` arguments.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The block device or file the run wrote to.
    pub target: PathBuf,
    pub acks: AckSource,
    /// The witness's pre-shared key file, to authenticate the acks.
    pub key_file: Option<PathBuf>,
    /// The run to verify; None: the latest run for this drive (see `select`).
    pub run: Option<RunId>,
    /// Verify even when the target is not the drive the run was written to.
    pub allow_identity_mismatch: bool,
    /// Print the report as JSON on stdout.
    pub json: bool,
    /// Only the verdict line.
    pub quiet: bool,
    /// A read slower than this marks the rest of the target unreadable.
    pub read_timeout: Duration,
    /// Read the run's whole region, not just the span its acknowledged records cover.
    pub scan_region: bool,
}

/// Why verify gave no report.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "{} does not exist. Give the path of the device or file the run wrote to; if the drive did not come back after the cut, pass --run RUN_ID (or --acks FILE) to get a dead-device verdict",
        .0.display()
    )]
    TargetMissing(PathBuf),
    #[error("{} does not exist, and run {run} wrote to {written_to}: give that path", .target.display())]
    TargetMissingRunElsewhere {
        target: PathBuf,
        run: RunId,
        written_to: String,
    },
    /// The key file could not be read.
    #[error(transparent)]
    Key(BoxedError),
    #[error("reading acks from {}", .path.display())]
    ReadingAcks {
        path: PathBuf,
        #[source]
        source: BoxedError,
    },
    /// The witness could not be asked or refused the fetch.
    #[error(transparent)]
    Fetch(BoxedError),
    #[error("the ack log is for run {found}, not {asked}")]
    WrongRun { found: RunId, asked: RunId },
    /// Which run, or whether this drive may be judged by it.
    #[error(transparent)]
    Select(#[from] select::SelectError),
    /// The log holds what no writer can produce: no verdict (exit 3).
    #[error(transparent)]
    ImpossibleRun(#[from] ImpossibleRun),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Judges every ack of `log` against `dev`.
pub fn verify_device(dev: Arc<dyn Device>, log: &RunLog, read_timeout: Duration) -> Report {
    verify_device_with_progress(dev, log, read_timeout, false, &|_, _| {})
}

/// `verify_device`, reporting `(bytes_done, bytes_total)` of the scan as it goes.
pub fn verify_device_with_progress(
    dev: Arc<dyn Device>,
    log: &RunLog,
    read_timeout: Duration,
    scan_region: bool,
    progress: &dyn Fn(u64, u64),
) -> Report {
    let t0 = Instant::now();
    let acks = &log.acks;
    let s = &log.descriptor.settings;
    let also = scan_region.then_some((
        s.region_offset,
        s.region_offset.saturating_add(s.region_bytes),
    ));
    let result = scan::scan_with_progress(
        dev,
        log.descriptor.run_id,
        acks,
        read_timeout,
        also,
        progress,
    );
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
    let mut report = judge::judge(acks, &classes, &result.tallies, &result.found_elsewhere);
    if let Some(range) = result.timed_out {
        judge::timed_out(&mut report, acks, &classes, range, read_timeout);
    }
    report.unreadable_ranges = result.unreadable;
    report.bytes_read = result.bytes_read;
    report.verify_ms = t0.elapsed().as_secs_f64() * 1e3;
    report.run = Some(log.descriptor.clone());
    report.note_log_damage(crate::witness::store::log::damage_details(log));
    report
}

/// `plugpull verify`: loads the run, judges the target (or reports it dead), prints the
/// report; the verdict decides the exit code.
pub fn run(o: &VerifyOptions) -> Result<Verdict, VerifyError> {
    if !o.target.exists() && o.run.is_none() && matches!(o.acks, AckSource::Witness(_)) {
        return Err(VerifyError::TargetMissing(o.target.clone()));
    }
    let LoadedRun {
        log,
        source,
        wholeness,
    } = load_run_checked(o)?;
    crate::witness::validate::refuse_impossible_run(&log)?;
    let mut report = if o.target.exists() {
        judge_target(o, &log)?
    } else {
        gone_target(o, &log)?
    };
    report.note_log_wholeness(source, wholeness.whole, wholeness.how);
    print_report(o, &report)?;
    Ok(report.verdict)
}

/// The report for a target that is gone: the run is named explicitly, so a target that
/// was there for the run and is gone now is the "dead device" finding, not a usage error.
fn gone_target(o: &VerifyOptions, log: &RunLog) -> Result<Report, VerifyError> {
    let absolute = std::path::absolute(&o.target).unwrap_or_else(|_| o.target.clone());
    if absolute.display().to_string() != log.descriptor.device.target {
        return Err(VerifyError::TargetMissingRunElsewhere {
            target: o.target.clone(),
            run: log.descriptor.run_id,
            written_to: log.descriptor.device.target.clone(),
        });
    }
    let mut report = dead_device_report(
        log,
        format!(
            "{} does not exist any more (the device did not come back after the cut)",
            o.target.display()
        ),
    );
    report.target = o.target.display().to_string();
    Ok(report)
}

/// The report for a target that is there: checked to be the run's drive, then read
/// back (or reported dead if it cannot be opened).
fn judge_target(o: &VerifyOptions, log: &RunLog) -> Result<Report, VerifyError> {
    let device = identity::identify(&o.target);
    select::check_identity(
        log,
        &o.target,
        &device,
        o.allow_identity_mismatch,
        o.read_timeout,
    )?;
    let mut report = match FileDevice::open_read(&o.target) {
        Ok(dev) => {
            let bar = progress::ScanBar::new(o.quiet);
            let r = verify_device_with_progress(
                Arc::new(dev),
                log,
                o.read_timeout,
                o.scan_region,
                &|d, t| bar.update(d, t),
            );
            bar.finish();
            r
        }
        Err(e) => dead_device_report(log, crate::exit::error_chain(&e)),
    };
    report.target = o.target.display().to_string();
    report.device = Some(device);
    report.ram_warning = crate::device::safety::ram_warning(&o.target);
    if let Some(w) = &report.ram_warning {
        eprintln!("plugpull verify: WARNING: {w}");
    }
    Ok(report)
}

fn print_report(o: &VerifyOptions, report: &Report) -> Result<(), serde_json::Error> {
    if o.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else if o.quiet {
        println!("VERDICT: {} - {}", report.verdict.name(), report.summary);
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}
