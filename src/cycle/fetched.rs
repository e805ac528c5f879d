//! After power-on, a cycle's run fetched from the witness and judged without holding
//! its acks: the fetch goes into a temporary log file and the streaming engine reads
//! the acks from it at each pass (`verify::scale::FilePasses`), as `plugpull verify
//! --witness` does. Why: a campaign's or the agent's cycle on a real drive can run for
//! hours at a flush rate in the hundred thousands per second; held whole, its acks cost
//! about 40 bytes each before the engine even starts, and the campaign's memory would
//! grow with the run while the CLI's does not.

use crate::device::Device;
use crate::model::{Ack, RunDescriptor, RunSelector, WitnessEvent};
use crate::record::RunId;
use crate::verify::budget::Budget;
use crate::verify::report::Report;
use crate::verify::temp_log::TempLog;
use crate::verify::{engine, evidence, gone, refused_report_of, scale, scan};
use crate::witness::client::error::{ClientError, ClientResult};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// A run fetched into a temporary log file, removed when this is dropped (and by
/// Ctrl-C where a handler removes it: `verify::temp_log`).
pub struct FetchedRun {
    log: TempLog,
    pub descriptor: RunDescriptor,
    /// How many acks the witness sent.
    pub acks: u64,
    pub events: Vec<WitnessEvent>,
}

impl FetchedRun {
    /// Where the fetched log is, until this is dropped.
    pub fn path(&self) -> &std::path::Path {
        &self.log.0
    }
}

/// Fetches `run` from the witness at `addr` into a temporary file (in `TMPDIR`); a
/// witness that sends another run is refused.
pub fn fetch_run(addr: &str, run: RunId) -> ClientResult<FetchedRun> {
    fetch_run_waiting(addr, run, BUSY_WAIT)
}

/// How long a cycle's fetch waits for a witness that is serving its most fetches: the
/// drives of a fleet verify at the same moment, and a drive is not DEAD or ERROR because
/// the others were fetching.
pub const BUSY_WAIT: Duration = Duration::from_secs(120);

/// [`fetch_run`], trying again for up to `busy_wait` while the witness answers that it
/// is serving its most fetches (a pause of 50 to 300 ms between tries).
pub fn fetch_run_waiting(addr: &str, run: RunId, busy_wait: Duration) -> ClientResult<FetchedRun> {
    let t0 = std::time::Instant::now();
    let mut rng = crate::rng::Rng::new(crate::rng::random_seed());
    loop {
        match fetch_once(addr, run) {
            Err(ClientError::WitnessBusy { .. }) if t0.elapsed() < busy_wait => {
                std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
            }
            r => return r,
        }
    }
}

fn fetch_once(addr: &str, run: RunId) -> ClientResult<FetchedRun> {
    let log = TempLog::new("cycle");
    let f = log.fetch_into(addr, &RunSelector::Run(run), None)?;
    // Another run's acks would judge the drive against promises this cycle never made
    // (the file goes with `log`).
    if f.descriptor.run_id != run {
        crate::witness::client::error::refuse!(
            "asked the witness for run {run} and it sent run {}: not judged",
            f.descriptor.run_id
        );
    }
    Ok(FetchedRun {
        log,
        descriptor: f.descriptor,
        acks: f.acks,
        events: f.events,
    })
}

impl FetchedRun {
    /// A run whose acks this process holds (the soak's in-process witness), written to a
    /// temporary log file so it is judged as a fetched run is: the same path, the same
    /// memory.
    pub fn from_acks(
        descriptor: &RunDescriptor,
        acks: &[Ack],
        events: &[WitnessEvent],
    ) -> crate::witness::store::error::StoreResult<FetchedRun> {
        let log = TempLog::new("cycle");
        let mut w = crate::witness::store::export::LogFileWriter::create(&log.0, descriptor)?;
        w.push(acks)?;
        w.finish(events, None)?;
        Ok(FetchedRun {
            log,
            descriptor: descriptor.clone(),
            acks: acks.len() as u64,
            events: events.to_vec(),
        })
    }

    /// A run already in a log file (as `plugpull fetch -o` writes one), copied to a
    /// temporary file and judged as a cycle judges a fetched run: for measuring a
    /// cycle's verify against `plugpull verify` on the same run (examples/cyclejudge.rs).
    pub fn from_log_file(
        path: &std::path::Path,
    ) -> crate::witness::store::error::StoreResult<FetchedRun> {
        let log = TempLog::new("cycle");
        std::fs::copy(path, &log.0).map_err(crate::witness::store::error::StoreError::Io)?;
        let mut acks = 0u64;
        let (run, _) =
            crate::witness::store::reader::stream_log_file(&log.0, None, &mut |chunk| {
                acks += chunk.len() as u64
            })?;
        Ok(FetchedRun {
            log,
            descriptor: run.descriptor,
            acks,
            events: run.events,
        })
    }
}

/// What judging a fetched run gives.
pub struct Judged {
    pub report: Report,
    /// The ack flushed last (the campaign's record of where the writer was).
    pub newest_ack: Option<Ack>,
}

/// Ack passes that also note the ack flushed last.
struct NewestOf<'a> {
    inner: &'a dyn scale::AckPasses,
    newest: Cell<Option<Ack>>,
}

impl scale::AckPasses for NewestOf<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), crate::verify::VerifyError> {
        let mut newest: Option<Ack> = None;
        self.inner.pass(&mut |chunk| {
            for a in chunk {
                // The last of equals, as `max_by_key` picks.
                if newest.is_none_or(|n| a.flushed_ns >= n.flushed_ns) {
                    newest = Some(*a);
                }
            }
            sink(chunk)
        })?;
        self.newest.set(newest);
        Ok(())
    }

    fn ack_count_hint(&self) -> Option<u64> {
        self.inner.ack_count_hint()
    }
}

impl FetchedRun {
    /// Judges the drive (or, when it did not come back, `Err` says why) against the
    /// fetched acks, streamed from the file through verify's engine: the report
    /// `plugpull verify --acks` gives on the same log.
    pub fn judge(&self, drive: Result<Arc<dyn Device>, String>, read_timeout: Duration) -> Judged {
        let file = scale::FilePasses {
            path: &self.log.0,
            key: None,
            last: Default::default(),
        };
        let passes = NewestOf {
            inner: &file,
            newest: Cell::new(None),
        };
        let budget = Budget::default();
        let judged = match drive {
            // A drive that did not come back is judged by the same engine, on a
            // stand-in whose every read fails (`verify::gone`).
            Err(why) => {
                let run = scan::ScanRun::from(&self.descriptor);
                gone::verify_gone(&self.descriptor, run, &passes, why, &budget)
            }
            Ok(dev) => {
                let later = evidence::runs_after_the_end(&self.events);
                let run = scan::ScanRun::with_later_runs(&self.descriptor, &later);
                engine::verify_streamed_run(
                    dev,
                    &self.descriptor,
                    run,
                    &passes,
                    read_timeout,
                    false,
                    &|_, _| {},
                    &budget,
                )
                .map(|scaled| {
                    let mut report = scaled.report;
                    report.superseded_by_runs = later.iter().map(|r| r.hex()).collect();
                    report
                })
            }
        };
        let mut report = match judged {
            Ok(report) => report,
            Err(e) => refused_report_of(&self.descriptor, self.acks, &e),
        };
        report.note_log_damage(crate::witness::store::checker::damage_in(&self.events));
        Judged {
            report,
            newest_ack: passes.newest.get(),
        }
    }
}
