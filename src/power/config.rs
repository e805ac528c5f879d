//! The `[power]` table of a campaign file, and turning it into a driver.
//!
//! One tagged table (`driver = "..."`) per switch, so a rig's file documents itself and an
//! unknown key is an error rather than a silently ignored setting.

use super::error::PowerError;
use super::http_auth::Login;
use super::http_client::Trust;
use super::redfish::RedfishAuth;
use super::switch::{self, PowerSwitch, Scope};
use super::{command, http, manual, pcie, redfish, serial, sim};
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn default_timeout() -> String {
    "10s".into()
}
fn default_baud() -> u32 {
    115_200
}
fn default_channel() -> u32 {
    0
}

#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "driver", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PowerConfig {
    /// Shell commands (usbrelay, snmpset, ipmitool, curl...).
    Command {
        off: String,
        on: String,
        /// Optional: prints "on"/"off" (or 1/0) on stdout.
        #[serde(default)]
        state: Option<String>,
        #[serde(default = "default_timeout")]
        timeout: String,
        scope: Scope,
        /// Optional: prints the rail's fall at the last cut (a firmware `TRACE` line).
        #[serde(default)]
        trace: Option<String>,
        /// Optional: cuts by lowering the rail over `{ms}` milliseconds (a programmable
        /// supply's slew, say) instead of `off`; makes `campaign.fall_times` possible.
        #[serde(default)]
        ramp: Option<String>,
    },
    /// A smart plug or any HTTP switch.
    Http {
        /// "shelly-gen1", "shelly-gen2", "tasmota" or "generic".
        flavor: String,
        /// host or host:port (http only, no TLS).
        host: String,
        #[serde(default = "default_channel")]
        channel: u32,
        #[serde(default)]
        user: Option<String>,
        #[serde(default)]
        password: Option<String>,
        /// generic only: request lines "GET /path" or "POST /path", body optional.
        #[serde(default)]
        off_request: Option<String>,
        #[serde(default)]
        on_request: Option<String>,
        #[serde(default)]
        body_off: Option<String>,
        #[serde(default)]
        body_on: Option<String>,
        #[serde(default = "default_timeout")]
        timeout: String,
        #[serde(default = "host_scope")]
        scope: Scope,
    },
    /// A server's BMC (DMTF Redfish over HTTPS): cuts the whole host.
    Redfish {
        /// host or host:port of the BMC.
        host: String,
        /// The system's id under /redfish/v1/Systems: needed when it lists several.
        #[serde(default)]
        system: Option<String>,
        user: String,
        password: String,
        /// "basic" (default: nothing to clean up if plugpull is killed) or "session".
        #[serde(default = "basic")]
        auth: String,
        /// A PEM file with the BMC's certificate (self-signed) or the CA that issued it.
        #[serde(default)]
        ca_file: Option<PathBuf>,
        /// Takes any certificate: encrypted, but anyone on the path can pose as the BMC.
        #[serde(default)]
        tls_insecure_accept_any_certificate: bool,
        #[serde(default = "default_timeout")]
        timeout: String,
        /// How long PowerState may take to read Off or On after a reset.
        #[serde(default = "default_confirm_timeout")]
        confirm_timeout: String,
    },
    /// Our firmware's line protocol, or a CH340 relay board's byte frames.
    Serial {
        port: String,
        /// "plugpull" (hardware/firmware) or "ch340".
        #[serde(default = "default_protocol")]
        protocol: String,
        #[serde(default = "default_baud")]
        baud: u32,
        #[serde(default = "one")]
        channel: u32,
        #[serde(default = "default_timeout")]
        timeout: String,
    },
    /// An operator pulls the plug and presses Enter.
    Manual {
        #[serde(default = "host_scope")]
        scope: Scope,
    },
    /// An NVMe drive's hot-plug slot with a power controller (pciehp): no extra hardware.
    PcieSlot {
        /// The drive's serial (as in `nvme list`); must match `[target] serial`.
        serial: String,
        /// The slot's name under /sys/bus/pci/slots; found from the drive's bus address
        /// when absent.
        #[serde(default)]
        slot: Option<String>,
        /// The sysfs root (a fake tree in tests).
        #[serde(default = "default_sysfs")]
        sysfs: PathBuf,
        /// How long power-on waits for the controller to come back.
        #[serde(default = "default_slot_timeout")]
        timeout: String,
    },
    /// The simulated drive of a `[target] kind = "simdrive"` campaign.
    Simdrive {
        /// Recorded fall traces (files holding a firmware `TRACE` line), reported one per
        /// cut, round robin; relative to the campaign file.
        #[serde(default)]
        traces: Vec<PathBuf>,
    },
}

fn basic() -> String {
    "basic".into()
}
fn default_confirm_timeout() -> String {
    "60s".into()
}
fn default_sysfs() -> PathBuf {
    "/sys".into()
}
fn default_slot_timeout() -> String {
    "30s".into()
}
fn host_scope() -> Scope {
    Scope::Host
}
fn default_protocol() -> String {
    "plugpull".into()
}
fn one() -> u32 {
    1
}

