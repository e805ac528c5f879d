//! The report on a drive that is gone (it did not come back after the cut, or cannot be
//! opened), judged by the one engine every other report comes from.
//!
//! Why the engine and not a list of the acks: a gone drive still has to be judged ack by
//! ack (a record a later acknowledged record wholly overwrote is superseded, not lost,
//! even on a dead drive), and that is the engine's painting. Held as a list, the acks of a
//! long run on a large drive cost tens of gigabytes; streamed through the engine, the
//! report keeps to the memory budget like any other. The drive is stood in for by
//! [`Gone`], whose every read fails at once with the reason, so nothing is read and
//! nothing waits.

use super::VerifyError;
use super::budget::Budget;
use super::engine;
use super::report::Report;
use super::scale::AckPasses;
use super::scan::ScanRun;
use crate::device::Device;
use crate::model::RunDescriptor;
use std::io;
use std::sync::Arc;
use std::time::Duration;

/// A drive that is not there: as large as the run's region reaches, every read failing
/// with `why`, every write refused.
pub struct Gone {
    size_bytes: u64,
    why: String,
}

impl Gone {
    /// The stand-in for the drive `d` was written to, gone for `why`.
    pub fn for_run(d: &RunDescriptor, why: String) -> Gone {
        let region_end = d.settings.region_offset + d.settings.region_bytes;
        let size = d.device.size_bytes.max(region_end);
        Gone {
            size_bytes: size.div_ceil(4096) * 4096,
            why,
        }
    }
}

impl Device for Gone {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        Err(io::Error::other(self.why.clone()))
    }
    fn flush(&self) -> io::Result<()> {
        Err(io::Error::other(self.why.clone()))
    }
    fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
        Err(io::Error::other(self.why.clone()))
    }
    fn gone(&self) -> Option<String> {
        Some(self.why.clone())
    }
}

/// The dead-device report on run `d` with the acks of `acks` (and the later runs of
/// `run`), the drive gone for `why`: every record still visible is unreadable, every
/// record wholly overwritten by a later one superseded; FAIL with acks, INCONCLUSIVE
/// without. The log's own damage and wholeness are the caller's to note.
pub fn verify_gone(
    d: &RunDescriptor,
    run: ScanRun,
    acks: &dyn AckPasses,
    why: String,
    budget: &Budget,
) -> Result<Report, VerifyError> {
    let dev: Arc<dyn Device> = Arc::new(Gone::for_run(d, why.clone()));
    report_on(dev, d, run, acks, why, budget)
}

/// [`verify_gone`] on `dev`, a [`Gone`] drive (or one that reads as it does, in tests).
fn report_on(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    run: ScanRun,
    acks: &dyn AckPasses,
    why: String,
    budget: &Budget,
) -> Result<Report, VerifyError> {
    // No read waits on a gone drive: the timeout never comes into play.
    let read_timeout = Duration::from_secs(60);
    let scaled =
        engine::verify_streamed_run(dev, d, run, acks, read_timeout, false, &|_, _| {}, budget)?;
    let mut r = scaled.report;
    // Nothing was read, so no range is worth naming: the reason says it all.
    r.unreadable_ranges.clear();
    r.region_read = false;
    r.bytes_read = 0;
    r.dead_device = Some(why.clone());
    r.facts.dead_device = Some(why);
    r.conclude();
    Ok(r)
}

#[cfg(test)]
#[path = "gone_tests.rs"]
mod tests;
