//! The witness server: accepts writers, appends their acks to one log per run, reports
//! them durable after an fdatasync of the journal shared by all runs (module `journal`),
//! and serves whole runs to `verify` / `fetch`.
//!
//! Why one gate thread for every handshake, then a thread per connection: before a peer
//! has sent its request (Hello or Fetch, after Auth with a key) it may be anyone, so it
//! must cost almost nothing; a thread per socket from accept on let 1,100 idle sockets
//! lock out every writer and fetch (issue 11). The gate polls all pending sockets, holds
//! at most [`MAX_PENDING_HANDSHAKES`] (a new one drops the oldest), each for at most the
//! handshake timeout from connect. After that, writers are few (one per drive under
//! test) and each connection's work is mostly waiting for the journal's next sync;
//! blocking I/O keeps the code small and each run's durability rule obvious. Writers and
//! fetches have separate caps, so neither can starve the other.
//!
//! Why the run slot lock: a writer that reconnects while its old connection is still
//! half-open must not interleave appends with it; the newest connection owns the run
//! and the old one stops at its next step.
//!
//! Why one peer cannot stall the others: no lock is ever held across socket I/O, and the
//! gate never blocks on a socket (it sends with MSG_DONTWAIT and drops a peer that does
//! not take a small reply). The global maps (`runs`, `latest`, `conns`) are held for a
//! lookup only; a run's slot lock is held across its own log append and its wait for the
//! journal sync, which only that run's connections wait for. A writer that sends slowly
//! is bounded by the idle deadline, which counts from the last *complete* frame (a byte
//! a second does not keep a connection alive); one that does not read our replies is
//! bounded by the write timeout, and blocks only its own thread. Memory per pending
//! connection is bounded by `HANDSHAKE_BUF_BYTES`, per writer by `READ_BATCH_BYTES +
//! max_frame_bytes`.
//!
//! Why validation before every store (module `validate`): an ack no writer can produce
//! (0 sectors, 2^32-1 sectors, outside the region, a stream the run lacks) would be made
//! durable and then judged by verify. A Hello's descriptor is checked before its log is
//! created; each Acks frame before any of it is appended.
//!
//! Every connection event is one `key=value` line on stderr (see docs/protocol.md).

use crate::commands::args::ListenArgs;
use crate::model::{Ack, RunDescriptor, RunSelector, WitnessEvent, now_ns};
use crate::record::RunId;
use crate::wire::auth::{self, Key, Session};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{Msg, PROTOCOL_VERSION, VersionMismatch};
use crate::witness::store::checker::{LogChecker, LogItem};
use crate::witness::store::journal::{Journal, JournalOptions};
use crate::witness::store::journal_replay;
use crate::witness::store::layout::{self, LOG_EXTENSION};
use crate::witness::store::log::{self, AckLog};
use crate::witness::store::scan;
use crate::witness::store::storage::FsStorage;
use crate::witness::validate::{AckRules, SeqTracker};
use anyhow::Context;
use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Read at most this much from one socket before committing, so one fast writer's
/// batch stays bounded and Durable replies keep flowing.
const READ_BATCH_BYTES: usize = 4 << 20;
/// Bytes requested from the socket per read call.
const READ_CHUNK_BYTES: usize = 256 << 10;
/// A peer that does not read our replies for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Stack of a connection thread: enough for JSON decoding, small enough that a thousand
/// writers cost little.
const CONN_STACK_BYTES: usize = 512 << 10;
/// Smallest `--max-frame-bytes`: room for a full 4096-ack batch and a run descriptor.
pub const MIN_MAX_FRAME_BYTES: usize = 256 << 10;
/// Connections still in their handshake (before Hello or Fetch, and Auth with a key)
/// held at once; a new one beyond this closes the oldest pending one.
pub const MAX_PENDING_HANDSHAKES: usize = 256;
/// Fetch connections served at once, apart from the writers' `max_connections`.
pub const FETCH_CONNECTIONS: usize = 16;
/// Largest handshake frame (Auth, Hello, Fetch, Heartbeat) a pending connection may
/// send, and so its buffer: a Hello's descriptor is a few hundred bytes of JSON.
pub const HANDSHAKE_BUF_BYTES: usize = 64 << 10;
/// The gate looks at the stop flag at least this often.
const GATE_MAX_WAIT: Duration = Duration::from_secs(1);
/// Connections accepted per gate round, so a flood of connects cannot starve the
/// pending connections' reads.
const ACCEPTS_PER_ROUND: usize = 1024;
/// Fetch replies are written in pieces of about this size.
const FETCH_FLUSH_BYTES: usize = 1 << 20;

/// Tunables of the witness.
#[derive(Clone, Debug)]
pub struct WitnessOptions {
    /// Writer connections (past their Hello) beyond this are answered with an Error and
    /// closed. Pending handshakes and fetches have caps of their own
    /// ([`MAX_PENDING_HANDSHAKES`], [`FETCH_CONNECTIONS`]).
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

/// A running witness. Dropping it without [`Witness::shutdown`] leaves its threads
/// serving until the process exits.
pub struct Witness {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

/// The part of a run that connections share.
#[derive(Default)]
struct RunSlot {
    /// Open while a connection owns the run; closed (None) between connections so an
    /// idle witness holds no file handles for finished runs.
    log: Option<AckLog>,
    owner: Option<u64>,
    owner_stream: Option<TcpStream>,
    /// Each stream's last seq among the run's acks, for the rule that they rise...
    seqs: SeqTracker,
    /// ...valid while the open log holds this many acks: a log reopened with a
    /// different count (its tail was lost) resets the tracker.
    seqs_at_acks: u64,
}

struct Shared {
    dir: PathBuf,
    /// Held while the witness runs: two witnesses appending to one directory's logs and
    /// journal would corrupt both.
    _dir_lock: nix::fcntl::Flock<std::fs::File>,
    /// Makes every run's appends durable with one fdatasync for all (module `journal`).
    journal: Arc<Journal>,
    opts: WitnessOptions,
    stop: AtomicBool,
    next_conn: AtomicU64,
    runs: Mutex<HashMap<RunId, Arc<Mutex<RunSlot>>>>,
    /// Device key -> (start time ns, run): the newest run per device.
    latest: Mutex<HashMap<String, (i64, RunId)>>,
    /// Connections past their handshake, by id (closed at shutdown).
    conns: Mutex<HashMap<u64, TcpStream>>,
    /// Writer and fetch connections with a thread, against their caps.
    writers: AtomicUsize,
    fetchers: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicked connection thread must not take the whole witness down with it; the
    // data behind each lock stays consistent at every await point of the code below.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn started_ns(d: &RunDescriptor) -> i64 {
    chrono::DateTime::parse_from_rfc3339(&d.started_at)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .unwrap_or(0)
}

fn fmt_ns(ns: u64) -> String {
    let t = chrono::DateTime::from_timestamp_nanos(ns as i64).with_timezone(&chrono::Local);
    t.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
}

/// A value in a `key=value` log line: bare when it is one simple word, else quoted.
fn kv_value(v: &str) -> String {
    if !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".:-_/[]".contains(&b))
    {
        v.to_string()
    } else {
        format!("{v:?}")
    }
}

impl Shared {
    fn log(&self, msg: impl std::fmt::Display) {
        if !self.opts.quiet {
            eprintln!("{} witness: {msg}", fmt_ns(now_ns()));
        }
    }

