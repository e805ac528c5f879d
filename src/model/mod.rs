//! The vocabulary every other module speaks: acknowledgements, run descriptors, what the
//! witness saw. It sits at the bottom of the crate and imports nothing above it, so the
//! writer, the witness and the verifier agree on what an ack is without knowing each other.

use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use crate::record::{RecordId, RunId};
use serde::{Deserialize, Serialize};

pub mod peer_text;
pub mod verdict;
pub use verdict::{ClassCounts, LossWindow, RecordClass, ReportSummary, Verdict};

/// Where records go within the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Each stream writes its share of the region front to back, wrapping around.
    Sequential,
    /// Each record at a random record-aligned offset within the stream's share.
    Random,
}

impl Placement {
    /// Every placement, in the order the command line lists them.
    pub const ALL: [Placement; 2] = [Placement::Sequential, Placement::Random];

    /// The name used on the command line, in config files and in `WriterSettings`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Sequential => "sequential",
            Placement::Random => "random",
        }
    }
}

impl std::fmt::Display for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A placement name that is none of [`Placement::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown placement '{0}' (expected sequential or random)")]
pub struct UnknownPlacement(pub String);

impl std::str::FromStr for Placement {
    type Err = UnknownPlacement;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Placement::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownPlacement(s.to_string()))
    }
}

/// The writer's promise: `record` was written and the flush covering it returned success
/// at `flushed_ns` (writer clock, ns since the Unix epoch). Submission time is
/// `record.write_time_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack {
    pub record: RecordId,
    pub flushed_ns: u64,
}

/// Where the writer puts records and how it flushes them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriterSettings {
    pub region_offset: u64,
    pub region_bytes: u64,
    pub record_bytes_min: u64,
    pub record_bytes_max: u64,
    /// "sequential" (a ring over each stream's share of the region) or "random".
    pub placement: String,
    pub streams: u16,
    pub flush: FlushMethod,
    pub direct: bool,
    pub seed: u64,
    /// The most records one stream can have written past the last ack the witness
    /// holds when its power is cut (those in flight, `--batch`, plus those not yet
    /// confirmed, `--max-unconfirmed`): more on the medium prove the ack log was taken
    /// before the writer stopped (`verify::beyond`). Absent from older writers' and
    /// library callers' descriptors: then nothing is concluded from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_records_unacked: Option<u64>,
    /// Which write loop wrote the run and how deep (`write --iodepth`, docs/depth.md):
    /// four more keys of `settings`, each absent when not recorded.
    #[serde(flatten)]
    pub io: IoSettings,
}

/// How the writer kept writes in flight and flushed them: the values `write --json`
/// reports as `engine`, `iodepth`, `flush_every` and `flush_within_us`. Descriptors of
/// writers before these were recorded (and of library callers that leave them out)
/// have none of the keys: every field is then None and nothing is said of the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSettings {
    /// "sync" (one write in flight per stream) or "io_uring".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Writes in flight per stream (1 for `sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iodepth: Option<u32>,
    /// io_uring with fdatasync or fsync: a flush once this many writes completed...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_every: Option<u32>,
    /// ...or this many microseconds after the first of them completed, whichever came
    /// first. Both absent for `sync`, and for io_uring with dsync or none (no flushes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_within_us: Option<u64>,
}

impl IoSettings {
    /// The synchronous loop: one write in flight per stream.
    pub fn sync() -> IoSettings {
        IoSettings {
            engine: Some("sync".into()),
            iodepth: Some(1),
            flush_every: None,
            flush_within_us: None,
        }
    }
}

/// Everything the witness keeps about a run besides its acks; sent in the handshake and
/// stored as the first frame of the run's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDescriptor {
    #[serde(with = "run_id_hex")]
    pub run_id: RunId,
    pub format_version: u16,
    pub plugpull_version: String,
    pub host: String,
    /// RFC 3339, writer clock.
    pub started_at: String,
    pub device: DeviceIdentity,
    pub settings: WriterSettings,
    /// The command line that started the writer.
    pub command: Vec<String>,
    /// Set for a tree run (`plugpull write DIR`, docs/tree.md): its acks are file
    /// entries, and the plan they refer to is regenerated from these settings. Absent in
    /// logs written before tree runs existed, which stay readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeSettings>,
}

impl RunDescriptor {
    /// The descriptor of a run this process starts now: its format and plugpull version,
    /// host, start time and command line are this process's; what was written where is
    /// the caller's.
    pub fn started_here(
        run_id: RunId,
        device: DeviceIdentity,
        settings: WriterSettings,
        tree: Option<TreeSettings>,
    ) -> RunDescriptor {
        RunDescriptor {
            run_id,
            format_version: crate::record::FORMAT_VERSION,
            plugpull_version: env!("CARGO_PKG_VERSION").into(),
            host: this_host(),
            started_at: chrono::Utc::now().to_rfc3339(),
            device,
            settings,
            command: std::env::args().collect(),
            tree,
        }
    }
}

