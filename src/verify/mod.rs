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
#[cfg(test)]
mod summary_tests;
pub mod temp_log;
#[cfg(test)]
mod tests;
pub mod verdict;

use crate::device::{Device, FileDevice, identity};
use crate::model::{RecordClass, RunLog};
use classify::classify_record;
pub use judge::dead_device_report;
pub use load::{LoadedRun, load_run, load_run_checked};
pub use options::{AckSource, VerifyError, VerifyOptions};
use report::Report;
use std::sync::Arc;
use std::time::{Duration, Instant};
use temp_log::TempLog;

/// Judges every ack of `log` against `dev`, through the engine `plugpull verify` ships
/// (`engine::verify_streamed_run`, the log's acks as its passes).
pub fn verify_device(dev: Arc<dyn Device>, log: &RunLog, read_timeout: Duration) -> Report {
    verify_device_with_progress(dev, log, read_timeout, false, &|_, _| {})
}

/// `verify_device`, reporting `(bytes_done, bytes_total)` of the scan as it goes, within
/// the default budget (callers without the user's options; `plugpull verify` uses
/// [`verify_device_within`]).
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
    verify_device_within(dev, log, read_timeout, scan_region, progress, &budget).unwrap_or_else(
        |e| {
            let mut r = refused_report(log, &e);
            r.superseded_by_runs = evidence::runs_after_the_end(&log.events)
                .iter()
                .map(|r| r.hex())
                .collect();
            r
        },
    )
}

/// [`verify_device_with_progress`] within `budget` (the user's `--memory` and
/// `--work-dir`); the engine's refusal as an error, for `plugpull verify` to show.
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

/// What `verify` found: the report, and the run it judged (for the verdict note to the
/// witness, [`tell_the_witness`], sent after the report is shown).
pub struct Verified {
    pub report: Report,
    pub run: crate::record::RunId,
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
    if let (AckSource::File(path), Some(device)) = (&o.acks, &device) {
        // A log in a witness directory is read with the directory's journal overlaid:
        // streamed from a copy that has it (in TMPDIR, removed after).
        let copy = TempLog::new("overlaid");
        let overlaid =
            crate::witness::store::reader::copy_overlaid(path, &copy.0).map_err(|e| {
                VerifyError::ReadingAcks {
                    path: path.clone(),
                    source: e.into(),
                }
            })?;
        let streamed = match overlaid {
            None => run_streamed(o, device, path, None, None)?,
            Some(journal) => run_streamed(o, device, &copy.0, None, Some((path, journal)))?,
        };
        if let Some(verified) = streamed {
            return Ok(verified);
        }
    }
    let mut fetched = None;
    if let (AckSource::Witness(addr), Some(device)) = (&o.acks, &device) {
        match run_witness_streamed(o, device, addr)? {
            Witnessed::Judged(verified) => return Ok(verified),
            Witnessed::Fetched(log) => fetched = Some(log),
        }
    }
    if let (AckSource::Witness(_), None) = (&o.acks, o.run) {
        // The run may be picked by the stamps on the target (`select::latest_for_target`),
        // a read: the work directory is checked before.
        let log = fetched.as_ref().and_then(Option::as_ref);
        engine::refuse_unusable_work_dir(o, log.map(|l| (&l.descriptor, &l.acks as _)))?;
    }
    let LoadedRun {
        log,
        source,
        wholeness,
    } = load::load_run_identified(o, device.as_ref(), fetched)?;
    refuse_unknown_format(&log.descriptor)?;
    crate::witness::validate::refuse_impossible_run(&log)?;
    engine::refuse_unusable_work_dir(o, Some((&log.descriptor, &log.acks)))?;
    let mut report = match device {
        Some(device) => judge_target(o, device, &log)?,
        None => gone_target(o, &log)?,
    };
    report.note_log_wholeness(source, wholeness.whole, wholeness.how);
    if let Ok(dev) = FileDevice::open_read(&o.target) {
        let mut last = beyond::LastPerStream::default();
        last.add(&log.acks);
        report.note_log_cannot_be_complete(
            beyond::log_cannot_be_complete(&dev, &log.descriptor, &last)
                .map_err(VerifyError::BeyondSample)?,
        );
    }
    report.note_writer_end(&log.events, o.rehearsal);
    Ok(Verified {
        report,
        run: log.descriptor.run_id,
    })
}