    /// One structured line: `event=KIND key=value ...`, values quoted when needed.
    fn event(&self, kind: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
        if self.opts.quiet {
            return;
        }
        let mut line = format!("event={kind}");
        for (k, v) in fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(&kv_value(&v.to_string()));
        }
        self.log(line);
    }

    fn slot(&self, run: RunId) -> Arc<Mutex<RunSlot>> {
        lock(&self.runs).entry(run).or_default().clone()
    }

    fn note_run(&self, d: &RunDescriptor) {
        let key = d.device.key();
        let t = started_ns(d);
        let mut latest = lock(&self.latest);
        let e = latest.entry(key).or_insert((t, d.run_id));
        if t >= e.0 {
            *e = (t, d.run_id);
        }
    }
}

impl Witness {
    /// Recovers every log in `dir` (truncating torn tails), indexes runs by device, binds
    /// `bind` and starts serving. Returns once the socket is listening.
    pub fn start(bind: &str, dir: &Path, opts: WitnessOptions) -> anyhow::Result<Witness> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the witness directory {}", dir.display()))?;
        let dir_lock = lock_dir(dir)?;
        // Replay first: a log must hold everything its journal confirmed before recovery
        // decides where its torn tail starts.
        let replayed = journal_replay::replay(&FsStorage, dir)?;
        let journal = Arc::new(Journal::open(
            FsStorage::shared(),
            dir,
            opts.journal.clone(),
        )?);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            _dir_lock: dir_lock,
            journal,
            opts,
            stop: AtomicBool::new(false),
            next_conn: AtomicU64::new(1),
            runs: Mutex::new(HashMap::new()),
            latest: Mutex::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
            writers: AtomicUsize::new(0),
            fetchers: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        });
        if replayed.journals > 0 {
            shared.log(format_args!(
                "replayed {} journal files: {} entries into {} run logs{}",
                replayed.journals,
                replayed.entries,
                replayed.runs,
                match (replayed.orphaned_entries, replayed.skipped_entries) {
                    (0, 0) => String::new(),
                    (o, s) => format!(
                        "; skipped {o} entries whose run log is gone and {s} that would \
                         have left a hole in their log"
                    ),
                }
            ));
        }
        recover_dir(&shared)?;
        let listener = TcpListener::bind(bind).with_context(|| {
            format!("cannot listen on {bind}: is another witness already running there?")
        })?;
        let addr = listener.local_addr()?;
        if shared.opts.key.is_none() && !addr.ip().is_loopback() {
            shared.event(
                "warning",
                &[(
                    "detail",
                    &format_args!(
                        "listening on {addr} without --key-file: anyone who can reach this \
                         port can forge or replay acks and make a good drive look bad; \
                         give the witness and its writers the same --key-file"
                    ),
                )],
            );
        }
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("witness-gate".into())
            .spawn(move || gate_loop(sh, listener))?;
        Ok(Witness {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// Stops accepting, closes every connection and waits for their threads. Every ack
    /// already reported durable stays in the logs.
    pub fn shutdown(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for s in lock(&self.shared.conns).values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    /// Blocks until the acceptor ends (it does not, except on a listener error).
    fn wait(mut self) {
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

/// Takes the witness directory's lock file, or says which witness holds it.
fn lock_dir(dir: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let path = dir.join("witness.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        anyhow::anyhow!(
            "another plugpull witness is using {} ({e}); stop it, or give this one its own \
             --dir",
            dir.display()
        )
    })
}

/// Opens every log once at startup: truncates torn tails and builds the device index.
fn recover_dir(sh: &Shared) -> anyhow::Result<()> {
    let rd = std::fs::read_dir(&sh.dir)
        .with_context(|| format!("reading the witness directory {}", sh.dir.display()))?;
    let mut n = 0;
    for e in rd {
        let path = e?.path();
        if path.extension().and_then(|x| x.to_str()) != Some(LOG_EXTENSION) {
            continue;
        }
        match AckLog::open(&FsStorage, &path) {
            Ok((l, rec)) => {
                if rec.truncated_bytes > 0 {
                    sh.log(format_args!(
                        "recovered {}: cut a torn tail of {} bytes ({}); kept {} acks",
                        path.display(),
                        rec.truncated_bytes,
                        rec.reason.as_deref().unwrap_or("?"),
                        l.durable_acks()
                    ));
                }
                sh.note_run(l.descriptor());
                n += 1;
            }
            Err(e) => {
                sh.log(format_args!("skipping {}: {e:#}", path.display()));
                // A damaged log stays fetchable (verify then names the damage), also
                // by device: otherwise an older run of the device would be served.
                if let Ok(d) = log::read_descriptor(&FsStorage, &path) {
                    sh.note_run(&d);
                }
            }
        }
    }
    sh.log(format_args!("{n} run logs in {}", sh.dir.display()));
    Ok(())
}

/// Which cap a connection counts against once its first request has arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Writer,
    Fetch,
}

/// A connection still in its handshake, owned by the gate thread: a socket, a small
/// buffer and a deadline, but no thread.
struct Pending {
    stream: TcpStream,
    id: u64,
    peer: SocketAddr,
    since: Instant,
    buf: Vec<u8>,
    /// Set once Auth/Challenge completed (keyed witness only).
    session: Option<Session>,
    /// Frames consumed here (Auth, Heartbeats).
    frames: u64,
}

/// How the gate ends a pending connection.
struct Refusal {
    /// Event kind: "probe", "disconnect", "error" or "refused".
    kind: &'static str,
    detail: String,
    /// Told to the peer in an Error frame.
    tell: bool,
    /// The Error frame is left unsealed: after an authentication failure the peer could
    /// not check our MAC and would never see the reason.
    unsealed: bool,
}

impl Refusal {
    fn protocol(m: impl Into<String>) -> Refusal {
        Refusal {
            kind: "error",
            detail: m.into(),
            tell: true,
            unsealed: false,
        }
    }
    fn auth(m: impl std::fmt::Display) -> Refusal {
        Refusal {
            kind: "error",
            detail: format!("authentication failed: {m}"),
            tell: true,
            unsealed: true,
        }
    }
    fn refused(m: String) -> Refusal {
        Refusal {
            kind: "refused",
            detail: m,
            tell: true,
            unsealed: false,
        }
    }
}

/// What a pending connection's buffered bytes amount to so far.
enum Step {
    Wait,
    /// The first request (Hello or Fetch) starts the buffer, its MAC checked.
    Ready(Role),
    Close(Refusal),
}

/// Sends `bytes` without blocking; false when the socket did not take all of them (a
/// peer that does not read during its handshake is dropped, not waited for).
fn send_now(stream: &TcpStream, bytes: &[u8]) -> bool {
    use nix::sys::socket::{MsgFlags, send};
    use std::os::fd::AsRawFd;
    matches!(
        send(
            stream.as_raw_fd(),
            bytes,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL
        ),
        Ok(n) if n == bytes.len()
    )
}

impl Pending {
    fn new(stream: TcpStream, id: u64, peer: SocketAddr) -> Pending {
        Pending {
            stream,
            id,
            peer,
            since: Instant::now(),
            buf: Vec::new(),
            session: None,
            frames: 0,
        }
    }

    fn auth_name(&self, sh: &Shared) -> &'static str {
        match (&sh.opts.key, &self.session) {
            (None, _) => "none",
            (Some(_), Some(_)) => "key",
            (Some(_), None) => "pending",
        }
    }

    /// Encodes `m`, sealed when the session is up, and sends it without blocking.
    fn send(&mut self, m: &Msg, seal: bool) -> bool {
        let mut out = m.encode();
        if seal {
            auth::seal_opt(self.session.as_mut().map(|s| &mut s.sealer), &mut out, 0);
        }
        send_now(&self.stream, &out)
    }

    /// Reads what the socket holds and looks at the buffered frames.
    fn on_readable(&mut self, sh: &Shared, scratch: &mut [u8]) -> Step {
        use std::os::fd::AsRawFd;
        let room = HANDSHAKE_BUF_BYTES.saturating_sub(self.buf.len());
        let want = room.min(scratch.len()).max(1);
        let flags = nix::sys::socket::MsgFlags::MSG_DONTWAIT;
        match nix::sys::socket::recv(self.stream.as_raw_fd(), &mut scratch[..want], flags) {
            Ok(0) => return self.on_eof(),
            Ok(n) => self.buf.extend_from_slice(&scratch[..n]),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Step::Wait,
            Err(e) => {
                return Step::Close(Refusal {
                    kind: "disconnect",
                    detail: format!("connection error: {e}"),
                    tell: false,
                    unsealed: false,
                });
            }
        }
        self.advance(sh)
    }

    fn on_eof(&self) -> Step {
        let (kind, detail) = if !self.buf.is_empty() {
            let need = match frame::decode(&self.buf) {
                Decoded::NeedMore { need } if need > 0 => format!(" of {need}"),
                _ => String::new(),
            };
            return Step::Close(Refusal::protocol(format!(
                "connection closed in the middle of a frame ({} bytes{need} received)",
                self.buf.len()
            )));
        } else if self.frames == 0 {
            // A connect-and-close probe (a port check): easy to filter out.
            ("probe", "connection closed by the peer")
        } else {
            (
                "disconnect",
                "connection closed by the peer during its handshake",
            )
        };
        Step::Close(Refusal {
            kind,
            detail: detail.into(),
            tell: false,
            unsealed: false,
        })
    }

    /// Handles the handshake frames at the start of the buffer: Auth (answered with a
    /// Challenge), Heartbeats (answered), up to the first request.
    fn advance(&mut self, sh: &Shared) -> Step {
        loop {
            let f = match frame::decode_limited(&self.buf, sh.opts.max_frame_bytes) {
                Decoded::NeedMore { need } if need > HANDSHAKE_BUF_BYTES => {
                    return Step::Close(Refusal::protocol(format!(
                        "a frame of {need} bytes before the handshake is done: Auth, Hello \
                         and Fetch are at most {HANDSHAKE_BUF_BYTES} bytes"
                    )));
                }
                Decoded::NeedMore { .. } => return Step::Wait,
                Decoded::Error(e) => {
                    return Step::Close(Refusal::protocol(format!("bad frame: {e}")));
                }
                Decoded::Frame(f) => f,
            };
            let (ty, len) = (f.ty, f.len_bytes);
            if ty == FrameType::Auth {
                let msg = Msg::decode(&f);
                if let Err(r) = self.on_auth(sh, msg) {
                    return Step::Close(r);
                }
            } else {
                if sh.opts.key.is_some() && self.session.is_none() {
                    return Step::Close(Refusal::auth(
                        "this witness requires authentication: pass --key-file with the \
                         witness's key to plugpull write / verify / fetch",
                    ));
                }
                if let Err(e) = auth::check(self.session.as_mut().map(|s| &mut s.opener), &f) {
                    return Step::Close(Refusal::auth(e));
                }
                match ty {
                    FrameType::Hello => return Step::Ready(Role::Writer),
                    FrameType::Fetch => return Step::Ready(Role::Fetch),
                    FrameType::Heartbeat => {
                        if !self.send(&Msg::Heartbeat, true) {
                            return Step::Close(Refusal::protocol(
                                "the peer does not read the witness's replies",
                            ));
                        }
                    }
                    FrameType::Acks => {
                        return Step::Close(Refusal::protocol(
                            "Acks before Hello: a writer must introduce its run first",
                        ));
                    }
                    FrameType::Bye => return Step::Close(Refusal::protocol("Bye before Hello")),
                    other => {
                        return Step::Close(Refusal::protocol(format!(
                            "unexpected {other:?} frame from a writer or fetcher"
                        )));
                    }
                }
            }
            self.buf.drain(..len);
            self.frames += 1;
        }
    }

    /// Auth: allowed once, as the first frame, on a keyed witness; answered with the
    /// witness's nonce.
    fn on_auth(&mut self, sh: &Shared, msg: anyhow::Result<Msg>) -> Result<(), Refusal> {
        let Some(key) = sh.opts.key.as_ref() else {
            return Err(Refusal::auth(
                "this witness runs without a key: drop --key-file on the client, or restart \
                 `plugpull listen` with --key-file",
            ));
        };
        if self.session.is_some() || self.frames != 0 {
            return Err(Refusal::protocol(
                "Auth must be the first and only handshake frame of a connection",
            ));
        }
        let (version, client_nonce) = match msg {
            Ok(Msg::Auth { version, nonce }) => (version, nonce),
            Ok(_) => unreachable!("an Auth frame decodes to Auth"),
            Err(e) => return Err(Refusal::protocol(format!("bad Auth frame: {e:#}"))),
        };
        if version != PROTOCOL_VERSION {
            return Err(Refusal::protocol(VersionMismatch(version).to_string()));
        }
        let witness_nonce = auth::nonce();
        if !self.send(
            &Msg::Challenge {
                nonce: witness_nonce,
            },
            false,
        ) {
            return Err(Refusal::protocol("the peer does not read the Challenge"));
        }
        self.session = Some(Session::witness(key, &client_nonce, &witness_nonce));
        Ok(())
    }
}

