//! The durable ack log: one append-only file of frames per run, `<run id hex>.acklog`.
//!
//! ```text
//! FileHeader(magic "PPACKLOG", version) | Descriptor(JSON)
//!   | { Acks | CompactAcks (v2) | PackedAcks (v3) | FileAcks | Event }* [ LogEnd ]
//! ```
//!
//! Why frames with checksums and a torn-tail rule: the witness may be killed in the
//! middle of an append. Everything it reported durable was fdatasync'd before (in the
//! log, or in the witness journal that `journal::replay` copies back into the log before
//! any log is opened), so it lies in complete frames before any torn one; on open we keep
//! every complete frame and cut the rest, and never report an ack durable that is not in
//! such a frame. Why group commit: one sync per batch of frames instead of per ack is
//! what lets one witness keep up with writers producing >100k acks/s.
//!
//! Why a torn tail is only what has no valid frame after it (and at most
//! [`MAX_TORN_TAIL_BYTES`], one commit): a crash tears only the last append, while a bad
//! frame with valid frames after it is damage (a disk error, an edit), and the frames
//! after it hold acks the witness confirmed. Cutting there destroyed them, and reading
//! only up to it made verify judge a fraction of the run and say PASS. So every reader
//! resynchronises past damage (module `scan`), keeps every valid frame and names the
//! damage (`checker::DAMAGE_EVENT` events); recovery refuses a damaged log and leaves it byte for byte.
//!
//! Why an end mark (LogEnd): a file cut at a frame boundary, spliced from two logs or
//! edited with fixed-up checksums looks like a good log. `plugpull fetch -o` ends its
//! file in a mark with the ack count and a BLAKE3 digest of everything before it (a MAC
//! with the witness key when given; module `export`), and `reader::read_log_file_checked`
//! says whether the file is whole. `verify --acks` reads either format with it.
//!
//! This module appends to and recovers one run's log. Reading a run (the log with the
//! witness journal overlaid) is module `reader`; the journal is module `journal`, and
//! reaches a log only through [`GroupCommit`], so neither module imports the other.

use crate::model::{Ack, FileName, RunDescriptor, WitnessEvent};
use crate::record::RunId;
use crate::wire::file_acks;
use crate::wire::frame::{self, FrameType};
use crate::wire::msg::{self, LOG_VERSION, LOG_VERSION_COMPACT, LOG_VERSION_PLAIN, Msg};
use crate::witness::store::checker::{LogChecker, LogItem};
use crate::witness::store::error::{Context, StoreError, StoreResult, invalid};
use crate::witness::store::layout::{log_path, sync_dir};
use crate::witness::store::scan::{
    MAX_TORN_TAIL_BYTES, ScanEnd, scan_frames_resync, scan_frames_until,
};
use crate::witness::store::storage::{FileReader, Storage, StorageFile};
use std::io::{self, Read};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What makes a log's appends durable with one fdatasync shared by every run: the
/// witness journal. The log writes its bytes first, then hands a copy here; `commit`
/// returns once they are durable (the journal's module doc says why that order is safe).
pub trait GroupCommit: Send + Sync {
    /// Makes `data`, already written at `offset` of `run`'s log, durable.
    fn commit(&self, run: RunId, offset: u64, data: &[u8]) -> StoreResult<()>;
}

/// Frame types an ack log file may hold. After a bad frame, only a valid frame of one
/// of these types proves the bad one was not the tail.
pub fn is_log_frame(t: FrameType) -> bool {
    matches!(
        t,
        FrameType::FileHeader
            | FrameType::Descriptor
            | FrameType::Acks
            | FrameType::CompactAcks
            | FrameType::FileAcks
            | FrameType::PackedAcks
            | FrameType::Event
            | FrameType::LogEnd
    )
}

/// Reads frames from `r`, calling `each` for every valid one, until EOF. See
/// [`scan_frames_resync`]; frames after damage are passed on too.
pub fn scan_frames<R: Read>(
    r: R,
    mut each: impl FnMut(&frame::Frame<'_>) -> StoreResult<()>,
) -> StoreResult<ScanEnd> {
    scan_frames_resync(r, is_log_frame, |f, _| each(f))
}

/// What opening an existing log found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the end (a torn or damaged tail).
    pub truncated_bytes: u64,
    /// Why the tail was cut.
    pub reason: Option<String>,
}

