//! `driver = "simdrive"`: cuts and restores the simulated drive, for tests and demos.
//!
//! Why it can replay recorded fall traces and take any fall time: the campaign's proof of
//! the cut ("cut not proven" cycles, the ramp sweep grouped per fall time) must be
//! testable without a board. The k-th cut of a switch reports the k-th trace of
//! `power.traces` (round robin); the simulated drive itself is cut at once whatever fall
//! time was asked, which the result records as asked.

use super::error::PowerError;
use super::fall::{Trace, parse_trace};
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use crate::sim::SimDrive;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Anything whose power the campaign can cut in-process.
pub trait Cuttable: Send + Sync {
    fn cut(&self) -> std::io::Result<()>;
    fn power_on(&self) -> std::io::Result<()>;
    fn is_powered(&self) -> bool;
}

impl Cuttable for SimDrive {
    fn cut(&self) -> std::io::Result<()> {
        SimDrive::cut(self)
    }
    fn power_on(&self) -> std::io::Result<()> {
        SimDrive::power_on(self)
    }
    fn is_powered(&self) -> bool {
        SimDrive::is_powered(self)
    }
}

pub struct SimSwitch {
    pub drive: Arc<dyn Cuttable>,
    /// Recorded fall traces, reported round robin, one per cut.
    pub traces: Vec<Trace>,
    /// Cuts so far.
    pub cuts: usize,
}

impl SimSwitch {
    pub fn new(drive: Arc<dyn Cuttable>) -> SimSwitch {
        SimSwitch {
            drive,
            traces: vec![],
            cuts: 0,
        }
    }
}

/// Reads a recorded trace file: its first line that is neither blank nor a `#` comment,
/// in the firmware's `TRACE ...` form (hardware/firmware/PROTOCOL.md).
pub fn read_trace_file(path: &Path) -> Result<Trace, PowerError> {
    let what = || path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PowerError::TraceFile {
        path: path.into(),
        source,
    })?;
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    parse_trace(line).map_err(|source| PowerError::BadTrace {
        what: what(),
        source,
    })
}

impl PowerSwitch for SimSwitch {
    fn describe(&self) -> String {
        "simdrive (in-process simulated drive)".into()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: Scope::Drive,
            precise_timing: true,
            reports_state: true,
            native_pulse: false,
            ramp: true,
            fall_trace: !self.traces.is_empty(),
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        self.cuts += 1;
        Ok(SwitchTiming::around(|| self.drive.cut().map_err(PowerError::SimCut))?.0)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        // A drive that does not come back (profile "dead") is the campaign's finding, not
        // a switch failure: the switch did its job.
        Ok(SwitchTiming::around(|| {
            let _ = self.drive.power_on();
            Ok::<_, PowerError>(())
        })?
        .0)
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        Ok(Some(self.drive.is_powered()))
    }
    fn last_fall(&mut self) -> Result<Option<Trace>, PowerError> {
        if self.traces.is_empty() || self.cuts == 0 {
            return Ok(None);
        }
        Ok(Some(
            self.traces[(self.cuts - 1) % self.traces.len()].clone(),
        ))
    }
    fn set_fall_time(&mut self, _fall: Duration) -> Result<(), PowerError> {
        Ok(())
    }
}