/// Accepts connections and carries each through its handshake in this one thread,
/// polling every pending socket; a connection gets a thread of its own only when its
/// first request (Hello or Fetch) has arrived, authenticated when keyed.
///
/// Why: a thread per connection from accept on let 1,100 idle sockets take every
/// slot (issue 11, defect 7). Here an idle socket costs a file descriptor and a few
/// bytes, at most MAX_PENDING_HANDSHAKES are held (a new one drops the oldest), each
/// for at most the handshake timeout counted from connect, and writers and fetches
/// have caps of their own.
fn gate_loop(sh: Arc<Shared>, listener: TcpListener) {
    if let Err(e) = listener.set_nonblocking(true) {
        sh.log(format_args!(
            "cannot make the listening socket non-blocking: {e}"
        ));
        return;
    }
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut scratch = vec![0u8; HANDSHAKE_BUF_BYTES];
    let mut fds: Vec<libc::pollfd> = Vec::new();
    let limit = sh
        .opts
        .handshake_timeout
        .min(sh.opts.idle_timeout)
        .max(Duration::from_millis(1));
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let wait = pending
            .front()
            .map(|p| (p.since + limit).saturating_duration_since(now))
            .unwrap_or(GATE_MAX_WAIT)
            .min(GATE_MAX_WAIT);
        fds.clear();
        fds.push(pollfd(&listener));
        fds.extend(pending.iter().map(|p| pollfd(&p.stream)));
        if let Err(e) = poll(&mut fds, wait) {
            sh.log(format_args!("poll failed: {e}"));
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let now = Instant::now();
        let ready: Vec<bool> = fds[1..].iter().map(|f| f.revents != 0).collect();
        let mut keep = VecDeque::with_capacity(pending.len());
        for (mut p, readable) in pending.drain(..).zip(ready) {
            let step = if readable {
                p.on_readable(&sh, &mut scratch)
            } else {
                Step::Wait
            };
            match step {
                Step::Wait if now >= p.since + limit => {
                    let detail = format!(
                        "no handshake within {:?} ({} frames, {} bytes pending): a writer \
                         sends Hello (after Auth with a key) right after connecting",
                        sh.opts.handshake_timeout,
                        p.frames,
                        p.buf.len()
                    );
                    close_pending(&sh, p, Refusal::protocol(detail).with_kind("disconnect"));
                }
                Step::Wait => keep.push_back(p),
                Step::Ready(role) => hand_over(&sh, p, role),
                Step::Close(r) => close_pending(&sh, p, r),
            }
        }
        pending = keep;
        if fds[0].revents != 0 {
            accept_all(&sh, &listener, &mut pending);
        }
    }
}

