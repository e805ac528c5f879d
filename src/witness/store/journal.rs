//! The witness journal: one file shared by every run, so that one fdatasync makes the
//! appends of all writers durable at once (group commit across runs).
//!
//! Why: with one fdatasync per run log, 64 writers meant 64 concurrent fdatasyncs, each
//! forcing its own file-system journal commit, and a p99 ack-to-durable latency of
//! 6.6 ms on this project's test disk; with one journal synced for all runs it is about
//! 3-4 ms (docs/performance.md, "Witness"). The run logs stay the format everything
//! reads; the journal only makes their appends durable sooner:
//!
//! 1. A run's commit writes its frames to its log (page cache only), then queues a copy,
//!    (run, offset, bytes), for the journal, and waits until a journal fdatasync covers
//!    that copy. One sync thread writes and syncs everything queued, for every run at
//!    once, back to back.
//! 2. Past [`JournalOptions::rotate_bytes`] the sync thread switches to a fresh journal
//!    file; a checkpoint thread fdatasyncs the run logs the old file touched, then
//!    deletes it.
//! 3. At startup, before any log is opened, `journal_replay::replay` copies every surviving journal's
//!    entries into their logs (the same bytes at the same offsets, so replaying twice is
//!    harmless), fdatasyncs the logs and deletes the journals.
//!
//! The rule that makes this safe: a log's bytes reach its page cache *before* their copy
//! enters the journal, so when a checkpoint fdatasyncs the logs an old journal touched,
//! every entry that journal holds is in them.
//!
//! File format (docs/protocol.md): frames of the ack-log codec (module `frame`), a
//! `JournalHeader` frame then `JournalWrite` frames. A torn tail (nothing valid after
//! it) is ignored, as in logs; damage (a bad frame with valid entries after it) stops
//! `journal_replay::replay` before it writes anything, and `journal_replay::overlay`
//! reports it.
//!
//! This module writes journals and reads their entries; it reaches run logs only by
//! their names (module `layout`). Bringing entries back into the logs is module
//! `journal_replay`.

use crate::record::RunId;
use crate::sync::lock;
use crate::wire::frame::{self, FrameType};
use crate::witness::store::error::{Context, StoreResult, invalid};
use crate::witness::store::layout::{JOURNAL_EXTENSION, journal_path, log_path, sync_dir};
use crate::witness::store::scan::{Damage, scan_frames_resync};
use crate::witness::store::storage::{FileReader, Storage, StorageFile};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};

/// Magic at the start of a JournalHeader payload.
pub const JOURNAL_MAGIC: [u8; 8] = *b"PPJOURNL";
/// Journal format version.
pub const JOURNAL_VERSION: u16 = 1;
/// Bytes of log data carried by one JournalWrite frame at most.
const MAX_ENTRY_DATA_BYTES: usize = 1 << 20;
/// Shortest pause between two log syncs of a checkpoint.
const CHECKPOINT_PAUSE_MIN: std::time::Duration = std::time::Duration::from_millis(1);
/// A checkpoint frees a full journal's blocks this many bytes at a time.
const CHECKPOINT_TRUNCATE_STEP_BYTES: u64 = 2 << 20;
/// Bytes of a JournalWrite payload before its data: run id and offset.
const ENTRY_HEAD_BYTES: usize = 16 + 8;

/// Tunables of the journal.
#[derive(Clone, Debug)]
pub struct JournalOptions {
    /// Switch to a new journal file (and checkpoint the old one) past this size.
    pub rotate_bytes: u64,
    /// Run each checkpoint on the sync thread, without pauses, so the order of storage
    /// operations depends only on the callers: for simulated storage, where one seed
    /// must replay one sequence (tests/integration/witness_crash.rs). Never on a real disk: every
    /// writer would wait for every checkpoint.
    pub checkpoint_inline: bool,
}

