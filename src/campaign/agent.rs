//! `plugpull agent`: the host-under-test half of a whole-host campaign.
//!
//! Why it exists: when the switch cuts the whole host, the writer dies with it, so the
//! host itself must pick up after every boot. Started by systemd at boot
//! (hardware/systemd/plugpull-agent.service), the agent
//! 1. verifies the run its state file names (the one power was cut under) against the
//!    witness, waiting for the drive to come back;
//! 2. reports the verdict to the controller, which answers with the next run's settings
//!    (or "stop");
//! 3. writes the state file (on the system disk, never the drive under test) and fsyncs
//!    it before the first write, so a cut at any moment leaves a state that names the run;
//! 4. writes until the power dies, telling the controller once acks flow.
//!
//! The agent config is a small TOML file (docs/campaign.md, whole-host mode).

use super::agent_auth::AgentKey;
use super::agent_proto::{AgentMsg, PreviousRun, ProtoError, Reply, RunOrder, request, retrying};
use super::results::LastAcked;
use crate::cycle::{AfterCut, NoAcks, wait_for_acks, write_until_cut};
use crate::device::health::AcrossTheCut;
use crate::device::{
    Device, DeviceError, FileDevice, FlushMethod, OpenOptions, identity, is_block_device,
};
use crate::exit::error_chain;
use crate::model::Placement;
use crate::model::ReportSummary;
use crate::record::RunId;
use crate::units::UnitError;
use crate::witness::client::error::ClientError;
use crate::witness::client::{AckSender, ClientOptions};
use crate::write::plan::{Plan, PlanError};
use crate::write::run_descriptor;
use crate::write::target::TargetError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const STATE_FORMAT: &str = "plugpull-agent-state/1";