impl Refusal {
    fn with_kind(mut self, kind: &'static str) -> Refusal {
        self.kind = kind;
        self
    }
}

fn pollfd(s: &impl std::os::fd::AsRawFd) -> libc::pollfd {
    libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// poll(2) on `fds` for at most `wait`; an interrupted call counts as a timeout.
fn poll(fds: &mut [libc::pollfd], wait: Duration) -> io::Result<()> {
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structs
    // for the whole call, which is all poll(2) reads and writes.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        fds.iter_mut().for_each(|f| f.revents = 0);
    }
    Ok(())
}

/// Accepts every connection waiting on the listener into `pending`, dropping the oldest
/// pending one when the cap (or the process's file descriptor limit) is reached.
fn accept_all(sh: &Shared, listener: &TcpListener, pending: &mut VecDeque<Pending>) {
    for _ in 0..ACCEPTS_PER_ROUND {
        match listener.accept() {
            Ok((stream, peer)) => {
                if sh.stop.load(Ordering::SeqCst) {
                    return;
                }
                if pending.len() >= MAX_PENDING_HANDSHAKES {
                    drop_oldest(sh, pending, "");
                }
                let id = sh.next_conn.fetch_add(1, Ordering::SeqCst);
                pending.push_back(Pending::new(stream, id, peer));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                if pending.is_empty() {
                    sh.log(format_args!(
                        "accept failed: {e}; every descriptor is in use by writers and \
                         logs (raise the open-files limit, ulimit -n)"
                    ));
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
                drop_oldest(sh, pending, " (the witness is out of file descriptors)");
            }
            Err(e) => {
                // ECONNABORTED and the like: that peer is gone; others may wait.
                sh.log(format_args!("accept failed: {e}"));
                return;
            }
        }
    }
}

fn drop_oldest(sh: &Shared, pending: &mut VecDeque<Pending>, why: &str) {
    if let Some(old) = pending.pop_front() {
        let msg = format!(
            "the witness has {MAX_PENDING_HANDSHAKES} connections waiting for their \
             handshake and dropped the oldest, this one{why}: connect again and send \
             Hello (after Auth) at once"
        );
        close_pending(sh, old, Refusal::refused(msg));
    }
}

/// Tells the peer why (when it should hear it), logs one event line, closes.
fn close_pending(sh: &Shared, mut p: Pending, r: Refusal) {
    if r.tell {
        p.send(
            &Msg::Error {
                message: r.detail.clone(),
            },
            !r.unsealed,
        );
    }
    sh.event(
        r.kind,
        &[
            ("conn", &p.id),
            ("peer", &p.peer),
            ("run", &"-"),
            ("auth", &p.auth_name(sh)),
            ("frames", &p.frames),
            ("detail", &r.detail),
        ],
    );
    let _ = p.stream.shutdown(Shutdown::Both);
}

/// Decrements a connection counter when a connection thread ends, panic or not.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives a connection whose first request has arrived a thread of its own, if its
/// role's cap allows.
fn hand_over(sh: &Arc<Shared>, p: Pending, role: Role) {
    let (count, cap) = match role {
        Role::Writer => (&sh.writers, sh.opts.max_connections),
        Role::Fetch => (&sh.fetchers, FETCH_CONNECTIONS),
    };
    if count.fetch_add(1, Ordering::SeqCst) >= cap {
        count.fetch_sub(1, Ordering::SeqCst);
        let msg = match role {
            Role::Writer => format!(
                "the witness is at its limit of {cap} writer connections; try again later \
                 or raise --max-connections"
            ),
            Role::Fetch => {
                format!("the witness is serving {cap} fetches already; try again in a moment")
            }
        };
        close_pending(sh, p, Refusal::refused(msg));
        return;
    }
    let (id, peer) = (p.id, p.peer);
    if let Ok(c) = p.stream.try_clone() {
        lock(&sh.conns).insert(id, c);
    }
    let sh2 = sh.clone();
    let t = std::thread::Builder::new()
        .name(format!("witness-conn-{id}"))
        .stack_size(CONN_STACK_BYTES)
        .spawn(move || {
            let counter = match role {
                Role::Writer => &sh2.writers,
                Role::Fetch => &sh2.fetchers,
            };
            let _slot = Slot(counter);
            let Pending {
                stream,
                buf,
                session,
                frames,
                ..
            } = p;
            let mut c = Conn::new(sh2.clone(), stream, id, peer);
            c.rbuf = RecvBuf::holding(buf);
            c.session = session;
            c.frames_received = frames;
            c.first_frame_authenticated = true;
            c.serve();
            lock(&sh2.conns).remove(&id);
        });
    match t {
        Ok(h) => {
            let mut threads = lock(&sh.threads);
            threads.retain(|t| !t.is_finished());
            threads.push(h);
        }
        Err(e) => {
            count.fetch_sub(1, Ordering::SeqCst);
            lock(&sh.conns).remove(&id);
            sh.event(
                "refused",
                &[
                    ("conn", &id),
                    ("peer", &peer),
                    ("detail", &format_args!("cannot start a thread: {e}")),
                ],
            );
        }
    }
}

/// Bytes received and not yet processed, at the start of a buffer whose spare space
/// stays initialised between reads. Why: growing a Vec by a zeroed chunk before every
/// read and truncating it after was a fifth of the witness's CPU at 200k acks/s
/// (`perf`: memset), for reads that bring a few KiB.
#[derive(Default)]
struct RecvBuf {
    buf: Vec<u8>,
    filled: usize,
}

impl RecvBuf {
    /// A buffer holding `bytes` already received.
    fn holding(bytes: Vec<u8>) -> RecvBuf {
        RecvBuf {
            filled: bytes.len(),
            buf: bytes,
        }
    }
    fn data(&self) -> &[u8] {
        &self.buf[..self.filled]
    }
    fn len(&self) -> usize {
        self.filled
    }
    fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Makes room for at least READ_CHUNK_BYTES and appends what `read` puts there.
    fn fill(&mut self, mut read: impl FnMut(&mut [u8]) -> io::Result<usize>) -> io::Result<usize> {
        if self.buf.len() - self.filled < READ_CHUNK_BYTES {
            self.buf.resize(self.filled + READ_CHUNK_BYTES, 0);
        }
        let n = loop {
            match read(&mut self.buf[self.filled..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.filled += n;
        Ok(n)
    }

    /// Drops the first `n` bytes; gives memory back when the buffer grew past `max`.
    fn consume(&mut self, n: usize, max: usize) {
        self.buf.copy_within(n..self.filled, 0);
        self.filled -= n;
        if self.buf.len() > max {
            self.buf.truncate(self.filled.max(READ_CHUNK_BYTES));
            self.buf.shrink_to_fit();
        }
    }
}

/// Why a connection ended.
enum End {
    Eof,
    Idle,
    /// A frame failed authentication; told with an Error frame.
    Auth(String),
    Bye(String),
    TakenOver,
    /// Our own I/O error on the socket.
    Io(io::Error),
    /// The peer broke the protocol; told with an Error frame.
    Protocol(String),
    /// The witness cannot write its log; told with an Error frame.
    Storage(String),
    /// A fetch was served.
    Fetched,
}

struct Conn {
    sh: Arc<Shared>,
    stream: TcpStream,
    id: u64,
    peer: SocketAddr,
    run: Option<(RunId, Arc<Mutex<RunSlot>>)>,
    /// The limits of this run's acks, from its descriptor (set with `run`).
    rules: Option<AckRules>,
    rbuf: RecvBuf,
    out: Vec<u8>,
    scratch: Vec<Ack>,
    /// Set once Auth/Challenge completed (keyed witness only).
    session: Option<Session>,
    /// The first frame in `rbuf` (the request the gate handed over) already passed
    /// [`Conn::authenticate`] there.
    first_frame_authenticated: bool,
    /// When the last complete frame arrived: the idle deadline counts from here.
    last_progress: std::time::Instant,
    frames_received: u64,
    /// New acks appended since the last commit.
    dirty: bool,
    acks_received: u64,
    last_ack_at_ns: Option<u64>,
    last_frame_at_ns: u64,
}

impl Conn {
    fn new(sh: Arc<Shared>, stream: TcpStream, id: u64, peer: SocketAddr) -> Conn {
        Conn {
            sh,
            stream,
            id,
            peer,
            run: None,
            rules: None,
            rbuf: RecvBuf::default(),
            out: Vec::new(),
            scratch: Vec::new(),
            session: None,
            first_frame_authenticated: false,
            last_progress: std::time::Instant::now(),
            frames_received: 0,
            dirty: false,
            acks_received: 0,
            last_ack_at_ns: None,
            last_frame_at_ns: now_ns(),
        }
    }

    fn serve(&mut self) {
        let _ = self.stream.set_nodelay(true);
        let _ = self.stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let end = self.serve_loop();
        let (kind, detail) = match &end {
            End::Eof => ("disconnect", "connection closed by the writer".to_string()),
            End::Idle => (
                "disconnect",
                format!(
                    "no complete frame for {:?} (idle timeout){}",
                    self.sh.opts.idle_timeout,
                    self.partial_note()
                ),
            ),
            End::Auth(m) => ("error", format!("authentication failed: {m}")),
            End::Bye(r) => ("bye", format!("bye: {r}")),
            End::TakenOver => ("disconnect", "taken over by a newer connection".into()),
            End::Io(e) => ("disconnect", format!("connection error: {e}")),
            End::Protocol(m) | End::Storage(m) => ("error", m.clone()),
            End::Fetched => ("fetch", String::new()),
        };
        let told = match &end {
            End::Protocol(m) | End::Storage(m) => Some(m.clone()),
            End::Auth(m) => Some(format!("authentication failed: {m}")),
            _ => None,
        };
        if let Some(message) = told {
            // Tell the peer why; it may already be gone, and that is fine. Sealed when
            // the session is up so an authenticated client can trust the reason, except
            // after an authentication failure: a peer with the wrong key could not check
            // our MAC and would never see the reason.
            self.out.clear();
            Msg::Error { message }.encode_into(&mut self.out);
            if !matches!(end, End::Auth(_)) {
                auth::seal_opt(
                    self.session.as_mut().map(|s| &mut s.sealer),
                    &mut self.out,
                    0,
                );
            }
            let _ = self.stream.set_nonblocking(true);
            let _ = self.stream.write_all(&self.out);
        }
        let durable = self.release_run(kind, &detail);
        let run = self
            .run
            .as_ref()
            .map(|(r, _)| r.hex())
            .unwrap_or("-".into());
        // A connect-and-close probe (a port check) gets its own kind, so it is easy to
        // filter out.
        let kind = match end {
            End::Fetched => None,
            End::Eof if self.run.is_none() && self.frames_received == 0 => Some("probe"),
            _ => Some(kind),
        };
        if let Some(kind) = kind {
            let last_ack = self.last_ack_at_ns.map(fmt_ns).unwrap_or("-".into());
            let durable = durable.map(|d| d.to_string()).unwrap_or("-".into());
            self.sh.event(
                kind,
                &[
                    ("conn", &self.id),
                    ("peer", &self.peer),
                    ("run", &run),
                    ("auth", &self.auth_name()),
                    ("frames", &self.frames_received),
                    ("acks_received", &self.acks_received),
                    ("durable", &durable),
                    ("last_ack", &last_ack),
                    ("detail", &detail),
                ],
            );
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    fn auth_name(&self) -> &'static str {
        match (&self.sh.opts.key, &self.session) {
            (None, _) => "none",
            (Some(_), Some(_)) => "key",
            (Some(_), None) => "pending",
        }
    }

    fn partial_note(&self) -> String {
        if self.rbuf.is_empty() {
            String::new()
        } else {
            format!("; {} bytes of an incomplete frame pending", self.rbuf.len())
        }
    }

    /// Encodes `m` (sealed when the session is up) and sends it.
    fn send(&mut self, m: &Msg) -> Result<(), End> {
        self.out.clear();
        m.encode_into(&mut self.out);
        auth::seal_opt(
            self.session.as_mut().map(|s| &mut s.sealer),
            &mut self.out,
            0,
        );
        self.stream.write_all(&self.out).map_err(End::Io)
    }

    /// Time left before the connection counts as idle. (Its handshake deadline was
    /// the gate's: a Conn starts with its first request in `rbuf`.)
    fn idle_left(&self) -> Duration {
        self.sh
            .opts
            .idle_timeout
            .saturating_sub(self.last_progress.elapsed())
    }

    /// Records how the connection ended in the run's log and gives the run up.
    fn release_run(&mut self, kind: &str, detail: &str) -> Option<u64> {
        let (_, slot) = self.run.as_ref()?;
        let mut s = lock(slot);
        if s.owner != Some(self.id) {
            return None;
        }
        let last_frame = self.last_frame_at_ns;
        let log = s.log.as_mut()?;
        let ev = WitnessEvent {
            at_ns: now_ns(),
            kind: kind.into(),
            peer: self.peer.to_string(),
            durable_acks: log.appended_acks(),
            last_ack_at_ns: self.last_ack_at_ns,
            detail: format!("{detail}; writer last heard at {}", fmt_ns(last_frame)),
        };
        log.append_event(&ev);
        let durable = match log.commit() {
            Ok(d) => Some(d),
            Err(e) => {
                self.sh.log(format_args!("{e:#}"));
                None
            }
        };
        s.log = None;
        s.owner = None;
        s.owner_stream = None;
        durable
    }

    fn serve_loop(&mut self) -> End {
        // The request the gate handed over is already buffered.
        if let Some(end) = self.handle_buffered(false) {
            return end;
        }
        loop {
            let left = self.idle_left();
            if left.is_zero() {
                return End::Idle;
            }
            let _ = self
                .stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))));
            // One blocking read, then whatever else is already there: the batch that
            // shares one commit.
            match self.read_some() {
                Ok(0) => {
                    if self.rbuf.is_empty() {
                        return End::Eof;
                    }
                    return End::Protocol(self.truncated_msg());
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // Loop: the deadline check above decides.
                    continue;
                }
                Err(e) => return End::Io(e),
            }
            let mut eof = false;
            while self.rbuf.len() < READ_BATCH_BYTES {
                match self.read_more_now() {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
            if let Some(end) = self.handle_buffered(eof) {
                return end;
            }
        }
    }

    /// Handles every complete frame buffered, commits, and says whether the connection
    /// ends (`eof`: the peer closed its side after these bytes).
    fn handle_buffered(&mut self, eof: bool) -> Option<End> {
        self.last_frame_at_ns = now_ns();
        let r = self.process_frames();
        // Commit what arrived before any error: those acks are valid.
        if let Some(end) = self.commit_and_reply() {
            return Some(end);
        }
        if let Err(end) = r {
            return Some(end);
        }
        if eof {
            return Some(if self.rbuf.is_empty() {
                End::Eof
            } else {
                End::Protocol(self.truncated_msg())
            });
        }
        None
    }

    fn truncated_msg(&self) -> String {
        let need = match frame::decode(self.rbuf.data()) {
            Decoded::NeedMore { need } if need > 0 => format!(" of {need}"),
            _ => String::new(),
        };
        format!(
            "connection closed in the middle of a frame ({} bytes{need} received)",
            self.rbuf.len()
        )
    }

    /// One read, waiting up to the socket's read timeout.
    fn read_some(&mut self) -> io::Result<usize> {
        let stream = &mut self.stream;
        self.rbuf.fill(|b| stream.read(b))
    }

    /// One read of what is already there; WouldBlock when nothing is. (MSG_DONTWAIT
    /// instead of switching the socket to non-blocking and back: two syscalls fewer.)
    fn read_more_now(&mut self) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let fd = self.stream.as_raw_fd();
        self.rbuf.fill(|b| {
            nix::sys::socket::recv(fd, b, nix::sys::socket::MsgFlags::MSG_DONTWAIT)
                .map_err(io::Error::from)
        })
    }

    /// Handles every complete frame in the read buffer.
    fn process_frames(&mut self) -> Result<(), End> {
        // Taken out so frames can borrow it while handlers borrow `self`.
        let mut rbuf = std::mem::take(&mut self.rbuf);
        let mut off = 0;
        let result = loop {
            let r = match frame::decode_limited(&rbuf.data()[off..], self.sh.opts.max_frame_bytes) {
                Decoded::NeedMore { .. } => break Ok(()),
                Decoded::Error(e) => break Err(End::Protocol(format!("bad frame: {e}"))),
                Decoded::Frame(f) => {
                    off += f.len_bytes;
                    self.frames_received += 1;
                    self.last_progress = std::time::Instant::now();
                    let checked = std::mem::take(&mut self.first_frame_authenticated);
                    if !checked {
                        if let Err(e) = self.authenticate(&f) {
                            break Err(e);
                        }
                    }
                    if f.ty == FrameType::Acks {
                        // Hot path: decode acks straight from the read buffer.
                        let mut scratch = std::mem::take(&mut self.scratch);
                        scratch.clear();
                        let r = crate::wire::msg::decode_acks_into(f.payload, &mut scratch)
                            .map_err(|e| End::Protocol(format!("bad Acks frame: {e:#}")))
                            .and_then(|first| self.on_acks(first, &scratch));
                        self.scratch = scratch;
                        r
                    } else {
                        self.on_frame(&f)
                    }
                }
            };
            if let Err(e) = r {
                break Err(e);
            }
        };
        rbuf.consume(
            off,
            READ_BATCH_BYTES + READ_CHUNK_BYTES + self.sh.opts.max_frame_bytes,
        );
        self.rbuf = rbuf;
        result
    }

    /// The authentication rule of a keyed witness: Auth first, then every frame sealed.
    /// An unkeyed witness refuses sealed frames.
    fn authenticate(&mut self, f: &frame::Frame<'_>) -> Result<(), End> {
        if f.ty == FrameType::Auth {
            // Checked in on_auth: allowed once, unsealed, before anything else.
            return Ok(());
        }
        if self.sh.opts.key.is_some() && self.session.is_none() {
            return Err(End::Auth(
                "this witness requires authentication: pass --key-file with the witness's \
                 key to plugpull write / verify / fetch"
                    .into(),
            ));
        }
        auth::check(self.session.as_mut().map(|s| &mut s.opener), f)
            .map_err(|e| End::Auth(e.to_string()))
    }

    fn on_auth(&mut self, version: u16, client_nonce: [u8; auth::NONCE_BYTES]) -> Result<(), End> {
        let Some(key) = self.sh.opts.key.clone() else {
            return Err(End::Auth(
                "this witness runs without a key: drop --key-file on the client, or restart \
                 `plugpull listen` with --key-file"
                    .into(),
            ));
        };
        if self.session.is_some() || self.frames_received != 1 {
            return Err(End::Protocol(
                "Auth must be the first and only handshake frame of a connection".into(),
            ));
        }
        if version != PROTOCOL_VERSION {
            return Err(End::Protocol(VersionMismatch(version).to_string()));
        }
        let witness_nonce = auth::nonce();
        self.send(&Msg::Challenge {
            nonce: witness_nonce,
        })?;
        self.session = Some(Session::witness(&key, &client_nonce, &witness_nonce));
        Ok(())
    }

    fn on_frame(&mut self, f: &frame::Frame<'_>) -> Result<(), End> {
        let msg = match Msg::decode(f) {
            Ok(m) => m,
            Err(e) => {
                if let Some(v) = e.downcast_ref::<VersionMismatch>() {
                    return Err(End::Protocol(v.to_string()));
                }
                return Err(End::Protocol(format!("bad {:?} frame: {e:#}", f.ty)));
            }
        };
        match msg {
            Msg::Auth { version, nonce } => self.on_auth(version, nonce),
            Msg::Hello {
                version: _,
                resume,
                descriptor,
            } => self.on_hello(resume, descriptor),
            Msg::Heartbeat => self.send(&Msg::Heartbeat),
            Msg::Bye { reason } => {
                if self.run.is_none() {
                    return Err(End::Protocol("Bye before Hello".into()));
                }
                Err(End::Bye(reason))
            }
            Msg::Fetch(sel) => {
                if self.run.is_some() {
                    return Err(End::Protocol(
                        "Fetch on a writer connection; open a separate connection".into(),
                    ));
                }
                self.on_fetch(&sel)
            }
            other => Err(End::Protocol(format!(
                "unexpected {:?} frame from a writer or fetcher",
                other.frame_type()
            ))),
        }
    }

    fn on_hello(&mut self, resume: bool, d: RunDescriptor) -> Result<(), End> {
        if self.run.is_some() {
            return Err(End::Protocol("second Hello on one connection".into()));
        }
        // Before any file is touched: a descriptor no writer can send creates nothing.
        let rules = AckRules::for_run(&d).map_err(|f| {
            End::Protocol(format!(
                "the run descriptor of run {} cannot come from a plugpull writer: {f}; \
                 nothing was stored",
                d.run_id
            ))
        })?;
        let slot = self.sh.slot(d.run_id);
        let mut s = lock(&slot);
        let opened_here = s.log.is_none();
        if opened_here {
            match AckLog::open_or_create(&FsStorage, &self.sh.dir, &d) {
                Ok((l, rec)) => {
                    if let Some(r) = rec.filter(|r| r.reason.is_some()) {
                        self.sh.log(format_args!(
                            "run {}: recovered log ({} bytes cut: {})",
                            d.run_id,
                            r.truncated_bytes,
                            r.reason.unwrap_or_default()
                        ));
                    }
                    s.log = Some(l.with_journal(self.sh.journal.clone()))
                }
                Err(e) => return Err(End::Protocol(format!("{e:#}"))),
            }
        }
        // Validate before taking over: a bad Hello must not disturb a live writer.
        let log = s.log.as_ref().expect("opened above");
        let reject = if log.descriptor() != &d {
            Some(format!(
                "run {} is already logged with a different run descriptor; a writer must \
                 not reuse another run's id",
                d.run_id
            ))
        } else if !resume && log.durable_acks() > 0 {
            Some(format!(
                "run {} already has {} acks at this witness but the writer says it is \
                 new; a new run needs a new run id",
                d.run_id,
                log.durable_acks()
            ))
        } else {
            None
        };
        if let Some(m) = reject {
            if opened_here {
                s.log = None;
            }
            return Err(End::Protocol(m));
        }
        let mut took_over = String::new();
        if let Some(old) = s.owner_stream.take() {
            // The writer reconnected before we noticed its old connection die.
            let _ = old.shutdown(Shutdown::Both);
            took_over = format!(
                "; took over from {}",
                old.peer_addr().map(|a| a.to_string()).unwrap_or("?".into())
            );
        }
        s.owner = None;
        let log = s.log.as_mut().expect("opened above");
        log.append_event(&WitnessEvent {
            at_ns: now_ns(),
            kind: "connect".into(),
            peer: self.peer.to_string(),
            durable_acks: log.durable_acks(),
            last_ack_at_ns: None,
            detail: format!("resume={resume}{took_over}"),
        });
        let durable = match log.commit() {
            Ok(n) => n,
            Err(e) => {
                s.log = None;
                return Err(End::Storage(format!("{e:#}")));
            }
        };
        s.owner = Some(self.id);
        s.owner_stream = self.stream.try_clone().ok();
        drop(s);
        self.sh.note_run(&d);
        self.run = Some((d.run_id, slot));
        self.rules = Some(rules);
        self.sh.event(
            "connect",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("run", &d.run_id.hex()),
                ("device", &d.device.key()),
                ("mode", &if resume { "resume" } else { "new" }),
                ("auth", &self.auth_name()),
                ("durable", &durable),
                (
                    "took_over",
                    &took_over.trim_start_matches("; took over from "),
                ),
            ],
        );
        self.send(&Msg::Welcome {
            version: PROTOCOL_VERSION,
            durable_acks: durable,
        })
    }

    fn on_acks(&mut self, first: u64, acks: &[Ack]) -> Result<(), End> {
        let Some((_, slot)) = &self.run else {
            return Err(End::Protocol(
                "Acks before Hello: a writer must introduce its run first".into(),
            ));
        };
        let rules = self.rules.as_ref().expect("set with run");
        {
            let mut guard = lock(slot);
            let s = &mut *guard;
            if s.owner != Some(self.id) {
                return Err(End::TakenOver);
            }
            let log = s.log.as_mut().expect("owner holds an open log");
            let appended = log.appended_acks();
            if s.seqs_at_acks != appended {
                s.seqs.reset();
            }
            // Only acks past the log's end are new (append_acks drops resent ones and
            // refuses a gap); they are checked before any is appended.
            if let Some(skip) = appended.checked_sub(first) {
                let new = &acks[(skip as usize).min(acks.len())..];
                s.seqs.check_batch(rules, appended, new).map_err(|v| {
                    End::Protocol(format!(
                        "{v}; a plugpull writer never sends this: the frame is refused and \
                         nothing of it is stored"
                    ))
                })?;
            }
            log.append_acks(first, acks)
                .map_err(|e| End::Protocol(format!("{e:#}")))?;
            s.seqs_at_acks = log.appended_acks();
        }
        self.acks_received += acks.len() as u64;
        self.last_ack_at_ns = Some(now_ns());
        // Even a pure resend of durable acks deserves a Durable reply.
        self.dirty = true;
        Ok(())
    }

    /// Makes everything appended since the last commit durable (one journal sync,
    /// shared with every other run's commits of that moment), then Durable.
    fn commit_and_reply(&mut self) -> Option<End> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let (_, slot) = self.run.as_ref()?;
        let mut s = lock(slot);
        if s.owner != Some(self.id) {
            return Some(End::TakenOver);
        }
        let durable = match s.log.as_mut()?.commit() {
            Ok(n) => n,
            Err(e) => return Some(End::Storage(format!("{e:#}"))),
        };
        drop(s);
        self.send(&Msg::Durable {
            durable_acks: durable,
        })
        .err()
    }

    fn on_fetch(&mut self, sel: &RunSelector) -> Result<(), End> {
        let run = match sel {
            RunSelector::Run(r) => *r,
            RunSelector::LatestForDevice(key) => match lock(&self.sh.latest).get(key) {
                Some(&(_, r)) => r,
                None => {
                    return Err(End::Protocol(format!(
                        "no run for device {key} at this witness; pass --run RUN_ID"
                    )));
                }
            },
        };
        let path = layout::log_path(&self.sh.dir, run);
        // Serve only the durable prefix of a log that a writer is appending to.
        let limit = match lock(&self.sh.runs).get(&run).cloned() {
            Some(slot) => lock(&slot).log.as_ref().map(|l| l.durable_len_bytes()),
            None => None,
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(End::Protocol(format!("no run {run} at this witness")));
            }
            Err(e) => return Err(End::Storage(format!("opening {}: {e}", path.display()))),
        };
        let limit = limit.unwrap_or(u64::MAX);
        let mut checker = LogChecker::default();
        let mut scratch = Vec::new();
        let mut out = Vec::with_capacity(FETCH_FLUSH_BYTES * 2);
        let stream = &mut self.stream;
        let mut sealer = self.session.as_mut().map(|s| &mut s.sealer);
        let reader = io::BufReader::new(file.take(limit));
        let r = scan::scan_frames_resync(reader, log::is_log_frame, |f, damage| {
            if let Some(d) = damage {
                checker.note_damage(d);
            }
            let start = out.len();
            match checker.check(f, &mut scratch)? {
                LogItem::Header | LogItem::EndMark => {}
                LogItem::Descriptor(d) => Msg::FetchRun(d.clone()).encode_into(&mut out),
                LogItem::Acks { .. } | LogItem::Event(_) => {
                    frame::encode_into(&mut out, f.ty, f.payload)
                }
            }
            if out.len() > start {
                auth::seal_opt(sealer.as_deref_mut(), &mut out, start);
            }
            if out.len() >= FETCH_FLUSH_BYTES {
                stream.write_all(&out)?;
                out.clear();
            }
            Ok(())
        });
        let end = match r {
            Ok(end) => end,
            Err(e) => return Err(End::Storage(format!("reading {}: {e:#}", path.display()))),
        };
        if checker.descriptor.is_none() {
            return Err(End::Protocol(format!(
                "run {run}'s log has no complete descriptor yet"
            )));
        }
        // Damage in the log reaches the fetcher as events, so verify cannot say PASS.
        let what = format!("the witness's ack log {}", path.display());
        for e in checker.damage_events(&what, &end) {
            let start = out.len();
            Msg::Event(e).encode_into(&mut out);
            auth::seal_opt(sealer.as_deref_mut(), &mut out, start);
        }
        let start = out.len();
        Msg::FetchEnd { acks: checker.acks }.encode_into(&mut out);
        auth::seal_opt(sealer, &mut out, start);
        self.stream.write_all(&out).map_err(End::Io)?;
        self.sh.event(
            "fetch",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("run", &run.hex()),
                ("auth", &self.auth_name()),
                ("acks", &checker.acks),
            ],
        );
        Err(End::Fetched)
    }
}

