//! The campaign file (TOML): what to cut, with which switch, how often, how long.
//!
//! Strings for sizes and durations ("16M", "2s", "50ms-300ms") so a rig's file reads the
//! way its owner talks; unknown keys are errors, so a typo never silently changes a
//! campaign. Example files: hardware/examples/.

use crate::model::Placement;
use crate::power::PowerConfig;
use crate::witness::server::WitnessOptions;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignFile {
    pub campaign: CampaignSection,
    pub target: TargetSection,
    #[serde(default)]
    pub writer: WriterSection,
    #[serde(default)]
    pub witness: WitnessSection,
    /// Whole-host mode (`[target] kind = "host"`): where the agent reports.
    #[serde(default)]
    pub agent: AgentSection,
    pub power: PowerConfig,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Address the controller listens on for `plugpull agent` (HOST:PORT).
    #[serde(default = "d_agent_listen")]
    pub listen: String,
    /// After power is restored: how long the host has to boot, find the drive, verify and
    /// report before the cycle is recorded as a dead device.
    #[serde(default = "d_boot_timeout")]
    pub boot_timeout: String,
    /// The key file agents must prove they hold (the same format as `--key-file`; copy
    /// it to the agent's `key_file`). Relative paths are relative to the config file.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Takes agents without a key. Refused unless `listen` is a loopback address (a VM
    /// on this machine, a test): anyone who reaches the port could report any verdict.
    #[serde(default)]
    pub allow_unauthenticated_agents: bool,
}

impl Default for AgentSection {
    fn default() -> Self {
        AgentSection {
            listen: d_agent_listen(),
            boot_timeout: d_boot_timeout(),
            key_file: None,
            allow_unauthenticated_agents: false,
        }
    }
}