impl Default for JournalOptions {
    fn default() -> Self {
        // 64 writers at 200k acks/s in total fill about 15 MB/s of journal (40 bytes an
        // ack plus framing), so this checkpoints every 4-5 s: rare enough that the
        // checkpoint's paced log syncs stay out of the p99, small enough that a replay
        // after a crash takes well under a second.
        JournalOptions {
            rotate_bytes: 64 << 20,
            checkpoint_inline: false,
        }
    }
}

/// Whether `dir` holds journal files (then its logs are read through `journal_replay::overlay`).
pub fn has_journal(storage: &dyn Storage, dir: &Path) -> bool {
    list_journals(storage, dir).is_ok_and(|j| !j.is_empty())
}

/// Journal files in `dir`, oldest generation first.
pub(crate) fn list_journals(storage: &dyn Storage, dir: &Path) -> StoreResult<Vec<(u64, PathBuf)>> {
    let mut found = BTreeMap::new();
    let entries = storage
        .list(dir)
        .with_context(|| format!("reading the witness directory {}", dir.display()))?;
    for path in entries {
        if path.extension().and_then(|x| x.to_str()) != Some(JOURNAL_EXTENSION) {
            continue;
        }
        // Only names the witness gives: 16 hex digits. Anything else is not ours.
        let generation = path
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| s.len() == 16)
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        if let Some(g) = generation {
            found.insert(g, path);
        }
    }
    Ok(found.into_iter().collect())
}

/// Frame types a journal file may hold (what resynchronisation after a bad frame looks
/// for: the log frames inside entries do not count).
fn is_journal_frame(t: FrameType) -> bool {
    matches!(t, FrameType::JournalHeader | FrameType::JournalWrite)
}

