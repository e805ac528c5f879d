//! `driver = "command"`: shell commands for off, on and (optionally) state, the rail's
//! fall (`trace`) and a ramped cut (`ramp`).
//!
//! Why commands: most switches already have a tool (usbrelay, snmpset for an APC PDU,
//! ipmitool, curl for Redfish), and wrapping it is more honest than re-implementing it.
//! Each command runs under `sh -c` in its own process group with a timeout; on timeout
//! the whole group is killed so a hung tool cannot stall the campaign.

use super::error::PowerError;
use super::fall::{Trace, parse_trace};
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct CommandSwitch {
    pub off: String,
    pub on: String,
    pub state: Option<String>,
    pub timeout: Duration,
    pub scope: Scope,
    /// Optional: prints the rail's fall at the last cut as a firmware `TRACE` line
    /// (hardware/firmware/PROTOCOL.md), e.g. a script that reads an oscilloscope.
    pub trace: Option<String>,
    /// Optional: a cut that lowers the rail over `{ms}` milliseconds (a programmable
    /// supply's slew rate, a script driving a DAC); used instead of `off` while a fall
    /// time other than zero is set.
    pub ramp: Option<String>,
    /// The fall time of the following cuts, ms (0: `off`).
    pub ramp_ms: u64,
}

/// Runs `cmd` under `sh -c` with a deadline; returns its stdout, or an error with its
/// exit status and stderr.
pub fn run_command(cmd: &str, timeout: Duration) -> Result<String, PowerError> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| PowerError::CommandStart {
            cmd: cmd.to_string(),
            source,
        })?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let ereader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t0.elapsed() > timeout {
            // SAFETY: kill(2) on the process group of the child we spawned; no memory is
            // touched.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            return Err(PowerError::CommandTimedOut {
                cmd: cmd.to_string(),
                timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = reader.join().unwrap_or_default();
    let stderr = ereader.join().unwrap_or_default();
    if !status.success() {
        return Err(PowerError::CommandFailed {
            cmd: cmd.to_string(),
            status,
            stderr: stderr.trim().to_string(),
        });
    }
    Ok(stdout)
}

/// Reads "on"/"off"/"1"/"0"/"true"/"false" (any case) from a state command's output.
pub fn parse_state(out: &str) -> Option<bool> {
    match out.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" => Some(true),
        "off" | "0" | "false" => Some(false),
        _ => None,
    }
}

impl PowerSwitch for CommandSwitch {
    fn describe(&self) -> String {
        format!("command (off: `{}`, on: `{}`)", self.off, self.on)
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: self.scope,
            precise_timing: false,
            reports_state: self.state.is_some(),
            native_pulse: false,
            ramp: self.ramp.is_some(),
            fall_trace: self.trace.is_some(),
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        let cmd = match (&self.ramp, self.ramp_ms) {
            (Some(ramp), ms) if ms > 0 => ramp.replace("{ms}", &ms.to_string()),
            _ => self.off.clone(),
        };
        Ok(SwitchTiming::around(|| run_command(&cmd, self.timeout))?.0)
    }
    fn set_fall_time(&mut self, fall: Duration) -> Result<(), PowerError> {
        super::switch::check_off("the fall time", fall)?;
        if !fall.is_zero() && self.ramp.is_none() {
            return Err(PowerError::NoRamp {
                switch: self.describe(),
            });
        }
        // Whole milliseconds, at least 1 for a fall time that is not zero.
        self.ramp_ms = (fall.as_micros().div_ceil(1000)) as u64;
        Ok(())
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        Ok(SwitchTiming::around(|| run_command(&self.on, self.timeout))?.0)
    }
    fn last_fall(&mut self) -> Result<Option<Trace>, PowerError> {
        let Some(cmd) = &self.trace else {
            return Ok(None);
        };
        let out = run_command(cmd, self.timeout)?;
        let line = out
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("TRACE"))
            .unwrap_or("");
        parse_trace(line)
            .map(Some)
            .map_err(|source| PowerError::BadTrace {
                what: format!("`{cmd}`"),
                source,
            })
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        let Some(cmd) = &self.state else {
            return Ok(None);
        };
        let out = run_command(cmd, self.timeout)?;
        match parse_state(&out) {
            Some(s) => Ok(Some(s)),
            None => Err(PowerError::BadStateOutput {
                cmd: cmd.clone(),
                output: out.trim().to_string(),
            }),
        }
    }
}