fn d_agent_listen() -> String {
    "0.0.0.0:7421".into()
}
fn d_boot_timeout() -> String {
    "10m".into()
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CampaignSection {
    pub cycles: u64,
    /// The results file (JSON lines); also the campaign's state for resuming. Relative
    /// paths are relative to the config file.
    pub results: PathBuf,
    /// Random delay between the first acks and the cut: "200ms-2s" or "1s".
    #[serde(default = "d_delay")]
    pub delay: String,
    /// How long power stays off.
    #[serde(default = "d_off")]
    pub off: String,
    /// Acks to wait for before the delay starts.
    #[serde(default = "d_min_acks")]
    pub min_acks: u64,
    /// Campaign seed (random if absent; stored in the results file either way).
    #[serde(default)]
    pub seed: Option<u64>,
    /// How long to wait for acks to flow, for the drive to come back, for verify.
    #[serde(default = "d_wait")]
    pub wait_timeout: String,
    /// Ramped cuts: fall times to sweep ("0ms" cuts at once), used in turn cycle by cycle
    /// (cycle 1 the first, ...); results are reported per fall time. Needs a switch that
    /// ramps (firmware version 2, the simulated drive).
    #[serde(default)]
    pub fall_times: Vec<String>,
    /// Proof of the cut: a cycle whose rail (as the switch sampled it) never fell to this
    /// fraction of nominal or below is "cut not proven" and never counts as a pass.
    #[serde(default = "d_cut_proof_threshold")]
    pub cut_proof_threshold: f64,
    /// A cycle whose switch reports no fall trace at all is "cut not proven" too (for
    /// rigs whose board samples the rails: a missing trace is then a fault).
    #[serde(default)]
    pub require_cut_proof: bool,
}

fn d_cut_proof_threshold() -> f64 {
    0.10
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSection {
    /// "simdrive" (in-process simulated drive) or "device" (a real drive, found by serial).
    pub kind: String,
    // simdrive
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub size: Option<String>,
    // device
    /// The drive's serial number (as in /sys/block/*/device/serial or smartctl -i).
    #[serde(default)]
    pub serial: Option<String>,
    /// "sata", "nvme", "none", or any other string: a command run after power returns
    /// (env PLUGPULL_SERIAL, PLUGPULL_DISK).
    #[serde(default)]
    pub reattach: Option<String>,
    /// Must be true to write to a drive that holds a partition table or file system.
    #[serde(default)]
    pub destroy_data: bool,
    /// Read the unsafe-shutdown counter (nvme-cli or smartctl) before and after each cut.
    #[serde(default = "d_true")]
    pub unsafe_shutdown_counter: bool,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterSection {
    #[serde(default = "d_record")]
    pub record_size: String,
    #[serde(default = "d_placement")]
    pub placement: String,
    #[serde(default = "d_streams")]
    pub streams: u16,
    /// Bytes of the target to use (default: all of it).
    #[serde(default)]
    pub region: Option<String>,
}

impl Default for WriterSection {
    fn default() -> Self {
        WriterSection {
            record_size: d_record(),
            placement: d_placement(),
            streams: d_streams(),
            region: None,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WitnessSection {
    /// HOST:PORT of a running `plugpull listen`. Absent: the controller runs its own
    /// witness on loopback with its logs beside the results file (right for drive-only
    /// rigs, where the controller's host keeps power).
    #[serde(default)]
    pub addr: Option<String>,
    /// Without `addr`: where the controller's own witness listens. Whole-host mode needs
    /// an address the host under test can reach (default "0.0.0.0:7420" there).
    #[serde(default)]
    pub bind: Option<String>,
    /// Without `addr`: how long the controller's own witness keeps a connection that has
    /// not yet sent its Hello or Fetch (`plugpull listen --handshake-timeout`; default
    /// 5s). A QEMU guest's virtio-serial chardev connects when QEMU starts and sends its
    /// first frame only after the guest has booted: give it the boot time.
    #[serde(default)]
    pub handshake_timeout: Option<String>,
}

fn d_delay() -> String {
    "200ms-2s".into()
}
fn d_off() -> String {
    "2s".into()
}
fn d_min_acks() -> u64 {
    1
}
fn d_wait() -> String {
    "60s".into()
}
fn d_true() -> bool {
    true
}
fn d_record() -> String {
    "4k".into()
}
fn d_placement() -> String {
    "sequential".into()
}
fn d_streams() -> u16 {
    1
}

/// The campaign file with every value parsed and checked.
#[derive(Clone, Debug)]
pub struct Settings {
    pub file: CampaignFile,
    /// The config as JSON, stored in the results header to detect a changed config on resume.
    pub fingerprint: serde_json::Value,
    pub results: PathBuf,
    pub delay_min: Duration,
    pub delay_max: Duration,
    pub off: Duration,
    pub wait_timeout: Duration,
    /// Whole-host mode: power on → the agent's report.
    pub boot_timeout: Duration,
    /// `witness.handshake_timeout` for the controller's own witness (None: its default).
    pub witness_handshake_timeout: Option<Duration>,
    pub record_min: u64,
    pub record_max: u64,
    pub placement: Placement,
    pub region: Option<u64>,
    /// `campaign.fall_times`, parsed (empty: no ramp sweep).
    pub fall_times: Vec<Duration>,
}

/// Why a campaign file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading the campaign file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Any other refusal, with the file it came from.
    #[error("in {}", path.display())]
    In {
        path: PathBuf,
        #[source]
        source: Box<ConfigError>,
    },
    #[error("not a valid campaign file")]
    Toml(#[source] toml::de::Error),
    #[error(transparent)]
    Fingerprint(#[from] serde_json::Error),
    /// A value that breaks a rule; the message names the key and the rule.
    #[error("{0}")]
    Invalid(String),
}

type Result<T, E = ConfigError> = std::result::Result<T, E>;

/// Refuses the file with `message`.
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err(ConfigError::Invalid(format!($($arg)*)))
    };
}

fn dur(s: &str, what: &str) -> Result<Duration> {
    crate::units::parse_duration(s).map_err(|e| ConfigError::Invalid(format!("{what}: {e}")))
}

pub fn parse_range(s: &str, what: &str) -> Result<(Duration, Duration)> {
    // "200ms-2s": the '-' separates; durations never contain one.
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (dur(a, what)?, dur(b, what)?),
        None => {
            let d = dur(s, what)?;
            (d, d)
        }
    };
    if a > b {
        invalid!("{what} '{s}': the lower end is above the upper end");
    }
    Ok((a, b))
}

/// `writer.record_size`: "4k" or "4k-64k", whole 512-byte sectors, min <= max: the same
/// rule and message as `write --record-size` (both use `units::parse_size_range`).
fn record_size_range(s: &str) -> std::result::Result<(u64, u64), crate::units::UnitError> {
    let r = crate::units::parse_size_range(s)?;
    Ok((r.min, r.max))
}

impl Settings {
    pub fn load(path: &Path) -> Result<Settings> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        Settings::parse(&text, path.parent().unwrap_or(Path::new("."))).map_err(|e| {
            ConfigError::In {
                path: path.into(),
                source: Box::new(e),
            }
        })
    }

    pub fn parse(text: &str, base: &Path) -> Result<Settings> {
        let file: CampaignFile = toml::from_str(text).map_err(ConfigError::Toml)?;
        let fingerprint = fingerprint(text)?;
        let c = &file.campaign;
        let (delay_min, delay_max) = parse_range(&c.delay, "campaign.delay")?;
        let (record_min, record_max) = record_size_range(&file.writer.record_size)
            .map_err(|e| ConfigError::Invalid(format!("writer.record_size: {e}")))?;
        let placement = match file.writer.placement.as_str() {
            "sequential" => Placement::Sequential,
            "random" => Placement::Random,
            p => invalid!("writer.placement '{p}': use sequential or random"),
        };
        let region = match &file.writer.region {
            Some(s) => Some(
                crate::units::parse_size(s)
                    .map_err(|e| ConfigError::Invalid(format!("writer.region: {e}")))?,
            ),
            None => None,
        };
        check_target_and_power(&file)?;
        let witness_handshake_timeout = match &file.witness.handshake_timeout {
            Some(_) if file.witness.addr.is_some() => invalid!(
                "witness.handshake_timeout applies to the controller's own witness, and witness.addr names another: give that witness `plugpull listen --handshake-timeout` instead"
            ),
            Some(t) => Some(dur(t, "witness.handshake_timeout")?),
            None => None,
        };
        if c.cycles == 0 {
            invalid!("campaign.cycles must be at least 1");
        }
        if !(c.cut_proof_threshold > 0.0 && c.cut_proof_threshold < 1.0) {
            invalid!(
                "campaign.cut_proof_threshold {} must be a fraction of nominal between 0 and 1 (0.10: the rail fell to 10%)",
                c.cut_proof_threshold
            );
        }
        let fall_times = c
            .fall_times
            .iter()
            .map(|f| dur(f, "campaign.fall_times"))
            .collect::<Result<Vec<_>>>()?;
        let results = if c.results.is_absolute() {
            c.results.clone()
        } else {
            base.join(&c.results)
        };
        let off = dur(&c.off, "campaign.off")?;
        crate::power::switch::check_off("campaign.off", off)
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let wait_timeout = dur(&c.wait_timeout, "campaign.wait_timeout")?;
        let mut file = file;
        if let Some(k) = file.agent.key_file.as_mut().filter(|k| k.is_relative()) {
            *k = base.join(&*k);
        }
        if let PowerConfig::Simdrive { traces } = &mut file.power {
            for t in traces.iter_mut().filter(|t| t.is_relative()) {
                *t = base.join(&*t);
            }
        }
        if let PowerConfig::Redfish {
            ca_file: Some(f), ..
        } = &mut file.power
        {
            if f.is_relative() {
                *f = base.join(&*f);
            }
        }
        Ok(Settings {
            fingerprint,
            results,
            delay_min,
            delay_max,
            off,
            wait_timeout,
            boot_timeout: dur(&file.agent.boot_timeout, "agent.boot_timeout")?,
            witness_handshake_timeout,
            record_min,
            record_max,
            placement,
            region,
            fall_times,
            file,
        })
    }
}

/// What a resumed campaign's file must match: all of it but `campaign.cycles` (which may
/// grow on resume), as JSON.
pub fn fingerprint(text: &str) -> Result<serde_json::Value> {
    let raw: toml::Value = toml::from_str(text).map_err(ConfigError::Toml)?;
    let mut fingerprint = serde_json::to_value(&raw)?;
    if let Some(c) = fingerprint
        .get_mut("campaign")
        .and_then(|c| c.as_object_mut())
    {
        c.remove("cycles");
    }
    Ok(fingerprint)
}

impl Settings {
    /// The fall time of `cycle` (1-based) in a ramp sweep: the sweep's values in turn.
    pub fn fall_time(&self, cycle: u64) -> Option<Duration> {
        let n = self.fall_times.len() as u64;
        (n > 0).then(|| self.fall_times[((cycle.max(1) - 1) % n) as usize])
    }

    /// How the controller's own witness (no `witness.addr`) runs: quiet, with
    /// `witness.handshake_timeout` when given. A handshake that may take longer than the
    /// witness's idle timeout raises that too, since the witness drops a pending
    /// connection at the shorter of the two.
    pub fn witness_options(&self) -> WitnessOptions {
        let mut o = WitnessOptions {
            quiet: true,
            ..Default::default()
        };
        if let Some(t) = self.witness_handshake_timeout {
            o.handshake_timeout = t;
            o.idle_timeout = o.idle_timeout.max(t);
        }
        o
    }
}

/// The target kind and the switch must fit together: a simulated drive needs the
/// simulated switch, a drive-only campaign a switch that cuts only the drive, a
/// whole-host campaign one that cuts the host.
fn check_target_and_power(file: &CampaignFile) -> Result<()> {
    match file.target.kind.as_str() {
        "simdrive" => {
            if !matches!(file.power, PowerConfig::Simdrive { .. }) {
                invalid!(
                    "[target] kind = \"simdrive\" needs [power] driver = \"simdrive\" (a real switch cannot cut a simulated drive)"
                );
            }
        }
        "device" => {
            if file.target.serial.is_none() {
                invalid!(
                    "[target] kind = \"device\" needs serial = \"...\": the drive is found by its serial number, never by an sdX name that can change after a cut (see `lsblk -o NAME,SERIAL`)"
                );
            }
            if let PowerConfig::PcieSlot { serial, .. } = &file.power {
                if file.target.serial.as_deref() != Some(serial.as_str()) {
                    invalid!(
                        "power.serial {serial:?} is not [target] serial: the pcie-slot driver must cut the slot of the drive under test"
                    );
                }
            }
            if matches!(file.power, PowerConfig::Redfish { .. }) {
                invalid!(
                    "power.driver redfish cuts the whole host through its BMC: a drive-only campaign would cut its own controller. Use it with [target] kind = \"host\" and `plugpull agent` on the host under test (docs/campaign.md, whole-host mode)"
                );
            }
            if let PowerConfig::Command { scope, .. }
            | PowerConfig::Http { scope, .. }
            | PowerConfig::Manual { scope } = &file.power
            {
                if *scope == crate::power::Scope::Host {
                    invalid!(
                        "this switch cuts the whole host: a drive-only campaign would cut its own controller. Use `plugpull agent` on the host under test (docs/campaign.md, whole-host mode), or set power.scope = \"drive\" if it really cuts only the drive"
                    );
                }
            }
        }
        "host" => {
            if matches!(file.power, PowerConfig::PcieSlot { .. }) {
                invalid!(
                    "[target] kind = \"host\" cuts a whole host: power.driver pcie-slot cuts one NVMe slot of the host it runs on (use it with kind = \"device\")"
                );
            }
            if matches!(file.power, PowerConfig::Simdrive { .. }) {
                invalid!(
                    "[target] kind = \"host\" cuts a whole host: power.driver simdrive cuts only the in-process simulated drive (use command, http, serial or manual)"
                );
            }
            if let PowerConfig::Command { scope, .. }
            | PowerConfig::Http { scope, .. }
            | PowerConfig::Manual { scope } = &file.power
            {
                if *scope == crate::power::Scope::Drive {
                    invalid!(
                        "[target] kind = \"host\" needs a switch that cuts the whole host: set power.scope = \"host\" (a drive-only switch leaves the agent running)"
                    );
                }
            }
        }
        k => invalid!("[target] kind '{k}': use simdrive, device or host"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIM: &str = "[target]\nkind = \"simdrive\"\n[power]\ndriver = \"simdrive\"\n";

    fn parse(campaign_extra: &str, rest: &str) -> Result<Settings> {
        let text =
            format!("[campaign]\ncycles = 3\nresults = \"r.jsonl\"\n{campaign_extra}\n{rest}");
        Settings::parse(&text, Path::new("/base"))
    }

    #[test]
    fn fall_times_go_round_robin_by_cycle_and_traces_are_relative_to_the_file() {
        let s = parse(
            "fall_times = [\"0ms\", \"5ms\", \"100ms\"]",
            "[target]\nkind = \"simdrive\"\n[power]\ndriver = \"simdrive\"\ntraces = [\"t/a.trace\", \"/abs.trace\"]\n",
        )
        .unwrap();
        let ms = |c| s.fall_time(c).unwrap().as_millis();
        assert_eq!((ms(1), ms(2), ms(3), ms(4)), (0, 5, 100, 0));
        assert_eq!(s.file.campaign.cut_proof_threshold, 0.10);
        match &s.file.power {
            PowerConfig::Simdrive { traces } => assert_eq!(
                traces,
                &[
                    PathBuf::from("/base/t/a.trace"),
                    PathBuf::from("/abs.trace")
                ]
            ),
            p => panic!("{p:?}"),
        }
        assert_eq!(parse("", SIM).unwrap().fall_time(1), None);
    }

    #[test]
    fn bad_proof_and_sweep_settings_are_refused() {
        for (extra, rest, says) in [
            ("cut_proof_threshold = 1.5", SIM, "cut_proof_threshold"),
            ("cut_proof_threshold = 0.0", SIM, "cut_proof_threshold"),
            ("fall_times = [\"soon\"]", SIM, "campaign.fall_times"),
            (
                "",
                "[target]\nkind = \"device\"\nserial = \"A\"\n[power]\ndriver = \"pcie-slot\"\nserial = \"B\"\n",
                "power.serial",
            ),
            (
                "",
                "[target]\nkind = \"host\"\n[power]\ndriver = \"pcie-slot\"\nserial = \"B\"\n",
                "pcie-slot",
            ),
        ] {
            let e = parse(extra, rest).err().unwrap().to_string();
            assert!(e.contains(says), "{extra} {rest}: {e}");
        }
    }
}
