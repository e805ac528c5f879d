//! The one engine every caller judges a device through: the whole run at once when its
//! live records fit the memory budget (`scale`), else one part of the region at a time
//! (`partition`). Apart from both so that neither needs the other to be called.
//!
//! Also what `plugpull verify` asks before the engine reads anything: whether the work
//! directory may be used ([`refuse_unusable_work_dir`]). A budget refused (here or by the
//! parts' plan and spill) gives way to the log's own refusal when the log holds what no
//! writer could produce ([`outranked_by_the_log`]): the evidence problem comes first.

use super::budget::{self, Budget};
use super::partition;
use super::scale::{self, AckPasses, Scaled};
use super::scan;
use super::{VerifyError, VerifyOptions};
use crate::device::Device;
use crate::model::RunDescriptor;
use std::sync::Arc;
use std::time::Duration;

/// `verify_device_with_progress` for a run of any length: the acks are streamed twice
/// from `acks` (module docs). Refuses a log no writer could produce
/// ([`ImpossibleRun`](crate::witness::validate::ImpossibleRun), inside `VerifyError`) before judging the device (its region is
/// already being read then: `scan::read_early`).
pub fn verify_streamed(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Scaled, VerifyError> {
    let run = scan::ScanRun::from(d);
    let budget = Budget::default();
    verify_streamed_run(
        dev,
        d,
        run,
        acks,
        read_timeout,
        scan_region,
        progress,
        &budget,
    )
}

/// [`verify_streamed`] with the runs that superseded this one (`scan::ScanRun`), within
/// `budget`: a run whose live records may not fit it is judged in parts
/// (`partition`).
#[allow(clippy::too_many_arguments)]
pub fn verify_streamed_run(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    run: scan::ScanRun,
    acks: &dyn AckPasses,
    read_timeout: Duration,
    scan_region: bool,
    progress: &(dyn Fn(u64, u64) + Sync),
    budget: &Budget,
) -> Result<Scaled, VerifyError> {
    let in_parts = |trust_placement| {
        partition::verify_in_parts(
            dev.clone(),
            d,
            run.clone(),
            acks,
            read_timeout,
            scan_region,
            progress,
            budget,
            trust_placement,
        )
        .map_err(|e| outranked_by_the_log(e, d, acks))
    };
    if !partition::whole_run_fits(d, acks.ack_count_hint(), budget) {
        return match in_parts(true) {
            Err(VerifyError::OutgrewTheBudget) => {
                #[cfg(test)]
                OUTGREW.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                in_parts(false)
            }
            judged => judged,
        };
    }
    // What the whole run's painted records may hold: past it (a run whose records do
    // not keep to its settings' placement), it is judged in parts, planned for the worst.
    let held_at_most = budget
        .memory_bytes
        .saturating_sub(partition::plan::FIXED_BYTES + partition::plan::EARLY_READ_BYTES);
    let whole = scale::verify_whole_run(
        dev.clone(),
        d,
        run.clone(),
        acks,
        read_timeout,
        scan_region,
        progress,
        held_at_most,
    );
    match whole {
        Err(VerifyError::OutgrewTheBudget) => {
            #[cfg(test)]
            OUTGREW.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            in_parts(false)
        }
        judged => judged,
    }
}

/// Runs whose painted records outgrew what their plan allowed, judged again in parts
/// planned for a live record a sector (tests).
#[cfg(test)]
pub static OUTGREW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Refuses, before anything is read from the target, a work directory verify may not
/// use for `o.target` (`budget::check_work_dir`): the one given with `--work-dir`
/// whatever the run's size, the default (`TMPDIR`) only when the run is judged in parts
/// (a run judged whole writes nothing there); for a run judged in parts, also a
/// `--memory` its parts do not fit and a directory without room
/// (`partition::refuse_before_reading`). `run`: the run's descriptor and acks, when
/// in hand: they tell whether it is judged in parts, and a log no writer could produce is
/// refused for that instead ([`outranked_by_the_log`]).
pub fn refuse_unusable_work_dir(
    o: &VerifyOptions,
    run: Option<(&RunDescriptor, &dyn AckPasses)>,
) -> Result<(), VerifyError> {
    let in_parts = run
        .is_some_and(|(d, acks)| !partition::whole_run_fits(d, acks.ack_count_hint(), &o.budget));
    if o.budget.work_dir.is_none() && !in_parts {
        return Ok(());
    }
    let dir = o.budget.work_dir();
    let refused = match budget::check_work_dir(&dir, &o.target) {
        Err(fault) => Some(VerifyError::work_dir_refused(dir, &o.target, fault)),
        // The parts' memory and the directory's room, as the engine will ask them.
        Ok(()) => match run.filter(|_| in_parts) {
            Some((d, _)) => partition::refuse_before_reading(d, &o.budget).err(),
            None => None,
        },
    };
    let Some(e) = refused else {
        return Ok(());
    };
    Err(match run {
        Some((d, acks)) => outranked_by_the_log(e, d, acks),
        None => e,
    })
}

/// `e`, or the log's own refusal when `e` refuses only how verify was asked to work
/// (`VerifyError::is_budget_refusal`) and the log holds what no writer could produce: the
/// evidence is in doubt whatever the budget, and a new `--work-dir` or `--memory` would
/// only lead to that refusal. The log's checks without the target, one pass over the
/// acks as the spill makes it (`partition::spill`), paid only on this error path.
pub fn outranked_by_the_log(
    e: VerifyError,
    d: &RunDescriptor,
    acks: &dyn AckPasses,
) -> VerifyError {
    if !e.is_budget_refusal() {
        return e;
    }
    let mut painted = scale::Painted::new(d, None);
    if let Err(log) = acks.pass(&mut |chunk| painted.add_chunk(chunk)) {
        return log;
    }
    match scale::refuse_impossible(d, painted) {
        Ok(_) => e,
        Err(log) => log,
    }
}