/// An open, appendable log of one run.
///
/// Appends go to a buffer; [`AckLog::commit`] writes the buffer and makes it durable with
/// ONE fdatasync: of the log itself, or, in the witness, of the journal shared by every
/// run ([`AckLog::with_journal`]). Only after `commit` returns are the appended acks
/// durable.
pub struct AckLog {
    file: Box<dyn StorageFile>,
    journal: Option<Arc<dyn GroupCommit>>,
    path: PathBuf,
    descriptor: RunDescriptor,
    appended_acks: u64,
    durable_acks: u64,
    durable_len_bytes: u64,
    pending: Vec<u8>,
    /// Format version of the file's header: a version 1 log gets plain Acks frames only,
    /// a version 2 log CompactAcks, a version 3 log PackedAcks.
    version: u16,
    /// Acks appended since the last commit or event, not yet encoded: encoding them all
    /// at once gives compact frames the longest runs. Numbered from `appended_acks -
    /// unencoded.len()`.
    unencoded: Vec<Ack>,
    /// Set when a write or fdatasync failed: the file's state past `durable_len_bytes`
    /// is unknown, so nothing more may be reported durable from this handle.
    poisoned: Option<String>,
    /// The witness-clock time of the log's first event (the first Hello's `connect`):
    /// when the witness first heard of the run. Runs are ordered by it, never by the
    /// writer's `started_at`, which is the host under test's clock.
    first_event_at_ns: Option<u64>,
    /// Whether the log's last connection event is a `connect` with no end after it: the
    /// witness stopped while a writer was connected.
    connection_open: bool,
}

impl AckLog {
    /// Creates a new log with header and descriptor, durable (file and directory entry)
    /// before it returns. Fails if the file exists.
    pub fn create(storage: &dyn Storage, dir: &Path, desc: &RunDescriptor) -> StoreResult<AckLog> {
        let path = log_path(dir, desc.run_id);
        let file = storage
            .create_new(&path)
            .with_context(|| format!("creating ack log {}", path.display()))?;
        let mut log = AckLog {
            file,
            journal: None,
            path,
            descriptor: desc.clone(),
            appended_acks: 0,
            durable_acks: 0,
            durable_len_bytes: 0,
            pending: Vec::new(),
            version: LOG_VERSION,
            unencoded: Vec::new(),
            poisoned: None,
            first_event_at_ns: None,
            connection_open: false,
        };
        Msg::FileHeader {
            version: LOG_VERSION,
        }
        .encode_into(&mut log.pending);
        Msg::Descriptor(desc.clone()).encode_into(&mut log.pending);
        log.commit()?;
        sync_dir(storage, dir)?;
        Ok(log)
    }