/// Calls `each(run, offset, data)` for every complete entry of one journal file, in order,
/// and returns the damage found: bad bytes with valid entries after them, whose entries
/// `each` still gets. A torn tail (bad bytes with nothing valid after them) ends the
/// file: those entries were never reported durable.
pub(crate) fn read_journal(
    storage: &dyn Storage,
    path: &Path,
    mut each: impl FnMut(RunId, u64, &[u8]) -> StoreResult<()>,
) -> StoreResult<Vec<Damage>> {
    let f = match storage.open_read(path) {
        Ok(f) => f,
        // A live witness checkpointed it since it was listed: its entries are in the logs,
        // and were in their page cache before anyone listed the journals.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let mut frames = 0u64;
    let reader = io::BufReader::with_capacity(1 << 20, FileReader::new(&*f));
    let end = scan_frames_resync(reader, is_journal_frame, |fr, damage| {
        frames += 1;
        if frames == 1 && damage.is_some() {
            invalid!("the journal header is damaged");
        }
        match (frames, fr.ty) {
            (1, FrameType::JournalHeader) => {
                let p = fr.payload;
                if p.len() != 18 || p[..8] != JOURNAL_MAGIC {
                    invalid!("bad journal header");
                }
                let version = crate::le::u16_at(p, 8);
                if version != JOURNAL_VERSION {
                    invalid!(
                        "journal format version {version} is not supported (this build \
                         reads version {JOURNAL_VERSION}); start the plugpull version that \
                         wrote it once, so it replays the journal"
                    );
                }
                Ok(())
            }
            (1, _) => invalid!("the first frame is not a journal header"),
            (_, FrameType::JournalWrite) => {
                let (run, offset, data) = decode_entry(fr.payload)?;
                each(run, offset, data)
            }
            (_, t) => invalid!("a {t:?} frame does not belong in a journal"),
        }
    })
    .with_context(|| {
        format!(
            "reading witness journal {}: if it is not plugpull's, move it out of the \
             witness directory",
            path.display()
        )
    })?;
    // No header at all is fine only if creation was cut short (a torn prefix).
    if let (0, Some(tail)) = (frames, &end.tail) {
        if !tail.starts_with("torn") {
            invalid!(
                "{} is not a witness journal ({tail}); move it out of the witness directory",
                path.display()
            );
        }
    }
    Ok(end.damage)
}

pub(crate) fn encode_header(out: &mut Vec<u8>, generation: u64) {
    let start = frame::begin_frame(out, FrameType::JournalHeader);
    out.extend_from_slice(&JOURNAL_MAGIC);
    out.extend_from_slice(&JOURNAL_VERSION.to_le_bytes());
    out.extend_from_slice(&generation.to_le_bytes());
    frame::end_frame(out, start);
}

pub(crate) fn encode_entries(out: &mut Vec<u8>, run: RunId, offset: u64, data: &[u8]) {
    let mut at = offset;
    for piece in data.chunks(MAX_ENTRY_DATA_BYTES) {
        let start = frame::begin_frame(out, FrameType::JournalWrite);
        out.extend_from_slice(&run.0);
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(piece);
        frame::end_frame(out, start);
        at += piece.len() as u64;
    }
}

fn decode_entry(p: &[u8]) -> StoreResult<(RunId, u64, &[u8])> {
    if p.len() < ENTRY_HEAD_BYTES {
        invalid!("journal entry of {} bytes is too short", p.len());
    }
    let run = RunId(p[..16].try_into().unwrap());
    let offset = crate::le::u64_at(p, 16);
    let data = &p[ENTRY_HEAD_BYTES..];
    if offset
        .checked_add(data.len() as u64)
        .is_none_or(|e| e > 1 << 48)
    {
        invalid!("journal entry at offset {offset} is beyond any log");
    }
    Ok((run, offset, data))
}

/// Creates journal file `generation` with its header, durable (file and directory entry).
fn create_file(
    storage: &dyn Storage,
    dir: &Path,
    generation: u64,
) -> StoreResult<(Box<dyn StorageFile>, u64)> {
    let path = journal_path(dir, generation);
    let f = storage
        .create_new(&path)
        .with_context(|| format!("creating witness journal {}", path.display()))?;
    let mut head = Vec::new();
    encode_header(&mut head, generation);
    f.write_at(&head, 0)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    sync_dir(storage, dir)?;
    Ok((f, head.len() as u64))
}

/// The open journal of a witness; shared by every connection.
pub struct Journal {
    inner: Arc<Inner>,
}

struct Inner {
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    opts: JournalOptions,
    state: Mutex<State>,
    /// Wakes the sync thread: something was queued, or the journal closes.
    work: Condvar,
    /// `synced[k % 2]` is signalled when sync number k ends (both when one fails), so
    /// a sync wakes only the connections whose entries it carried, not those queued
    /// for the next one.
    synced: [Condvar; 2],
}

struct State {
    file: Arc<dyn StorageFile>,
    generation: u64,
    len_bytes: u64,
    /// Encoded entries not yet written.
    pending: Vec<u8>,
    /// A spare buffer, so the sync thread swaps instead of allocating.
    spare: Vec<u8>,
    /// Sequence number of the newest append, and of the newest one fdatasync'd.
    appended_seq: u64,
    durable_seq: u64,
    /// Syncs started so far: what is queued now goes out with sync number `syncs + 1`.
    syncs: u64,
    /// Runs with entries in the current file: what its checkpoint must fdatasync.
    touched: BTreeSet<RunId>,
    /// The next journal file, created ahead so rotating never waits for a create.
    next: Option<(Box<dyn StorageFile>, u64)>,
    /// Set when a write, fdatasync or checkpoint failed: nothing more can be confirmed.
    failed: Option<String>,
    closed: bool,
}

/// A full journal file whose logs are to be made durable before it is deleted.
struct Checkpoint {
    path: PathBuf,
    runs: BTreeSet<RunId>,
    next_generation: u64,
}

impl Journal {
    /// Starts a fresh journal in `dir`. Call `journal_replay::replay` first: leftover journals would
    /// otherwise be replayed only at the next start, after logs were cut.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: JournalOptions,
    ) -> StoreResult<Journal> {
        let generation = list_journals(&*storage, dir)?
            .last()
            .map_or(1, |(g, _)| g + 1);
        let (file, len_bytes) = create_file(&*storage, dir, generation)?;
        let next = create_file(&*storage, dir, generation + 1)?;
        let inner = Arc::new(Inner {
            storage,
            dir: dir.to_path_buf(),
            opts,
            state: Mutex::new(State {
                file: Arc::from(file),
                generation,
                len_bytes,
                pending: Vec::with_capacity(1 << 20),
                spare: Vec::with_capacity(1 << 20),
                appended_seq: 0,
                durable_seq: 0,
                syncs: 0,
                touched: BTreeSet::new(),
                next: Some(next),
                failed: None,
                closed: false,
            }),
            work: Condvar::new(),
            synced: [Condvar::new(), Condvar::new()],
        });
        let (tx, rx) = channel();
        let (i1, i2) = (inner.clone(), inner.clone());
        std::thread::Builder::new()
            .name("witness-checkpoint".into())
            .spawn(move || checkpoint_loop(i1, rx))?;
        std::thread::Builder::new()
            .name("witness-sync".into())
            .spawn(move || sync_loop(i2, tx))?;
        Ok(Journal { inner })
    }

    /// Makes `data`, already written at `offset` of `run`'s log, durable: returns once a
    /// journal fdatasync covers it. The log write must come first (see the module doc).
    pub fn commit(&self, run: RunId, offset: u64, data: &[u8]) -> StoreResult<()> {
        let inner = &*self.inner;
        let mut st = lock(&inner.state);
        if let Some(why) = &st.failed {
            invalid!("the witness journal failed earlier: {why}");
        }
        encode_entries(&mut st.pending, run, offset, data);
        st.touched.insert(run);
        st.appended_seq += 1;
        let seq = st.appended_seq;
        let synced = &inner.synced[((st.syncs + 1) % 2) as usize];
        // Wake the sync thread with the lock released: woken under it, the thread would
        // find the lock taken and sleep again on it (two more futex calls and a context
        // switch per commit). The loop re-checks under the lock, so a sync that ends
        // before we wait is not missed.
        drop(st);
        inner.work.notify_one();
        st = lock(&inner.state);
        loop {
            if st.durable_seq >= seq {
                return Ok(());
            }
            if let Some(why) = &st.failed {
                invalid!("the witness journal failed: {why}");
            }
            st = crate::sync::wait(synced, st);
        }
    }

    /// Generation of the file being appended to (tests and logs).
    pub fn generation(&self) -> u64 {
        lock(&self.inner.state).generation
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        // Ends the sync thread, and with it the checkpoint thread (its channel closes).
        lock(&self.inner.state).closed = true;
        self.inner.work.notify_one();
    }
}

