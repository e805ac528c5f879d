//! What every part of the witness shares: its options, the run slots connections hand
//! each other, the device index, and the counters the caps are checked against.
//!
//! Why a module of its own: the gate, the connection threads, startup recovery and the
//! `listen` command all hold one `Arc<Shared>`; defining it apart keeps each of them
//! free of the others.

use crate::model::RunDescriptor;
use crate::record::RunId;
use crate::wire::auth::Key;
use crate::witness::store::journal::{Journal, JournalOptions};
use crate::witness::store::log::AckLog;
use crate::witness::validate::SeqTracker;
use std::collections::HashMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Tunables of the witness.
#[derive(Clone, Debug)]
pub struct WitnessOptions {
    /// Writer connections (past their Hello) beyond this are answered with an Error and
    /// closed. Pending handshakes and fetches have caps of their own
    /// ([`MAX_PENDING_HANDSHAKES`](super::MAX_PENDING_HANDSHAKES),
    /// [`FETCH_CONNECTIONS`](super::FETCH_CONNECTIONS)).
    pub max_connections: usize,
    /// A connection that completes no frame for this long is closed (writers send
    /// heartbeats). Counted from the last complete frame, not the last byte.
    pub idle_timeout: Duration,
    /// A connection must complete its handshake (Hello or Fetch, after Auth with a key)
    /// within this long of connecting; no frame extends it.
    pub handshake_timeout: Duration,
    /// Largest frame (`len` field) accepted from a peer; at most frame::MAX_FRAME_BYTES.
    pub max_frame_bytes: usize,
    /// Pre-shared key: when set, every client must authenticate (module `auth`).
    pub key: Option<Key>,
    /// No log lines on stderr (library use in tests).
    pub quiet: bool,
    pub journal: JournalOptions,
}

impl Default for WitnessOptions {
    fn default() -> Self {
        WitnessOptions {
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(5),
            max_frame_bytes: 4 << 20,
            key: None,
            quiet: false,
            journal: JournalOptions::default(),
        }
    }
}

/// The part of a run that connections share.
#[derive(Default)]
pub(super) struct RunSlot {
    /// Open while a connection owns the run; closed (None) between connections so an
    /// idle witness holds no file handles for finished runs.
    pub(super) log: Option<AckLog>,
    pub(super) owner: Option<u64>,
    pub(super) owner_stream: Option<TcpStream>,
    /// When the owning connection last received a frame (witness clock, ns).
    pub(super) owner_heard: Option<Arc<AtomicU64>>,
    /// Each stream's last seq among the run's acks, for the rule that they rise...
    pub(super) seqs: SeqTracker,
    /// ...valid while the open log holds this many acks: a log reopened with a
    /// different count (its tail was lost) resets the tracker.
    pub(super) seqs_at_acks: u64,
}

pub(super) struct Shared {
    pub(super) dir: PathBuf,
    /// Held while the witness runs: two witnesses appending to one directory's logs and
    /// journal would corrupt both.
    pub(super) _dir_lock: nix::fcntl::Flock<std::fs::File>,
    /// Makes every run's appends durable with one fdatasync for all (module `journal`).
    pub(super) journal: Arc<Journal>,
    pub(super) opts: WitnessOptions,
    pub(super) stop: AtomicBool,
    pub(super) next_conn: AtomicU64,
    pub(super) runs: Mutex<HashMap<RunId, Arc<Mutex<RunSlot>>>>,
    /// What `plugpull runs` already read of each log, so a listing reads only what was
    /// appended since (module `runs`).
    pub(super) listed: Mutex<HashMap<RunId, ListedPrefix>>,
    /// Device key -> every run of that device with the time the witness first heard of
    /// it (its own clock): "the latest run for this drive" and "the runs that started
    /// after this one" are decided by that time, never by the writer's clock.
    pub(super) by_device: Mutex<HashMap<String, Vec<(u64, RunId)>>>,
    /// Each indexed run's drive, for "the runs that may have overwritten this one": the
    /// same medium under another name (a hard link, a re-attached loop device, a
    /// partition of the same disk) has another key.
    pub(super) devices: Mutex<HashMap<RunId, crate::device::identity::DeviceIdentity>>,
    /// Connections past their handshake, by id (closed at shutdown).
    pub(super) conns: Mutex<HashMap<u64, TcpStream>>,
    /// Writer and fetch connections with a thread, against their caps.
    pub(super) writers: AtomicUsize,
    pub(super) fetchers: AtomicUsize,
    pub(super) threads: Mutex<Vec<JoinHandle<()>>>,
}