/// This host's name, as runs started here name it; empty when the system does not say.
pub fn this_host() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What a tree run wrote, enough to regenerate its plan (`tree::plan::plan`) and find
/// it: the seed and scale, the plan generator's version, the tree's root directory name
/// under the target directory, and the flush method by name (the tree methods include a
/// testing-only one that `FlushMethod` does not have).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeSettings {
    pub plan_version: u16,
    pub seed: u64,
    pub files: u32,
    pub total_bytes: u64,
    /// The run's root, one directory name inside the target directory.
    pub root: String,
    /// "fsync", "fdatasync", "dsync", "none" or "testing-only-skip-dir-fsync".
    pub flush: String,
}

pub mod run_id_hex {
    use crate::record::RunId;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(r: &RunId, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&r.hex())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RunId, D::Error> {
        let s = String::deserialize(d)?;
        RunId::parse(&s).ok_or_else(|| serde::de::Error::custom("run id must be 32 hex digits"))
    }
}

/// A run as the witness holds it: descriptor, every durable ack in ack-number order, and
/// what the witness saw of the writer's connections.
#[derive(Clone, Debug)]
pub struct RunLog {
    pub descriptor: RunDescriptor,
    pub acks: Vec<Ack>,
    pub events: Vec<WitnessEvent>,
    /// The names of file acks (a tree run's FileAcks entries, docs/protocol.md), by
    /// their index in `acks`. Empty for device runs and for tree runs logged before file
    /// acks named their file (then verify takes the names from the run's plan).
    pub files: std::collections::BTreeMap<usize, FileName>,
}

/// What a file ack says beyond its [`Ack`]: where the file is. Why in the ack and not only
/// in the plan: the witness then holds, in its own log, which name each acknowledged file
/// must have, and verify cross-checks that against the plan (docs/tree.md).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FileName {
    /// The final path relative to the run's tree root, '/'-separated.
    pub path: String,
    /// The temporary name (relative to the tree root) the file was written under and
    /// renamed from, if it arrived by rename.
    pub renamed_from: Option<String>,
}

/// Something the witness observed, on its own clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WitnessEvent {
    /// ns since the Unix epoch, witness clock.
    pub at_ns: u64,
    /// "connect", "disconnect", "bye", "error" in a log; a fetch adds
    /// [`LATER_RUN_EVENT`] and [`WRITER_CONNECTED_EVENT`], and damage events.
    pub kind: String,
    pub peer: String,
    /// Acks durable in the log when the event happened.
    pub durable_acks: u64,
    /// Witness time of the last ack received on that connection (disconnect only).
    pub last_ack_at_ns: Option<u64>,
    /// Witness time of the last frame of any kind received on that connection: when the
    /// writer was last heard, which is when it stopped if it fell silent (the event
    /// itself comes when the witness noticed, up to `--idle-timeout` later). On the
    /// events that end a connection; absent from older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_frame_at_ns: Option<u64>,
    pub detail: String,
}

/// Event kind a fetch adds for each run of the same drive that the witness first heard
/// of after the fetched one: `at_ns` is that time (witness clock), `detail` its run id.
pub const LATER_RUN_EVENT: &str = "later-run";

/// Event kind a fetch adds when the run's writer is still connected: `at_ns` is the time
/// of the fetch, `last_ack_at_ns` the time of the writer's last frame (witness clock).
pub const WRITER_CONNECTED_EVENT: &str = "writer-connected";

/// How a writer's Bye reason starts, by how the writer stopped (docs/protocol.md "Bye").
pub mod bye {
    /// It wrote what it was asked to (`--count`, `--duration`, `--size`).
    pub const FINISHED: &str = "writer finished";
    /// It was stopped by a signal (Ctrl-C, SIGTERM) before the target failed.
    pub const STOPPED: &str = "writer stopped";
    /// A write or flush of the target failed with the error of a drive that is gone
    /// (`device::error::DRIVE_GONE_ERRNOS`): what a drive losing its power looks like.
    pub const TARGET_FAILED: &str = "target failed";
    /// A write or flush failed with any other error (ENOSPC on a thin backing, ...): the
    /// writer stopped, and nothing says the drive lost power.
    pub const WRITE_FAILED: &str = "writer failed";
}

/// How a `disconnect` event's detail starts, by what the witness saw end the connection.
pub mod disconnect {
    /// The writer's host closed the connection (FIN, or a reset): its kernel was running,
    /// so this is a writer process that ended (killed, crashed), not a power cut.
    pub const CLOSED: &str = "connection closed by the writer";
    /// Nothing came for `--idle-timeout`: the writer fell silent, as a host that lost
    /// power does.
    pub const SILENT: &str = "no complete frame for";
    /// The witness restarted while the writer was connected; written at its start.
    pub const WITNESS_RESTARTED: &str = "the witness restarted while the writer was connected";
}

/// Which run to fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunSelector {
    Run(RunId),
    /// The newest run whose descriptor's `device.key()` matches.
    LatestForDevice(String),
}

pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