/// Writes and fdatasyncs whatever the runs queued, for all of them at once, until the
/// journal closes. A thread of its own, so the next sync starts the moment the last one
/// ends, not when some waiting connection next gets a core.
fn sync_loop(inner: Arc<Inner>, checkpoints: Sender<Checkpoint>) {
    let mut st = lock(&inner.state);
    loop {
        if st.closed {
            return;
        }
        if st.pending.is_empty() || st.failed.is_some() {
            st = crate::sync::wait(&inner.work, st);
            continue;
        }
        let spare = std::mem::take(&mut st.spare);
        let mut batch = std::mem::replace(&mut st.pending, spare);
        let upto = st.appended_seq;
        st.syncs += 1;
        let this_sync = st.syncs;
        let file = st.file.clone();
        let at = st.len_bytes;
        drop(st);
        let r = file.write_at(&batch, at).and_then(|()| file.sync_data());
        st = lock(&inner.state);
        match r {
            Ok(()) => {
                st.durable_seq = upto;
                st.len_bytes += batch.len() as u64;
                if st.len_bytes >= inner.opts.rotate_bytes {
                    rotate(&inner, &mut st, &checkpoints);
                }
            }
            Err(e) => {
                st.failed = Some(format!(
                    "writing witness journal {}: {e} (check free space and the disk of \
                     the witness directory)",
                    journal_path(&inner.dir, st.generation).display()
                ));
            }
        }
        batch.clear();
        if batch.capacity() <= 8 << 20 {
            st.spare = batch;
        }
        // Wake the waiters with the lock released, as in `Journal::commit`: each re-checks
        // `durable_seq` under the lock.
        let failed = st.failed.is_some();
        drop(st);
        inner.synced[(this_sync % 2) as usize].notify_all();
        if failed {
            inner.synced[((this_sync + 1) % 2) as usize].notify_all();
        }
        st = lock(&inner.state);
    }
}