/// A duration of the table, at most [`switch::MAX_OFF`]: a switch that may take days to
/// answer holds the campaign as long.
pub(crate) fn dur(s: &str, what: &str) -> Result<Duration, PowerError> {
    let d = crate::units::parse_duration(s).map_err(|e| PowerError::BadDuration {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    switch::check_off(&format!("{what} '{}'", s.trim()), d)?;
    Ok(d)
}

impl PowerConfig {
    pub fn driver_name(&self) -> &'static str {
        match self {
            PowerConfig::Command { .. } => "command",
            PowerConfig::Http { .. } => "http",
            PowerConfig::Redfish { .. } => "redfish",
            PowerConfig::Serial { .. } => "serial",
            PowerConfig::Manual { .. } => "manual",
            PowerConfig::PcieSlot { .. } => "pcie-slot",
            PowerConfig::Simdrive { .. } => "simdrive",
        }
    }

    /// Builds the driver. `simdrive` needs the simulated drive the campaign created.
    pub fn build(
        &self,
        simdrive: Option<Arc<dyn sim::Cuttable>>,
    ) -> Result<Box<dyn PowerSwitch>, PowerError> {
        Ok(match self {
            PowerConfig::Command {
                off,
                on,
                state,
                timeout,
                scope,
                trace,
                ramp,
            } => Box::new(command::CommandSwitch {
                off: off.clone(),
                on: on.clone(),
                state: state.clone(),
                timeout: dur(timeout, "power.timeout")?,
                scope: *scope,
                trace: trace.clone(),
                ramp: ramp.clone(),
                ramp_ms: 0,
            }),
            PowerConfig::Http {
                flavor,
                host,
                channel,
                user,
                password,
                off_request,
                on_request,
                body_off,
                body_on,
                timeout,
                scope,
            } => {
                let flavor = http_flavor(flavor, off_request, on_request, body_off, body_on)?;
                let mut sw = http::HttpSwitch::new(flavor, host, *scope);
                sw.channel = *channel;
                sw.auth = user
                    .as_ref()
                    .map(|u| (u.clone(), password.clone().unwrap_or_default()));
                sw.timeout = dur(timeout, "power.timeout")?;
                Box::new(sw)
            }
            PowerConfig::Redfish {
                host,
                system,
                user,
                password,
                auth,
                ca_file,
                tls_insecure_accept_any_certificate,
                timeout,
                confirm_timeout,
            } => {
                let trust = match (ca_file, tls_insecure_accept_any_certificate) {
                    (Some(_), true) => return Err(PowerError::RedfishTrustTwice),
                    (Some(f), false) => Trust::CaFile(f.clone()),
                    (None, true) => Trust::AcceptAnyCertificate,
                    (None, false) => Trust::PublicRoots,
                };
                let auth = match auth.as_str() {
                    "basic" => RedfishAuth::Basic,
                    "session" => RedfishAuth::Session,
                    a => {
                        return Err(PowerError::UnknownRedfishAuth {
                            auth: a.to_string(),
                        });
                    }
                };
                Box::new(redfish::RedfishSwitch::new(redfish::RedfishSettings {
                    host: host.clone(),
                    system: system.clone(),
                    login: Login {
                        user: user.clone(),
                        password: password.clone(),
                    },
                    auth,
                    trust,
                    // A campaign cuts with off and on (ForceOff, campaign.off, On), and so
                    // reads the state while the host is off; it never pulses.
                    pulse_with_power_cycle: false,
                    timeout: dur(timeout, "power.timeout")?,
                    confirm_timeout: dur(confirm_timeout, "power.confirm_timeout")?,
                    scope: Scope::Host,
                })?)
            }
            PowerConfig::Serial {
                port,
                protocol,
                baud,
                channel,
                timeout,
            } => {
                let proto = serial_protocol(protocol)?;
                Box::new(serial::SerialSwitch::open(
                    port,
                    *baud,
                    proto,
                    *channel,
                    dur(timeout, "power.timeout")?,
                )?)
            }
            PowerConfig::Manual { scope } => Box::new(manual::ManualSwitch::stdin(*scope)),
            PowerConfig::PcieSlot {
                serial,
                slot,
                sysfs,
                timeout,
            } => Box::new(pcie::PcieSlotSwitch::open(
                sysfs,
                slot.as_deref(),
                serial,
                dur(timeout, "power.timeout")?,
            )?),
            PowerConfig::Simdrive { traces } => match simdrive {
                Some(d) => {
                    let mut s = sim::SimSwitch::new(d);
                    for t in traces {
                        s.traces.push(sim::read_trace_file(t)?);
                    }
                    Box::new(s)
                }
                None => return Err(PowerError::SimdriveWithoutTarget),
            },
        })
    }
}

/// The HTTP flavor named in the table; `generic` needs its request lines.
fn http_flavor(
    name: &str,
    off_request: &Option<String>,
    on_request: &Option<String>,
    body_off: &Option<String>,
    body_on: &Option<String>,
) -> Result<http::Flavor, PowerError> {
    Ok(match name {
        "shelly-gen1" => http::Flavor::ShellyGen1,
        "shelly-gen2" => http::Flavor::ShellyGen2,
        "tasmota" => http::Flavor::Tasmota,
        "generic" => http::Flavor::Generic {
            off: off_request
                .clone()
                .ok_or(PowerError::MissingGenericRequest { which: "off" })?,
            on: on_request
                .clone()
                .ok_or(PowerError::MissingGenericRequest { which: "on" })?,
            body_off: body_off.clone(),
            body_on: body_on.clone(),
        },
        f => {
            return Err(PowerError::UnknownFlavor {
                flavor: f.to_string(),
            });
        }
    })
}

/// The serial protocol named in the table.
fn serial_protocol(name: &str) -> Result<serial::Protocol, PowerError> {
    match name {
        "plugpull" => Ok(serial::Protocol::Plugpull),
        "ch340" => Ok(serial::Protocol::Ch340),
        p => Err(PowerError::UnknownProtocol {
            protocol: p.to_string(),
        }),
    }
}