    /// Opens an existing log for appending: scans it, truncates a torn tail (keeping
    /// every complete frame before it) and makes the truncation durable.
    ///
    /// A torn tail is only what follows the last valid frame, and at most
    /// [`MAX_TORN_TAIL_BYTES`]. Anything else is damage: bad bytes with a valid frame
    /// after them, or an unreadable tail longer than any commit. Then this refuses with
    /// the file exactly as it was, because the frames after the damage hold acks the
    /// witness confirmed.
    pub fn open(storage: &dyn Storage, path: &Path) -> StoreResult<(AckLog, Recovery)> {
        let file = storage
            .open(path)
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let file_len = file
            .size()
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let mut checker = LogChecker::default();
        let mut scratch = Vec::new();
        let mut first_event_at_ns = None;
        let mut connection_open = false;
        let reader = FileReader::new(&*file);
        let end = scan_frames_resync(
            io::BufReader::with_capacity(256 << 10, reader),
            is_log_frame,
            |fr, damage| {
                if let Some(d) = damage {
                    checker.note_damage(d);
                }
                if let LogItem::Event(e) = checker.check(fr, &mut scratch)? {
                    first_event_at_ns.get_or_insert(e.at_ns);
                    match e.kind.as_str() {
                        "connect" => connection_open = true,
                        "bye" | "disconnect" | "error" => connection_open = false,
                        _ => {}
                    }
                }
                Ok(())
            },
        )
        .with_context(|| format!("recovering ack log {}", path.display()))?;
        let Some(descriptor) = checker.descriptor.clone() else {
            invalid!(
                "{} holds no complete run descriptor ({} bytes): the witness was killed \
                 while creating it, or it is not an ack log",
                path.display(),
                file_len
            );
        };
        if let Some(why) = not_recoverable(&checker, &end) {
            invalid!(
                "ack log {} {why}. The witness leaves it exactly as it is and accepts no \
                 more acks for run {}. Its acks stay readable: `plugpull verify TARGET \
                 --acks {}` (or through this witness) reports them and names the damage. \
                 Keep a copy of the file; move it out of the witness directory to silence \
                 this",
                path.display(),
                descriptor.run_id,
                path.display()
            );
        }
        let mut rec = Recovery::default();
        if end.valid_len_bytes < file_len {
            rec.truncated_bytes = file_len - end.valid_len_bytes;
            rec.reason = end.tail.clone();
            file.set_len(end.valid_len_bytes)
                .and_then(|()| file.sync_all())
                .with_context(|| format!("truncating the torn tail of {}", path.display()))?;
        }
        Ok((
            AckLog {
                file,
                journal: None,
                path: path.to_path_buf(),
                descriptor,
                appended_acks: checker.acks,
                durable_acks: checker.acks,
                durable_len_bytes: end.valid_len_bytes,
                pending: Vec::new(),
                version: checker.version,
                unencoded: Vec::new(),
                poisoned: None,
                first_event_at_ns,
                connection_open,
            },
            rec,
        ))
    }

