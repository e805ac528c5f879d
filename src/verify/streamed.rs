//! `plugpull verify` on a log file: the acks streamed from it at each pass of the engine,
//! never held, whatever became of the target (the run's drive, a copy of it, a drive
//! that cannot be opened, one that is not there any more).
//!
//! Why every case here: a run held whole costs about 40 bytes an ack before the engine
//! starts, so a case that loaded it (a dead drive, a drive found by its stamps) would
//! need tens of gigabytes for a long run on a large drive while the others keep to the
//! budget. A gone drive is judged by the same engine, on a stand-in whose every read
//! fails (`gone`).

use super::options::{VerifyError, VerifyOptions};
use super::report::Report;
use super::{beyond, engine, evidence, gone, medium, progress, scale, scan, select};
use crate::device::{Device, FileDevice, identity::DeviceIdentity};
use crate::model::{Ack, RunDescriptor, WitnessEvent};
use std::path::Path;
use std::sync::Arc;

/// What `verify` found: the report, and the run it judged (for the verdict note to the
/// witness, `verify::tell_the_witness`, sent after the report is shown).
pub struct Verified {
    pub report: Report,
    pub run: crate::record::RunId,
}

/// Judges the target of `o` (identified as `device`; None: it is not there) against the
/// acks of the log at `path`. `source`: the source and wholeness to report instead of
/// the file's (a witness's fetch streamed into it); `copied_from`: the log this one is a
/// copy of, with its journal's events (a log in a witness directory).
pub(super) fn run_streamed(
    o: &VerifyOptions,
    device: Option<&DeviceIdentity>,
    path: &Path,
    source: Option<(String, String)>,
    copied_from: Option<(&Path, Vec<WitnessEvent>)>,
) -> Result<Verified, VerifyError> {
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
    let (mut report, dev) = match device {
        None => (gone_target(o, &d, &passes)?, None),
        Some(device) => {
            check_identity(o, &d, &passes, device)?;
            match FileDevice::open_read(&o.target) {
                Ok(dev) => {
                    let dev: Arc<dyn Device> = Arc::new(dev);
                    let r = judge_target(o, &d, &passes, &file_passes, dev.clone())?;
                    (r, Some(dev))
                }
                Err(e) => {
                    let why = crate::exit::error_chain(&e);
                    let r =
                        gone::verify_gone(&d, scan::ScanRun::from(&d), &passes, why, &o.budget)?;
                    (r, None)
                }
            }
        }
    };
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
    if let Some(device) = device {
        report.device = Some(device.clone());
        report.ram_warning = crate::device::safety::ram_warning(&o.target);
    }
    match source {
        Some((name, how)) => report.note_log_wholeness(name, wholeness.whole, how),
        None => {
            report.note_log_wholeness(shown.display().to_string(), wholeness.whole, wholeness.how)
        }
    }
    if let Some(dev) = dev {
        report.note_log_cannot_be_complete(
            beyond::log_cannot_be_complete(dev.as_ref(), &d, &passes.last.borrow())
                .map_err(VerifyError::BeyondSample)?,
        );
        report.unacked_found =
            super::unacked::count_unacked(dev.as_ref(), &d, &passes.last.borrow())
                .map_err(VerifyError::BeyondSample)?;
    }
    report.note_writer_end(&log.events, o.rehearsal);
    Ok(Verified {
        report,
        run: d.run_id,
    })
}

/// Refuses to judge the run against a target of another medium (a copy of the drive,
/// or the drive under a new name) unless it carries the run's stamps, looked for where
/// the acks say, gathered in a pass so the acks are never held. The same pass checks the
/// log: one no writer could produce is refused for that first, whatever the target.
fn check_identity(
    o: &VerifyOptions,
    d: &RunDescriptor,
    passes: &dyn scale::AckPasses,
    device: &DeviceIdentity,
) -> Result<(), VerifyError> {
    if d.device.same_medium(device) {
        return Ok(());
    }
    let mut points = medium::RunPoints::default();
    let mut checks = scale::Painted::new(d, None);
    passes.pass(&mut |chunk| {
        points.add(chunk);
        checks.add_chunk(chunk);
    })?;
    scale::refuse_impossible(d, checks)?;
    select::check_identity_at(
        d,
        points.finish(d),
        &o.target,
        device,
        o.allow_identity_mismatch,
        o.read_timeout,
    )?;
    Ok(())
}

/// The report on the drive `dev`, judged again knowing the later runs when it has stale
/// records.
fn judge_target(
    o: &VerifyOptions,
    d: &RunDescriptor,
    passes: &dyn scale::AckPasses,
    file_passes: &scale::FilePasses,
    dev: Arc<dyn Device>,
) -> Result<Report, VerifyError> {
    let judge = |run: scan::ScanRun| {
        let bar = progress::ScanBar::new(o.quiet);
        let scaled = engine::verify_streamed_run(
            dev.clone(),
            d,
            run,
            passes,
            o.read_timeout,
            o.scan_region,
            &|d, t| bar.update(d, t),
            &o.budget,
        );
        bar.finish();
        scaled.map(|s| s.report)
    };
    let mut report = judge(scan::ScanRun::from(d))?;
    // The runs that came after this one are in the log's last events, read by the pass
    // just made: their stamps over this run's records make those look stale, shorn or
    // lost, so the rare report with failures is judged again knowing them (superseded
    // where a later run overwrote them), as a cycle judges a fetched run from the start.
    let later = {
        let last = file_passes.last.borrow();
        let (log, _) = last.as_ref().expect("verify read the log");
        evidence::runs_after_the_end(&log.events)
    };
    if report.facts.failing > 0 && !later.is_empty() {
        report = judge(scan::ScanRun::with_later_runs(d, &later))?;
        report.superseded_by_runs = later.iter().map(|r| r.hex()).collect();
    }
    Ok(report)
}

/// The report for a target that is not there: the run's own target gone is the "dead
/// device" finding; another path is a usage error that names the run's.
fn gone_target(
    o: &VerifyOptions,
    d: &RunDescriptor,
    passes: &dyn scale::AckPasses,
) -> Result<Report, VerifyError> {
    let absolute = std::path::absolute(&o.target).unwrap_or_else(|_| o.target.clone());
    if absolute.display().to_string() != d.device.target {
        return Err(VerifyError::TargetMissingRunElsewhere {
            target: o.target.clone(),
            run: d.run_id,
            written_to: crate::model::peer_text::shown(&d.device.target).into_owned(),
        });
    }
    let why = format!(
        "{} does not exist any more (the device did not come back after the cut)",
        o.target.display()
    );
    gone::verify_gone(d, scan::ScanRun::from(d), passes, why, &o.budget)
}

/// Ack passes that also keep each stream's last ack (of the latest pass), for
/// `beyond::log_cannot_be_complete`.
struct LastOfEachStream<'a> {
    inner: &'a dyn scale::AckPasses,
    last: std::cell::RefCell<beyond::LastPerStream>,
}

impl scale::AckPasses for LastOfEachStream<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), VerifyError> {
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

/// Refuses a run whose records this build cannot regenerate: a newer writer's format.
/// Judging it anyway would call every damaged sector's bit count wrong, and a run whose
/// every stamp is "unknown version" would read as lost.
pub(super) fn refuse_unknown_format(d: &crate::model::RunDescriptor) -> Result<(), VerifyError> {
    match crate::record::RunKey::for_version(d.run_id, d.format_version) {
        Some(_) => Ok(()),
        None => Err(VerifyError::UnknownFormat {
            run: d.run_id,
            version: d.format_version,
        }),
    }
}
