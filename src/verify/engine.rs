//! The one engine every caller judges a device through: the whole run at once when its
//! live records fit the memory budget (`scale`), else one part of the region at a time
//! (`partition`). Apart from both so that neither needs the other to be called.

use super::VerifyError;
use super::budget::Budget;
use super::partition;
use super::scale::{self, AckPasses, Scaled};
use super::scan;
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
    match partition::whole_run_fits(d, acks.ack_count_hint(), budget) {
        true => scale::verify_whole_run(dev, d, run, acks, read_timeout, scan_region, progress),
        false => partition::verify_in_parts(
            dev,
            d,
            run,
            acks,
            read_timeout,
            scan_region,
            progress,
            budget,
        ),
    }
}