/// Switches to the prepared next file and hands the full one to the checkpoint thread
/// (or, with [`JournalOptions::checkpoint_inline`], checkpoints it right here). Called
/// by the sync thread between syncs, so nothing is being written to either.
fn rotate(inner: &Inner, st: &mut State, checkpoints: &Sender<Checkpoint>) {
    let Some((next, len)) = st.next.take() else {
        // The previous checkpoint is still running; keep appending to this file.
        return;
    };
    let old = journal_path(&inner.dir, st.generation);
    st.file = Arc::from(next);
    st.generation += 1;
    st.len_bytes = len;
    let job = Checkpoint {
        path: old,
        runs: std::mem::take(&mut st.touched),
        next_generation: st.generation + 1,
    };
    if inner.opts.checkpoint_inline {
        match checkpoint(inner, &job) {
            Ok(next) => st.next = Some(next),
            Err(e) => st.failed = Some(e.detail()),
        }
        return;
    }
    if checkpoints.send(job).is_err() {
        st.failed = Some("the journal checkpoint thread is gone".into());
    }
}

/// Makes each full journal's logs durable, deletes the journal and prepares the next file.
fn checkpoint_loop(inner: Arc<Inner>, jobs: Receiver<Checkpoint>) {
    while let Ok(job) = jobs.recv() {
        let r = checkpoint(&inner, &job);
        let mut st = lock(&inner.state);
        match r {
            Ok(next) => st.next = Some(next),
            Err(e) => st.failed = Some(e.detail()),
        }
        inner.synced.iter().for_each(Condvar::notify_all);
    }
}

fn checkpoint(inner: &Inner, job: &Checkpoint) -> StoreResult<(Box<dyn StorageFile>, u64)> {
    let (storage, dir) = (&*inner.storage, &inner.dir);
    // Pauses matter only on a real disk; simulated storage runs checkpoints inline.
    let pace = |d: std::time::Duration| {
        if !inner.opts.checkpoint_inline {
            std::thread::sleep(d);
        }
    };
    for run in &job.runs {
        let path = log_path(dir, *run);
        let t0 = std::time::Instant::now();
        // fdatasync works on any descriptor of the file; the log may be closed by now.
        match storage.open_read(&path).and_then(|f| f.sync_data()) {
            Ok(()) => {}
            // Someone deleted the log: nothing of it left to keep, and no reason to stop
            // confirming every other run's acks.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("checkpoint: fdatasync of {}", path.display()));
            }
        }
        // Leave the disk to the journal's own syncs at least as long as this one took:
        // a burst of log syncs would hold up every writer's acks at once.
        pace(t0.elapsed().max(CHECKPOINT_PAUSE_MIN));
    }
    // Shrink before unlinking: freeing a 64 MiB file's blocks at once made the next
    // file-system commit, and with it the journal sync every writer waits for, 20 ms
    // late. A few MiB at a time spreads that over the commits the syncs make anyway.
    let old = storage
        .open(&job.path)
        .with_context(|| format!("checkpoint: opening {}", job.path.display()))?;
    let mut len = old
        .size()
        .with_context(|| format!("checkpoint: opening {}", job.path.display()))?;
    while len > 0 {
        len = len.saturating_sub(CHECKPOINT_TRUNCATE_STEP_BYTES);
        old.set_len(len)
            .with_context(|| format!("checkpoint: truncating {}", job.path.display()))?;
        pace(CHECKPOINT_PAUSE_MIN);
    }
    storage
        .remove(&job.path)
        .with_context(|| format!("checkpoint: removing {}", job.path.display()))?;
    // The directory sync in create_file also makes this removal durable.
    create_file(storage, dir, job.next_generation)
}