    /// Opens the log of `desc`'s run, or creates it. A log left without a complete
    /// descriptor by a crash during creation held no durable ack and is rewritten.
    pub fn open_or_create(
        storage: &dyn Storage,
        dir: &Path,
        desc: &RunDescriptor,
    ) -> StoreResult<(AckLog, Option<Recovery>)> {
        let path = log_path(dir, desc.run_id);
        match storage.exists(&path) {
            Ok(false) => Ok((AckLog::create(storage, dir, desc)?, None)),
            Err(e) => Err(e).with_context(|| format!("inspecting {}", path.display())),
            Ok(true) => {
                if let Some(why) = creation_torn(storage, &path)? {
                    storage
                        .remove(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                    let log = AckLog::create(storage, dir, desc)?;
                    return Ok((
                        log,
                        Some(Recovery {
                            truncated_bytes: 0,
                            reason: Some(why),
                        }),
                    ));
                }
                let (log, rec) = AckLog::open(storage, &path)?;
                if log.descriptor != *desc {
                    invalid!(
                        "run {} is already logged with a different run descriptor; a \
                         writer must not reuse another run's id",
                        desc.run_id
                    );
                }
                Ok((log, Some(rec)))
            }
        }
    }

    /// From now on, commits are made durable by `journal` instead of the log's own
    /// fdatasync.
    pub fn with_journal(mut self, journal: Arc<dyn GroupCommit>) -> AckLog {
        self.journal = Some(journal);
        self
    }

    pub fn descriptor(&self) -> &RunDescriptor {
        &self.descriptor
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Acks appended so far, durable or not.
    /// When the witness first heard of this run (its clock, ns since the epoch): the
    /// time of the log's first event, None for a log that has none yet.
    pub fn first_event_at_ns(&self) -> Option<u64> {
        self.first_event_at_ns
    }

    /// Whether the last connection event is a `connect` nothing ended.
    pub fn connection_open(&self) -> bool {
        self.connection_open
    }

    pub fn appended_acks(&self) -> u64 {
        self.appended_acks
    }
    /// Acks fdatasync'd: the number the witness may report.
    pub fn durable_acks(&self) -> u64 {
        self.durable_acks
    }
    /// Length of the fdatasync'd prefix of the file.
    pub fn durable_len_bytes(&self) -> u64 {
        self.durable_len_bytes
    }

    /// Appends the acks of a batch numbered from `first` that the log does not have yet
    /// (a writer resends after a reconnect); returns how many were new. A batch that
    /// starts past the end of the log would leave a hole and is refused.
    pub fn append_acks(&mut self, first: u64, acks: &[Ack]) -> StoreResult<u64> {
        let Some(skip) = self.new_from(first, acks.len())? else {
            return Ok(0);
        };
        let new = &acks[skip..];
        if self.version > LOG_VERSION_PLAIN {
            self.unencoded.extend_from_slice(new);
            self.appended_acks += new.len() as u64;
            return Ok(new.len() as u64);
        }
        for chunk in new.chunks(msg::MAX_ACKS_PER_FRAME) {
            msg::encode_acks_into(&mut self.pending, self.appended_acks, chunk.iter());
            self.appended_acks += chunk.len() as u64;
        }
        Ok(new.len() as u64)
    }

    /// How many acks at the front of a batch of `len` numbered from `first` the log has
    /// already (a resend), or None if it has them all; a gap is refused.
    fn new_from(&self, first: u64, len: usize) -> StoreResult<Option<usize>> {
        if first > self.appended_acks {
            invalid!(
                "acks {first}.. would leave a gap: the witness has {} acks of this run; \
                 a writer must resend from the Welcome's durable count",
                self.appended_acks
            );
        }
        let skip = (self.appended_acks - first) as usize;
        Ok((skip < len).then_some(skip))
    }

    /// [`AckLog::append_acks`] for file acks, one name per ack: they go into FileAcks
    /// frames, numbered in the same sequence as every other ack. A version 1 log gets
    /// plain Acks frames (its writer's plugpull reads nothing else); verify then takes
    /// the names from the run's plan, as for any tree run logged before file entries.
    pub fn append_file_acks(
        &mut self,
        first: u64,
        acks: &[Ack],
        names: &[FileName],
    ) -> StoreResult<u64> {
        assert_eq!(acks.len(), names.len(), "one name per file ack");
        if self.version == LOG_VERSION_PLAIN {
            return self.append_acks(first, acks);
        }
        let Some(skip) = self.new_from(first, acks.len())? else {
            return Ok(0);
        };
        self.encode_unencoded();
        let mut at = skip;
        while at < acks.len() {
            let entries = acks[at..].iter().zip(&names[at..]);
            let n =
                file_acks::encode_file_acks_into(&mut self.pending, self.appended_acks, entries);
            at += n;
            self.appended_acks += n as u64;
        }
        Ok((acks.len() - skip) as u64)
    }

    pub fn append_event(&mut self, e: &WitnessEvent) {
        self.first_event_at_ns.get_or_insert(e.at_ns);
        match e.kind.as_str() {
            "connect" => self.connection_open = true,
            "bye" | "disconnect" | "error" => self.connection_open = false,
            _ => {}
        }
        self.encode_unencoded();
        Msg::Event(e.clone()).encode_into(&mut self.pending);
    }

    /// Encodes the acks appended since the last encoding into `pending`, in the compact
    /// frames of the log's format where that is smaller: CompactAcks in a version 2 log
    /// (a run begun under the plugpull before PackedAcks stays readable by it),
    /// PackedAcks from version 3 on.
    fn encode_unencoded(&mut self) {
        if self.unencoded.is_empty() {
            return;
        }
        let first = self.appended_acks - self.unencoded.len() as u64;
        if self.version == LOG_VERSION_COMPACT {
            msg::encode_acks_compact_into(&mut self.pending, first, &self.unencoded);
        } else {
            msg::encode_acks_packed_into(&mut self.pending, first, &self.unencoded);
        }
        self.unencoded.clear();
        if self.unencoded.capacity() > 1 << 20 {
            self.unencoded.shrink_to(1 << 16);
        }
    }

    /// Writes everything appended and fdatasyncs once; returns the durable ack count.
    /// Nothing appended is durable unless this returned Ok.
    pub fn commit(&mut self) -> StoreResult<u64> {
        if let Some(why) = &self.poisoned {
            invalid!("ack log {} failed earlier: {why}", self.path.display());
        }
        self.encode_unencoded();
        if self.pending.is_empty() {
            return Ok(self.durable_acks);
        }
        let start = self.durable_len_bytes;
        let res = self
            .file
            .write_at(&self.pending, start)
            .map_err(StoreError::from)
            .and_then(|()| match &self.journal {
                // The log write above comes first: a checkpoint relies on it.
                Some(j) => j.commit(self.descriptor.run_id, start, &self.pending),
                None => self.file.sync_data().map_err(Into::into),
            });
        if let Err(e) = res {
            let why = e.detail();
            self.poisoned = Some(why.clone());
            // Best effort: cut what may be a partial frame; recovery on the next open
            // would do the same.
            let _ = self.file.set_len(self.durable_len_bytes);
            invalid!(
                "writing ack log {}: {why} (check free space and the disk of the witness \
                 directory)",
                self.path.display()
            );
        }
        self.durable_len_bytes += self.pending.len() as u64;
        self.pending.clear();
        if self.pending.capacity() > 8 << 20 {
            self.pending.shrink_to(1 << 20);
        }
        // The durable count is a promise to the writer: it never moves backwards.
        // Checked in every build (one comparison per commit).
        assert!(
            self.appended_acks >= self.durable_acks,
            "ack log {}: the durable count would move back from {} to {}",
            self.path.display(),
            self.durable_acks,
            self.appended_acks
        );
        self.durable_acks = self.appended_acks;
        Ok(self.durable_acks)
    }
}

/// Why a scanned log must not be opened for appending (and its tail not cut), if so.
fn not_recoverable(checker: &LogChecker, end: &ScanEnd) -> Option<String> {
    if let Some(d) = checker.damage.first() {
        return Some(format!(
            "is damaged: {}; so this is not a torn tail{}",
            d.damage,
            match d.acks_lost {
                Some(n) => format!(" ({n} acks lost with the damaged bytes)"),
                None => String::new(),
            }
        ));
    }
    if end.tail_bytes > MAX_TORN_TAIL_BYTES {
        return Some(format!(
            "is damaged: its last {} bytes, from byte {}, are unreadable ({}), more than \
             the {MAX_TORN_TAIL_BYTES} bytes one commit can leave torn",
            end.tail_bytes,
            end.valid_len_bytes,
            end.tail.as_deref().unwrap_or("?")
        ));
    }
    if checker.has_end_mark() {
        return Some(
            "ends in an end mark: it is `plugpull fetch` output, not a log this witness \
             appends to"
                .into(),
        );
    }
    None
}

/// If `path` is a log whose creation was interrupted (a prefix of header + descriptor,
/// nothing else), says why; such a file never held an ack.
fn creation_torn(storage: &dyn Storage, path: &Path) -> StoreResult<Option<String>> {
    let f = storage
        .open_read(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut frames = 0;
    let mut header_ok = true;
    let end = scan_frames(io::BufReader::new(FileReader::new(&*f)), |fr| {
        frames += 1;
        if frames == 1 && fr.ty != FrameType::FileHeader {
            header_ok = false;
        }
        Ok(())
    })?;
    let torn = end.damage.is_empty() && end.tail.as_deref().is_none_or(|t| t.starts_with("torn"));
    if frames < 2 && header_ok && torn {
        return Ok(Some(format!(
            "log creation was interrupted ({} frames, {})",
            frames,
            end.tail.as_deref().unwrap_or("empty")
        )));
    }
    Ok(None)
}

/// Reads the descriptor of a log without reading its acks (for the witness's index).
pub fn read_descriptor(storage: &dyn Storage, path: &Path) -> StoreResult<RunDescriptor> {
    let f = storage.open_read(path)?;
    let mut checker = LogChecker::default();
    let mut scratch = Vec::new();
    // The descriptor is the second frame: stop there instead of reading every ack.
    let r = scan_frames_until(
        io::BufReader::new(FileReader::new(&*f)),
        is_log_frame,
        |fr, _| {
            checker.check(fr, &mut scratch)?;
            Ok(match checker.descriptor {
                Some(_) => ControlFlow::Break(()),
                None => ControlFlow::Continue(()),
            })
        },
    );
    match (r, checker.descriptor) {
        (_, Some(d)) => Ok(d),
        (Err(e), None) => Err(e),
        (Ok(_), None) => invalid!("{} holds no complete run descriptor", path.display()),
    }
}
