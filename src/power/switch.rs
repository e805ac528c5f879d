//! The switch itself: the `PowerSwitch` trait every driver implements, what a switch cuts
//! (`Scope`), what it can do (`Capabilities`) and when it acted (`SwitchTiming`).
//!
//! Why a file of its own: the drivers (command, http, serial, manual, sim) implement the
//! trait and `config` builds them, so the trait cannot live in `mod.rs` beside the
//! re-export of `config` without every driver and `config` importing each other round a
//! circle. Everything here depends on nothing else in power/ but the error type.

use super::error::PowerError;
use super::fall::Trace;
use serde::Serialize;
use std::time::Duration;

/// The longest a switch is told to stay off, to ramp a rail down, or to wait for an
/// answer (`power.timeout`). Why a bound at all: a typo ("10h" for "10s", "3600" read as
/// seconds) or a value past what a `Duration` or the firmware's 32-bit milliseconds hold
/// would leave the rig dark for days or wrap to a short cut; no power-cut test needs more
/// than an hour off.
pub const MAX_OFF: Duration = Duration::from_secs(3600);

/// Refuses `value` as `what` when it is longer than [`MAX_OFF`].
pub fn check_off(what: &str, value: Duration) -> Result<(), PowerError> {
    if value > MAX_OFF {
        return Err(PowerError::DurationTooLong {
            what: what.to_string(),
            value,
            max: MAX_OFF,
        });
    }
    Ok(())
}

/// What a switch cuts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// The drive's rails only; the host keeps running (drive-only campaign).
    Drive,
    /// The whole host (smart plug, PDU, IPMI); needs `plugpull agent` on the host.
    Host,
}

/// What a driver can do, so the campaign can say what its timings are worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    pub scope: Scope,
    /// The switch acts within milliseconds of the command and says when (serial firmware,
    /// the simulated drive). False for plugs, PDUs, BMCs and people.
    pub precise_timing: bool,
    /// `state()` asks the switch rather than returning `None`.
    pub reports_state: bool,
    /// The switch can time a pulse itself (off, wait, on) without the host in the loop.
    pub native_pulse: bool,
    /// The switch can lower the rail over a set time (`set_fall_time`) rather than at once.
    pub ramp: bool,
    /// The switch samples the rail and reports its fall after a cut (`last_fall`).
    pub fall_trace: bool,
}

/// When one switch action happened: the host clock around the command, and the switch's
/// own clock where it reports one. (Not `record::Stamp`, a record's identity on disk.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SwitchTiming {
    /// ns since the Unix epoch (host clock) just before the command was sent.
    pub issued_ns: u64,
    /// ns since the Unix epoch (host clock) when the switch confirmed (or the command
    /// returned).
    pub done_ns: u64,
    /// The switch's own timestamp in µs since it booted (our firmware), if it gave one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub switch_us: Option<u64>,
}

impl SwitchTiming {
    /// Runs `f`, timestamping it on the host clock.
    pub fn around<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<(SwitchTiming, T), E> {
        let issued_ns = crate::model::now_ns();
        let v = f()?;
        Ok((
            SwitchTiming {
                issued_ns,
                done_ns: crate::model::now_ns(),
                switch_us: None,
            },
            v,
        ))
    }
}

/// A power switch. Every method either did what it says or returns an error saying what
/// to check; none retries silently.
pub trait PowerSwitch: Send {
    /// A short description for logs ("shelly-gen1 at 192.168.1.50 relay 0").
    fn describe(&self) -> String;
    fn capabilities(&self) -> Capabilities;
    /// Cuts power. Returns when the switch confirmed the cut (or the command returned).
    fn off(&mut self) -> Result<SwitchTiming, PowerError>;
    /// Restores power.
    fn on(&mut self) -> Result<SwitchTiming, PowerError>;
    /// Whether power is on, where the switch can tell; `None` where it cannot.
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        Ok(None)
    }
    /// The rail's sampled fall at the last cut, where the switch measures it (our firmware
    /// from version 2, a simulated switch fed recorded traces); `None` where it cannot.
    fn last_fall(&mut self) -> Result<Option<Trace>, PowerError> {
        Ok(None)
    }
    /// Makes the following cuts lower the rail linearly over `fall` (zero: at once).
    /// Switches without ramps accept only zero; none accepts more than [`MAX_OFF`].
    fn set_fall_time(&mut self, fall: Duration) -> Result<(), PowerError> {
        check_off("the fall time", fall)?;
        if fall.is_zero() {
            Ok(())
        } else {
            Err(PowerError::NoRamp {
                switch: self.describe(),
            })
        }
    }
    /// Off, stay off for `off_for`, on. Drivers whose switch times pulses itself
    /// override this; the default uses the host's clock.
    /// An `off_for` over [`MAX_OFF`] is refused before anything is switched.
    fn pulse(&mut self, off_for: Duration) -> Result<(SwitchTiming, SwitchTiming), PowerError> {
        check_off("the time off", off_for)?;
        let off = self.off()?;
        std::thread::sleep(off_for);
        let on = self.on()?;
        Ok((off, on))
    }
}