/// Refuses a run whose records this build cannot regenerate: a newer writer's format.
/// Judging it anyway would call every damaged sector's bit count wrong, and a run whose
/// every stamp is "unknown version" would read as lost.
fn refuse_unknown_format(d: &crate::model::RunDescriptor) -> Result<(), VerifyError> {
    match crate::record::RunKey::for_version(d.run_id, d.format_version) {
        Some(_) => Ok(()),
        None => Err(VerifyError::UnknownFormat {
            run: d.run_id,
            version: d.format_version,
        }),
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

/// `plugpull verify --witness ADDR` on a target that is there: the fetch reply is
/// streamed into a temporary log file (in the temporary directory, `TMPDIR`; removed
/// after) and judged from it as `--acks FILE` is ([`run_streamed`]), so memory does not
/// grow with the run either. The report is the one `--acks` gives on the file `fetch -o`
/// writes, with the witness named as the source. Otherwise [`run`] takes the case with
/// the whole run in memory, handed the fetch's answer so it never asks again (no run
/// under the drive's key at the witness, the run written to another medium: both
/// searched for the run's stamps; a target that cannot be opened).
fn run_witness_streamed(
    o: &VerifyOptions,
    device: &identity::DeviceIdentity,
    addr: &str,
) -> Result<Witnessed, VerifyError> {
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let sel = match o.run {
        Some(r) => crate::model::RunSelector::Run(r),
        None => crate::model::RunSelector::LatestForDevice(device.key()),
    };
    let tmp = TempLog::new("verify");
    let t0 = Instant::now();
    let fetched = loop {
        let fetched =
            match crate::witness::client::fetch_into_file(addr, &sel, key.as_ref(), &tmp.0) {
                Ok(f) => f,
                Err(crate::witness::client::error::ClientError::NoRunForDevice { .. }) => {
                    return Ok(Witnessed::Fetched(None));
                }
                Err(e) => return Err(VerifyError::Fetch(e.into())),
            };
        // A writer the witness has not heard from for a while is probably gone with its
        // host; the witness decides after its idle timeout. Judging before then would
        // give no verdict (the log could still grow), so wait for it, within reason.
        if !evidence::worth_waiting_for_the_witness(&fetched.events)
            || t0.elapsed() >= WAIT_FOR_THE_WITNESS
        {
            break fetched;
        }
        if !o.quiet && t0.elapsed() < Duration::from_secs(1) {
            eprintln!(
                "plugpull verify: the witness still holds the writer's connection but has \
                 not heard from it for a while; waiting up to {} s for it to see the writer \
                 gone (its --idle-timeout)",
                WAIT_FOR_THE_WITNESS.as_secs()
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    };
    let how = format!(
        "fetched from the witness, which counted {} acks and sent them all{}",
        fetched.acks,
        if key.is_some() {
            " over a connection authenticated with --key-file"
        } else {
            ""
        }
    );
    let source = (format!("witness {addr}"), how);
    if let Some(verified) = run_streamed(o, device, &tmp.0, Some(source), None)? {
        return Ok(Witnessed::Judged(verified));
    }
    let (log, _) = crate::witness::store::reader::read_log_file_checked(&tmp.0, key.as_ref())
        .map_err(|e| VerifyError::ReadingAcks {
            path: tmp.0.clone(),
            source: e.into(),
        })?;
    Ok(Witnessed::Fetched(Some(log)))
}

/// What `verify --witness` made of its one fetch. One value per verify, moved once: its
/// size does not matter.
#[allow(clippy::large_enum_variant)]
enum Witnessed {
    /// The run was judged from the fetch streamed to a file.
    Judged(Verified),
    /// The run fetched (None: the witness has no run under the drive's key), for the
    /// path that holds the run in memory.
    Fetched(Option<RunLog>),
}

/// How long `verify --witness` waits for the witness to see a silent writer gone: past
/// the witness's default `--idle-timeout` (60 s).
const WAIT_FOR_THE_WITNESS: Duration = Duration::from_secs(75);

/// `plugpull verify --acks FILE` on a target that is there and is the run's drive: the
/// acks are streamed from the file, never held (`scale`), so a run of 100 M acks fits in
/// a region's worth of memory. None: this case needs the whole log in memory (a log in a
/// witness directory, read with its journal; a target that is not the run's drive by
/// identity, searched for the run's stamps; a target that cannot be opened), which
/// [`run`] then takes. `source`: the source and wholeness to report instead of the
/// file's (a witness's fetch streamed into it).
fn run_streamed(
    o: &VerifyOptions,
    device: &identity::DeviceIdentity,
    path: &std::path::Path,
    source: Option<(String, String)>,
    copied_from: Option<(&std::path::Path, Vec<crate::model::WitnessEvent>)>,
) -> Result<Option<Verified>, VerifyError> {
    if !crate::witness::store::reader::streamable(path) {
        return Ok(None);
    }
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let reading = |e: crate::witness::store::error::StoreError| VerifyError::ReadingAcks {
        path: path.to_path_buf(),
        source: e.into(),
    };
    let d = crate::witness::store::log::read_descriptor(
        &crate::witness::store::storage::FsStorage,
        path,
    )
    .map_err(reading)?;
    refuse_unknown_format(&d)?;
    if let Some(r) = o.run
        && d.run_id != r
    {
        return Err(VerifyError::WrongRun {
            found: d.run_id,
            asked: r,
        });
    }
    let file_passes = scale::FilePasses {
        path,
        key: key.as_ref(),
        last: Default::default(),
    };
    let passes = LastOfEachStream {
        inner: &file_passes,
        last: Default::default(),
    };
    engine::refuse_unusable_work_dir(o, Some((&d, &passes)))?;
    let Ok(dev) = FileDevice::open_read(&o.target) else {
        return Ok(None);
    };
    if !d.device.same_medium(device) {
        // Another medium (a copy of the drive, or the drive under a new name): judged
        // only if it carries the run's stamps, looked for where the acks say, gathered
        // in a pass so the acks are never held.
        // The same pass checks the log: one no writer could produce is refused for that
        // first, whatever the target.
        let mut points = medium::RunPoints::default();
        let mut checks = scale::Painted::new(&d, None);
        scale::AckPasses::pass(&passes, &mut |chunk| {
            points.add(chunk);
            checks.add_chunk(chunk);
        })?;
        scale::refuse_impossible(&d, checks)?;
        select::check_identity_at(
            &d,
            points.finish(&d),
            &o.target,
            device,
            o.allow_identity_mismatch,
            o.read_timeout,
        )?;
    }
    let dev: Arc<dyn Device> = Arc::new(dev);
    let judge = |run: scan::ScanRun| {
        let bar = progress::ScanBar::new(o.quiet);
        let scaled = engine::verify_streamed_run(
            dev.clone(),
            &d,
            run,
            &passes,
            o.read_timeout,
            o.scan_region,
            &|d, t| bar.update(d, t),
            &o.budget,
        );
        bar.finish();
        scaled.map(|s| s.report)
    };
    let mut report = judge(scan::ScanRun::from(&d))?;
    // The runs that came after this one are in the log's last events, read by the pass
    // just made: stamps of theirs make records of this run look stale, so the rare
    // report with stale records is judged again knowing them.
    let later = {
        let last = file_passes.last.borrow();
        let (log, _) = last.as_ref().expect("verify read the log");
        evidence::runs_after_the_end(&log.events)
    };
    if report
        .counts
        .get(RecordClass::Stale.name())
        .copied()
        .unwrap_or(0)
        > 0
        && !later.is_empty()
    {
        report = judge(scan::ScanRun::with_later_runs(&d, &later))?;
        report.superseded_by_runs = later.iter().map(|r| r.hex()).collect();
    }
    let (mut log, wholeness) = file_passes.last.take().expect("verify read the log");
    // A copy of a witness directory's log: named as the log, the journal's damage with
    // the log's own.
    let shown = match copied_from {
        Some((original, journal)) => {
            log.events.extend(journal);
            original
        }
        None => path,
    };
    report.note_log_damage(crate::witness::store::checker::damage_details(&log));
    report.target = o.target.display().to_string();
    report.device = Some(device.clone());
    report.ram_warning = crate::device::safety::ram_warning(&o.target);
    match source {
        Some((name, how)) => report.note_log_wholeness(name, wholeness.whole, how),
        None => {
            report.note_log_wholeness(shown.display().to_string(), wholeness.whole, wholeness.how)
        }
    }
    report.note_log_cannot_be_complete(
        beyond::log_cannot_be_complete(dev.as_ref(), &d, &passes.last.borrow())
            .map_err(VerifyError::BeyondSample)?,
    );
    report.note_writer_end(&log.events, o.rehearsal);
    Ok(Some(Verified {
        report,
        run: d.run_id,
    }))
}

/// Ack passes that also keep each stream's last ack (of the latest pass), for
/// `beyond::log_cannot_be_complete`.
struct LastOfEachStream<'a> {
    inner: &'a dyn scale::AckPasses,
    last: std::cell::RefCell<beyond::LastPerStream>,
}

impl scale::AckPasses for LastOfEachStream<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[crate::model::Ack])) -> Result<(), VerifyError> {
        let mut last = beyond::LastPerStream::default();
        self.inner.pass(&mut |chunk| {
            last.add(chunk);
            sink(chunk)
        })?;
        *self.last.borrow_mut() = last;
        Ok(())
    }

    fn ack_count_hint(&self) -> Option<u64> {
        self.inner.ack_count_hint()
    }
}

/// The report for a target that is gone: the run is named explicitly, so a target that
/// was there for the run and is gone now is the "dead device" finding, not a usage error.
fn gone_target(o: &VerifyOptions, log: &RunLog) -> Result<Report, VerifyError> {
    let absolute = std::path::absolute(&o.target).unwrap_or_else(|_| o.target.clone());
    if absolute.display().to_string() != log.descriptor.device.target {
        return Err(VerifyError::TargetMissingRunElsewhere {
            target: o.target.clone(),
            run: log.descriptor.run_id,
            written_to: crate::model::peer_text::shown(&log.descriptor.device.target).into_owned(),
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
fn judge_target(
    o: &VerifyOptions,
    device: identity::DeviceIdentity,
    log: &RunLog,
) -> Result<Report, VerifyError> {
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
            let r = verify_device_within(
                Arc::new(dev),
                log,
                o.read_timeout,
                o.scan_region,
                &|d, t| bar.update(d, t),
                &o.budget,
            );
            bar.finish();
            r?
        }
        Err(e) => dead_device_report(log, crate::exit::error_chain(&e)),
    };
    report.target = o.target.display().to_string();
    report.device = Some(device);
    report.ram_warning = crate::device::safety::ram_warning(&o.target);
    Ok(report)
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
