//! `driver = "simdrive"`: cuts and restores the simulated drive, for tests and demos.

use super::error::PowerError;
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use crate::sim::SimDrive;
use std::sync::Arc;

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
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
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
}