/// Why the agent could not verify, report or start a run. Those met while verifying the
/// previous run are reported to the controller (with their causes) instead.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("reading the agent config {}", path.display())]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a valid agent config", path.display())]
    BadConfig {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "{}: [target] needs exactly one of serial = \"...\" (the drive under test, found by serial) or path = \"/dev/disk/by-id/...\"",
        path.display()
    )]
    TargetNotOne { path: PathBuf },
    #[error("{what}: {reason}")]
    BadDuration {
        what: &'static str,
        reason: UnitError,
    },
    #[error("{} does not exist", path.display())]
    NoSuchPath { path: PathBuf },
    #[error("no drive with serial {serial} under /sys/block")]
    NoDriveWithSerial { serial: String },
    #[error("the drive did not appear within {wait:?}")]
    DriveNotAppeared {
        wait: Duration,
        #[source]
        source: Box<AgentError>,
    },
    /// The drive appeared but cannot be opened.
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(
        "the agent state {} is damaged: remove it to start afresh (the previous run then goes unverified)",
        path.display()
    )]
    StateDamaged {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// I/O on the state file; `doing` says which step on which path.
    #[error("{doing}")]
    State {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// The state file is a link or not a regular file, or writing it failed.
    #[error(transparent)]
    StateFile(#[from] crate::userfile::UserFileError),
    /// Writing the state file's content failed.
    #[error(transparent)]
    StateWrite(#[from] std::io::Error),
    #[error(transparent)]
    StateEncode(#[from] serde_json::Error),
    #[error(
        "the controller did not answer within {wait:?}: is `plugpull campaign` running there with [target] kind = \"host\", and is its [agent] listen address reachable from here?"
    )]
    ControllerSilent {
        wait: Duration,
        #[source]
        source: ProtoError,
    },
    #[error("the controller answered the boot report with no order")]
    NoOrder,
    #[error("the controller refused this agent's report: {why}")]
    Refused { why: String },
    #[error("key_file")]
    Key(#[source] crate::wire::auth::KeyError),
    #[error("the state file's run id is not 32 hex digits")]
    BadRunId,
    #[error("fetching run {run} from the witness {witness}")]
    Fetch {
        run: RunId,
        witness: String,
        #[source]
        source: ClientError,
    },
    /// The drive is not safe to write, or not as the order asks.
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("the controller's writer settings: {reason}")]
    BadOrder { reason: PlanError },
    /// The writer's ack sender could not reach the witness.
    #[error(transparent)]
    Connect(#[from] ClientError),
    #[error(transparent)]
    NoAcks(#[from] NoAcks),
    /// The writer's record buffers could not be allocated: nothing was written.
    #[error(transparent)]
    NoBufferMemory(#[from] crate::write::engine::NoBufferMemory),
}

type Result<T, E = AgentError> = std::result::Result<T, E>;

/// Wraps an I/O error on the state file with the step that failed.
fn state_step(doing: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> AgentError {
    move |source| AgentError::State {
        doing: doing(),
        source,
    }
}

/// /etc/plugpull/agent.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// The controller's agent listener, HOST:PORT (`[agent] listen` of its campaign file).
    pub controller: String,
    /// The witness, HOST:PORT, on a machine that keeps power.
    pub witness: String,
    /// The state file, on the system disk (never on the drive under test).
    pub state: PathBuf,
    /// How long to keep trying to reach the controller at boot.
    #[serde(default = "d_controller_wait")]
    pub controller_wait: String,
    /// The controller's `[agent] key_file` (a copy): every message is sealed under it.
    /// Absent: the agent sends plain messages, which a controller takes only with
    /// `allow_unauthenticated_agents` on a loopback address.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    pub target: AgentTarget,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTarget {
    /// The drive's serial number (found under /sys/block at every boot).
    #[serde(default)]
    pub serial: Option<String>,
    /// Or a path: /dev/disk/by-id/... (stable across boots), or a file (tests).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// Must be true to write to a drive or file that holds data other than plugpull's.
    #[serde(default)]
    pub destroy_data: bool,
    /// How long to wait at boot for the drive to appear before calling it dead.
    #[serde(default = "d_wait")]
    pub wait: String,
    /// Read the unsafe-shutdown counter (nvme-cli / smartctl) before the run and at boot.
    #[serde(default = "d_true")]
    pub unsafe_shutdown_counter: bool,
}

fn d_controller_wait() -> String {
    "24h".into()
}
fn d_wait() -> String {
    "120s".into()
}
fn d_true() -> bool {
    true
}

/// What the agent keeps across a power cut.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentState {
    pub format: String,
    pub cycle: u64,
    /// The run being written (None once reported and nothing new started).
    pub run_id: Option<String>,
    pub witness: String,
    pub target: String,
    pub started_at: String,
    pub unsafe_shutdowns_before: Option<u64>,
    /// The drive's health counters before the run (`device::health`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_before: Option<crate::device::health::Health>,
}

impl AgentConfig {
    pub fn load(path: &Path) -> Result<AgentConfig> {
        let text = std::fs::read_to_string(path).map_err(|source| AgentError::ReadConfig {
            path: path.into(),
            source,
        })?;
        let c: AgentConfig = toml::from_str(&text).map_err(|source| AgentError::BadConfig {
            path: path.into(),
            source,
        })?;
        match (&c.target.serial, &c.target.path) {
            (None, None) | (Some(_), Some(_)) => {
                return Err(AgentError::TargetNotOne { path: path.into() });
            }
            _ => {}
        }
        Ok(c)
    }

    fn dur(&self, s: &str, what: &'static str) -> Result<Duration> {
        crate::units::parse_duration(s).map_err(|reason| AgentError::BadDuration { what, reason })
    }

    /// The drive under test now (sdX names may change across boots; serials do not).
    fn resolve(&self) -> Result<PathBuf> {
        if let Some(p) = &self.target.path {
            if p.exists() {
                return Ok(p.clone());
            }
            return Err(AgentError::NoSuchPath { path: p.clone() });
        }
        let serial = self.target.serial.as_deref().unwrap_or_default();
        super::target::find_by_serial(serial)
            .map(|(_, p)| p)
            .ok_or_else(|| AgentError::NoDriveWithSerial {
                serial: serial.into(),
            })
    }

    fn wait_for_target(&self) -> Result<PathBuf> {
        let wait = self.dur(&self.target.wait, "target.wait")?;
        let t0 = Instant::now();
        loop {
            match self.resolve() {
                Ok(p) => return Ok(p),
                Err(e) if t0.elapsed() >= wait => {
                    return Err(AgentError::DriveNotAppeared {
                        wait,
                        source: Box::new(e),
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

pub fn read_state(path: &Path) -> Result<Option<AgentState>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(serde_json::from_slice(&b).map_err(|source| {
            AgentError::StateDamaged {
                path: path.into(),
                source,
            }
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(state_step(|| format!("reading {}", path.display()))(e)),
    }
}

/// Write to a new temporary file with a random name, fsync, rename over, fsync the
/// directory: after a cut the state is either the old one or the new one, never torn.
/// Why a random name made with O_EXCL|O_NOFOLLOW, not a fixed `state.tmp`: a fixed name
/// could be a link planted to some other file, which would be truncated and written.
/// The state path itself must be missing or a regular file.
pub fn write_state(path: &Path, s: &AgentState) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(state_step(|| format!("creating {}", dir.display())))?;
    crate::userfile::replace(path, serde_json::to_string_pretty(s)?.as_bytes(), 0o666)?;
    Ok(())
}

fn say(s: String) {
    eprintln!("plugpull agent: {s}");
}

/// What `plugpull agent` runs.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The agent config (TOML).
    pub config: PathBuf,
}

/// How an agent's boot ended (errors aside).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentEnd {
    /// Nothing (more) to write, or the writer ended by itself.
    Done,
    /// The drive failed under the writer while this host kept power.
    DriveFailedWithPower,
}

/// One boot of the host under test: verify and report the previous run, then write the
/// next one until the power dies.
pub fn run(o: AgentOptions) -> Result<AgentEnd> {
    let cfg = AgentConfig::load(&o.config)?;
    let host = crate::model::this_host();
    let key = cfg
        .key_file
        .as_deref()
        .map(AgentKey::from_file)
        .transpose()
        .map_err(AgentError::Key)?;
    let state = read_state(&cfg.state)?;
    let previous = match &state {
        Some(s) if s.run_id.is_some() => {
            say(format!(
                "verifying run {} of cycle {}",
                s.run_id.as_deref().unwrap_or_default(),
                s.cycle
            ));
            let p = verify_previous(&cfg, s);
            say(format!(
                "cycle {}: {} - {}",
                p.cycle,
                p.report.verdict,
                p.error.as_deref().unwrap_or(&p.report.summary)
            ));
            Some(Box::new(p))
        }
        _ => None,
    };
    let boot = AgentMsg::Boot {
        host: host.clone(),
        previous,
    };
    let reply = ask(&cfg, key.as_ref(), &boot)?;
    if let Some(mut s) = state {
        // Reported: a later restart without a new run must not report it again.
        s.run_id = None;
        write_state(&cfg.state, &s)?;
    }
    match reply {
        Reply::Stop { why } => {
            say(format!("nothing to write: {why}"));
            Ok(AgentEnd::Done)
        }
        Reply::Next(order) => write_run(&cfg, key.as_ref(), &host, &order),
        Reply::Ok => Err(AgentError::NoOrder),
        Reply::Refused { why } => Err(AgentError::Refused { why }),
    }
}

/// How long the controller has to answer one message (it answers at once; a lost
/// message or reply is sent again on a fresh connection after this).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long to keep retrying the witness at boot (it may be coming up too).
const WITNESS_WAIT: Duration = Duration::from_secs(60);

/// Tells each failure while retrying `what`: the first one, then one every 30 s.
fn teller<E: std::error::Error + 'static>(what: &'static str) -> impl FnMut(&E) {
    let mut last_said = None::<Instant>;
    move |e: &E| {
        if last_said.is_none_or(|t| t.elapsed() > Duration::from_secs(30)) {
            say(format!("waiting for {what}: {}", error_chain(e)));
            last_said = Some(Instant::now());
        }
    }
}

/// Sends `msg` until the controller answers (it may start after this host).
fn ask(cfg: &AgentConfig, key: Option<&AgentKey>, msg: &AgentMsg) -> Result<Reply> {
    let wait = cfg.dur(&cfg.controller_wait, "controller_wait")?;
    retrying(
        wait,
        Duration::from_millis(200),
        teller("the controller"),
        || request(&cfg.controller, msg, REPLY_TIMEOUT, key),
    )
    .map_err(|source| AgentError::ControllerSilent { wait, source })
}

fn verify_previous(cfg: &AgentConfig, s: &AgentState) -> PreviousRun {
    let run_id = s.run_id.clone().unwrap_or_default();
    let mut p = PreviousRun {
        cycle: s.cycle,
        run_id: run_id.clone(),
        report: ReportSummary::default(),
        acked_records: 0,
        last_acked: None,
        reattach_ms: None,
        unsafe_shutdowns_delta: None,
        health: None,
        error: None,
    };
    let t0 = Instant::now();
    // Into a temporary file, judged from there: the run may be hours of acks.
    let fetched = match RunId::parse(&run_id)
        .ok_or(AgentError::BadRunId)
        .and_then(|r| fetch_retrying(&s.witness, r))
    {
        Ok(f) => f,
        Err(e) => {
            p.error = Some(error_chain(&e));
            return p;
        }
    };
    p.acked_records = fetched.acks;
    let found = cfg.wait_for_target().and_then(|path| {
        let d = FileDevice::open_read(&path)?;
        Ok((path, d))
    });
    let drive = match found {
        Ok((path, d)) => {
            p.reattach_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
            if cfg.target.unsafe_shutdown_counter && is_block_device(&path) {
                let after = super::target::health(&path);
                p.health = AcrossTheCut::of(s.health_before.clone(), after);
                p.unsafe_shutdowns_delta = p
                    .health
                    .as_ref()
                    .and_then(AcrossTheCut::unsafe_shutdowns_delta);
            }
            Ok(Arc::new(d) as Arc<dyn Device>)
        }
        Err(e) => Err(error_chain(&e)),
    };
    let judged = fetched.judge(drive, Duration::from_secs(30));
    p.last_acked = judged.newest_ack.as_ref().map(LastAcked::of);
    p.report = judged.report.to_summary();
    p
}

/// The witness may still be coming up too (a shared outage): retry for a minute.
fn fetch_retrying(witness: &str, run: RunId) -> Result<crate::cycle::fetched::FetchedRun> {
    retrying(
        WITNESS_WAIT,
        Duration::from_millis(250),
        teller("the witness"),
        || crate::cycle::fetched::fetch_run(witness, run),
    )
    .map_err(|source| AgentError::Fetch {
        run,
        witness: witness.into(),
        source,
    })
}

fn write_run(
    cfg: &AgentConfig,
    key: Option<&AgentKey>,
    host: &str,
    o: &RunOrder,
) -> Result<AgentEnd> {
    let path = cfg.wait_for_target()?;
    let destroy = cfg.target.destroy_data.then_some(path.as_path());
    let (dev, region) = crate::write::open_target(
        &path,
        destroy,
        0,
        o.region,
        OpenOptions {
            direct: true,
            flush: FlushMethod::Fdatasync,
        },
    )?;
    let plan = order_plan(o, region, dev.logical_block_bytes())?;
    let health_before = (cfg.target.unsafe_shutdown_counter && is_block_device(&path))
        .then(|| super::target::health(&path))
        .flatten();
    // The state names the run before anything is written or acknowledged.
    write_state(
        &cfg.state,
        &AgentState {
            format: STATE_FORMAT.into(),
            cycle: o.cycle,
            run_id: Some(plan.run.hex()),
            witness: cfg.witness.clone(),
            target: path.display().to_string(),
            started_at: chrono::Utc::now().to_rfc3339(),
            unsafe_shutdowns_before: health_before.as_ref().and_then(|h| h.unsafe_shutdowns),
            health_before,
        },
    )?;
    let descriptor = run_descriptor(
        &plan,
        identity::identify(&path),
        FlushMethod::Fdatasync,
        true,
    );
    // A Hello lost with its connection is sent again: the witness takes a repeated Hello
    // of a run that has no acks yet.
    let sender = retrying(
        WITNESS_WAIT,
        Duration::from_millis(250),
        teller("the witness"),
        || AckSender::connect(&cfg.witness, &descriptor, ClientOptions::default()),
    )?;
    say(format!(
        "cycle {}: run {} -> {} ({} bytes), seed {}; writing until the power is cut",
        o.cycle,
        plan.run,
        path.display(),
        region,
        o.seed
    ));
    // The cut is the controller's: tell it acks flow, then write until the power dies.
    let (told, progress) = write_until_cut(&dev as &dyn Device, &plan, &sender, |progress| {
        let told = (|| -> Result<()> {
            wait_for_acks(progress, o.min_acks.max(1), None)?;
            let msg = AgentMsg::Acking {
                host: host.into(),
                cycle: o.cycle,
                run_id: plan.run.hex(),
                acked: progress.records_acked(),
            };
            match ask(cfg, key, &msg)? {
                Reply::Refused { why } => Err(AgentError::Refused { why }),
                _ => Ok(()),
            }
        })();
        let after = if told.is_err() {
            AfterCut::StopWriter
        } else {
            AfterCut::LetItRun
        };
        (told, after)
    })?;
    let _ = sender.finish(Duration::from_secs(10));
    told?;
    match progress.failure() {
        Some(f) => {
            say(format!(
                "the drive failed under the writer ({} returned {}) but this host kept power: the switch may cut only the drive, or the drive died by itself",
                f.during, f.error
            ));
            Ok(AgentEnd::DriveFailedWithPower)
        }
        None => Ok(AgentEnd::Done),
    }
}

/// The writer of the controller's order, over `region` bytes of the target.
fn order_plan(o: &RunOrder, region: u64, block_bytes: u32) -> Result<Plan> {
    let plan = Plan {
        run: RunId::random(),
        region_offset: 0,
        region_bytes: region,
        record_min: o.record_min,
        record_max: o.record_max,
        placement: if o.placement == "random" {
            Placement::Random
        } else {
            Placement::Sequential
        },
        streams: o.streams,
        seed: o.seed,
        align: (block_bytes as u64).max(512),
        count: None,
        duration: None,
    };
    plan.validate()
        .map_err(|reason| AgentError::BadOrder { reason })?;
    Ok(plan)
}