/// How far a listing (`plugpull runs`, module `runs`) read one run's log, clean, and the
/// checker's state at that byte.
#[derive(Clone)]
pub(super) struct ListedPrefix {
    /// The log file's inode: another file under the same name is read from the start.
    pub(super) ino: u64,
    /// Bytes read, ending at a frame boundary (the scan ended there with no tail).
    pub(super) len_bytes: u64,
    /// BLAKE3 of the last bytes read (up to [`LISTED_TAIL_BYTES`]): a log cut and grown
    /// again past `len_bytes` since, differs there and is read from the start.
    pub(super) tail_digest: [u8; 32],
    pub(super) checker: crate::witness::store::checker::LogChecker,
    pub(super) last_flushed_ns: Option<u64>,
}

/// How many bytes before [`ListedPrefix::len_bytes`] a listing checks before going on.
pub(super) const LISTED_TAIL_BYTES: u64 = 4096;

/// A panicked connection thread must not take the whole witness down with it
/// (`crate::sync`).
pub(super) use crate::sync::lock;

impl Shared {
    pub(super) fn slot(&self, run: RunId) -> Arc<Mutex<RunSlot>> {
        lock(&self.runs).entry(run).or_default().clone()
    }

    /// Indexes run `d` under its device, first heard of at `heard_at_ns` (witness
    /// clock); a run indexed before keeps the earlier time.
    pub(super) fn note_run(&self, d: &RunDescriptor, heard_at_ns: u64) {
        lock(&self.devices).insert(d.run_id, d.device.clone());
        let mut index = lock(&self.by_device);
        let runs = index.entry(d.device.key()).or_default();
        match runs.iter_mut().find(|(_, r)| *r == d.run_id) {
            Some(e) => e.0 = e.0.min(heard_at_ns),
            None => runs.push((heard_at_ns, d.run_id)),
        }
    }

    /// The run of device `key` the witness heard of last (its clock; ties go to the
    /// larger run id, so the answer does not depend on the order logs were read).
    pub(super) fn latest_run(&self, key: &str) -> Option<RunId> {
        lock(&self.by_device)
            .get(key)?
            .iter()
            .max_by_key(|(t, r)| (*t, r.hex()))
            .map(|&(_, r)| r)
    }

    /// When the witness first heard of `run` of device `key` (its clock).
    pub(super) fn heard_at(&self, key: &str, run: RunId) -> Option<u64> {
        lock(&self.by_device)
            .get(key)?
            .iter()
            .find(|(_, r)| *r == run)
            .map(|&(t, _)| t)
    }

    /// The runs that may have overwritten `run`'s records (on its device, under any
    /// name: `DeviceIdentity::may_share_bytes`) and that the witness first heard of
    /// after it, with that time (witness clock), oldest first.
    pub(super) fn runs_after(&self, run: RunId) -> Vec<(u64, RunId)> {
        let Some(t0) = self.heard_at_any(run) else {
            return vec![];
        };
        let devices = lock(&self.devices);
        let Some(mine) = devices.get(&run) else {
            return vec![];
        };
        let index = lock(&self.by_device);
        let mut later: Vec<(u64, RunId)> = index
            .values()
            .flatten()
            .filter(|(t, r)| *t > t0 && devices.get(r).is_some_and(|d| mine.may_share_bytes(d)))
            .copied()
            .collect();
        later.sort_by_key(|&(t, r)| (t, r.hex()));
        later
    }

    /// When the witness first heard of `run`, under whatever device key.
    fn heard_at_any(&self, run: RunId) -> Option<u64> {
        lock(&self.by_device)
            .values()
            .flatten()
            .find(|(_, r)| *r == run)
            .map(|&(t, _)| t)
    }
}