/// `plugpull listen`: runs the witness in the foreground, one log line per event.
pub fn run(a: ListenArgs) -> anyhow::Result<()> {
    let key = auth::load_key(a.key_file.as_deref())?;
    let keyed = key.is_some();
    if a.max_frame_bytes < MIN_MAX_FRAME_BYTES || a.max_frame_bytes > frame::MAX_FRAME_BYTES {
        anyhow::bail!(
            "--max-frame-bytes must be between {MIN_MAX_FRAME_BYTES} and {} (writers send \
             ack frames of up to ~160 KiB)",
            frame::MAX_FRAME_BYTES
        );
    }
    let fds = raise_fd_limit();
    let w = Witness::start(
        &a.bind,
        &a.dir,
        WitnessOptions {
            max_connections: a.max_connections,
            idle_timeout: a.idle_timeout,
            handshake_timeout: a.handshake_timeout,
            max_frame_bytes: a.max_frame_bytes,
            key,
            quiet: false,
            journal: JournalOptions::default(),
        },
    )?;
    w.shared.log(format_args!(
        "listening on {} (protocol {PROTOCOL_VERSION}), logs in {}, {}",
        w.addr,
        a.dir.display(),
        if keyed {
            "every frame authenticated with --key-file"
        } else {
            "no authentication"
        }
    ));
    // Each pending handshake, writer, fetch and open run log holds a descriptor.
    let need = (MAX_PENDING_HANDSHAKES + 2 * a.max_connections + FETCH_CONNECTIONS + 64) as u64;
    if fds < need {
        w.shared.event(
            "warning",
            &[(
                "detail",
                &format_args!(
                    "the open-files limit is {fds}, below the {need} that \
                     --max-connections {} needs: raise it (ulimit -n) or lower \
                     --max-connections",
                    a.max_connections
                ),
            )],
        );
    }
    w.wait();
    Ok(())
}

/// Raises this process's soft open-files limit to its hard limit and returns the limit
/// in force. The usual soft limit, 1024, is below what the connection caps allow.
fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct we pass, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    r.rlim_cur
}
