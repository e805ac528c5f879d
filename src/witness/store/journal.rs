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
//! 3. At startup, before any log is opened, [`replay`] copies every surviving journal's
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
//! [`replay`] before it writes anything, and [`overlay`] reports it.

use crate::record::RunId;
use crate::wire::frame::{self, FrameType};
use crate::witness::store::log::{self, Damage, scan_frames_resync};
use crate::witness::store::storage::{FileReader, Storage, StorageFile};
use anyhow::{Context, bail};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// File name extension of journal files in the witness directory.
pub const JOURNAL_EXTENSION: &str = "journal";
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

/// Where generation `generation` of the journal lives.
pub fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:016x}.{JOURNAL_EXTENSION}"))
}

/// Tunables of the journal.
#[derive(Clone, Debug)]
pub struct JournalOptions {
    /// Switch to a new journal file (and checkpoint the old one) past this size.
    pub rotate_bytes: u64,
    /// Run each checkpoint on the sync thread, without pauses, so the order of storage
    /// operations depends only on the callers: for simulated storage, where one seed
    /// must replay one sequence (tests/witness_crash.rs). Never on a real disk: every
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

/// What [`replay`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    pub journals: usize,
    pub entries: u64,
    pub runs: usize,
    /// Entries whose run log is gone (someone deleted it); nothing could be done for them.
    pub orphaned_entries: u64,
    /// Entries that would have left a hole in their log (only damage makes them).
    pub skipped_entries: u64,
}

/// Copies every journal left in `dir` into the run logs, in generation order, makes the
/// logs durable and deletes the journals. Runs before the witness opens any log.
pub fn replay(storage: &dyn Storage, dir: &Path) -> anyhow::Result<Replayed> {
    let journals = list_journals(storage, dir)?;
    let mut out = Replayed {
        journals: journals.len(),
        ..Replayed::default()
    };
    // Check every journal before writing anything: a damaged one stops the start with
    // every file as it was.
    for (_, path) in &journals {
        if let Some(d) = read_journal(storage, path, |_, _, _| Ok(()))?.first() {
            bail!(
                "witness journal {} is damaged: {d}, so this is not a torn tail. The \
                 witness does not start on {} and changed nothing there: the entries after \
                 the damage are acks it confirmed. Keep a copy of the directory. To start \
                 anyway, move {} out of it: acks that only this journal held (those \
                 confirmed shortly before the witness stopped) will then be missing from \
                 their logs",
                path.display(),
                dir.display(),
                path.display()
            );
        }
    }
    // Each run's log and its length as replay extends it.
    type OpenLog = Option<(Box<dyn StorageFile>, u64)>;
    // Ordered, so the order of the syncs below (and a simulated cut among them) does not
    // depend on hashing.
    let mut logs: BTreeMap<RunId, OpenLog> = BTreeMap::new();
    for (_, path) in &journals {
        read_journal(storage, path, |run, offset, data| {
            let log = logs.entry(run).or_insert_with(|| {
                let f = storage.open(&log::log_path(dir, run)).ok()?;
                let len = f.size().ok()?;
                Some((f, len))
            });
            let Some((f, len)) = log else {
                out.orphaned_entries += 1;
                return Ok(());
            };
            // A run's entries continue its log; one past the end would leave a hole,
            // where reading the log stops anyway (the same rule as `overlay`).
            if offset > *len {
                out.skipped_entries += 1;
                return Ok(());
            }
            f.write_at(data, offset).with_context(|| {
                format!(
                    "replaying the journal into {}",
                    log::log_path(dir, run).display()
                )
            })?;
            *len = (*len).max(offset + data.len() as u64);
            out.entries += 1;
            Ok(())
        })?;
    }
    for (run, log) in &logs {
        if let Some((f, _)) = log {
            f.sync_data()
                .with_context(|| format!("fdatasync of {}", log::log_path(dir, *run).display()))?;
            out.runs += 1;
        }
    }
    for (_, path) in &journals {
        storage
            .remove(path)
            .with_context(|| format!("removing {}", path.display()))?;
    }
    if !journals.is_empty() {
        log::sync_dir(storage, dir)?;
    }
    Ok(out)
}

/// Applies the journal entries found in `dir` to the logs in `logs` (each run's log as
/// read from disk), without changing any file. After the witness's machine lost power,
/// its logs may lack acks that only the journal holds until `plugpull listen` replays
/// it; reading a log straight from the witness directory must still see them.
///
/// Returns the damage found in the journals (entries after it are applied too); which
/// runs the damaged bytes belonged to is unknown, so a reader names it for every log.
pub fn overlay(
    storage: &dyn Storage,
    dir: &Path,
    logs: &mut HashMap<RunId, Vec<u8>>,
) -> anyhow::Result<Vec<String>> {
    let mut damage = vec![];
    for (_, path) in list_journals(storage, dir)? {
        let found = read_journal(storage, &path, |run, offset, data| {
            let Some(bytes) = logs.get_mut(&run) else {
                return Ok(());
            };
            // Entries of a run follow each other; one past the end could only follow a
            // hole, where reading the log stops anyway.
            if offset > bytes.len() as u64 {
                return Ok(());
            }
            let (start, end) = (offset as usize, offset as usize + data.len());
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[start..end].copy_from_slice(data);
            Ok(())
        })?;
        damage.extend(
            found
                .iter()
                .map(|d| format!("witness journal {} is damaged: {d}", path.display())),
        );
    }
    Ok(damage)
}

/// Whether `dir` holds journal files (then its logs are read through [`overlay`]).
pub fn has_journal(storage: &dyn Storage, dir: &Path) -> bool {
    list_journals(storage, dir).is_ok_and(|j| !j.is_empty())
}

/// Journal files in `dir`, oldest generation first.
fn list_journals(storage: &dyn Storage, dir: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
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
fn read_journal(
    storage: &dyn Storage,
    path: &Path,
    mut each: impl FnMut(RunId, u64, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Damage>> {
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
            bail!("the journal header is damaged");
        }
        match (frames, fr.ty) {
            (1, FrameType::JournalHeader) => {
                let p = fr.payload;
                if p.len() != 18 || p[..8] != JOURNAL_MAGIC {
                    bail!("bad journal header");
                }
                let version = u16::from_le_bytes([p[8], p[9]]);
                if version != JOURNAL_VERSION {
                    bail!(
                        "journal format version {version} is not supported (this build \
                         reads version {JOURNAL_VERSION}); start the plugpull version that \
                         wrote it once, so it replays the journal"
                    );
                }
                Ok(())
            }
            (1, _) => bail!("the first frame is not a journal header"),
            (_, FrameType::JournalWrite) => {
                let (run, offset, data) = decode_entry(fr.payload)?;
                each(run, offset, data)
            }
            (_, t) => bail!("a {t:?} frame does not belong in a journal"),
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
            bail!(
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

fn decode_entry(p: &[u8]) -> anyhow::Result<(RunId, u64, &[u8])> {
    if p.len() < ENTRY_HEAD_BYTES {
        bail!("journal entry of {} bytes is too short", p.len());
    }
    let run = RunId(p[..16].try_into().unwrap());
    let offset = u64::from_le_bytes(p[16..24].try_into().unwrap());
    let data = &p[ENTRY_HEAD_BYTES..];
    if offset
        .checked_add(data.len() as u64)
        .is_none_or(|e| e > 1 << 48)
    {
        bail!("journal entry at offset {offset} is beyond any log");
    }
    Ok((run, offset, data))
}

/// Creates journal file `generation` with its header, durable (file and directory entry).
fn create_file(
    storage: &dyn Storage,
    dir: &Path,
    generation: u64,
) -> anyhow::Result<(Box<dyn StorageFile>, u64)> {
    let path = journal_path(dir, generation);
    let f = storage
        .create_new(&path)
        .with_context(|| format!("creating witness journal {}", path.display()))?;
    let mut head = Vec::new();
    encode_header(&mut head, generation);
    f.write_at(&head, 0)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    log::sync_dir(storage, dir)?;
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

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Journal {
    /// Starts a fresh journal in `dir`. Call [`replay`] first: leftover journals would
    /// otherwise be replayed only at the next start, after logs were cut.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: &Path,
        opts: JournalOptions,
    ) -> anyhow::Result<Journal> {
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
    pub fn commit(&self, run: RunId, offset: u64, data: &[u8]) -> anyhow::Result<()> {
        let inner = &*self.inner;
        let mut st = lock(&inner.state);
        if let Some(why) = &st.failed {
            bail!("the witness journal failed earlier: {why}");
        }
        encode_entries(&mut st.pending, run, offset, data);
        st.touched.insert(run);
        st.appended_seq += 1;
        let seq = st.appended_seq;
        let synced = &inner.synced[((st.syncs + 1) % 2) as usize];
        inner.work.notify_one();
        loop {
            if st.durable_seq >= seq {
                return Ok(());
            }
            if let Some(why) = &st.failed {
                bail!("the witness journal failed: {why}");
            }
            st = synced.wait(st).unwrap_or_else(|p| p.into_inner());
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
            st = inner.work.wait(st).unwrap_or_else(|p| p.into_inner());
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
        inner.synced[(this_sync % 2) as usize].notify_all();
        if st.failed.is_some() {
            inner.synced[((this_sync + 1) % 2) as usize].notify_all();
        }
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
            Err(e) => st.failed = Some(format!("{e:#}")),
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
            Err(e) => st.failed = Some(format!("{e:#}")),
        }
        inner.synced.iter().for_each(Condvar::notify_all);
    }
}

fn checkpoint(inner: &Inner, job: &Checkpoint) -> anyhow::Result<(Box<dyn StorageFile>, u64)> {
    let (storage, dir) = (&*inner.storage, &inner.dir);
    // Pauses matter only on a real disk; simulated storage runs checkpoints inline.
    let pace = |d: std::time::Duration| {
        if !inner.opts.checkpoint_inline {
            std::thread::sleep(d);
        }
    };
    for run in &job.runs {
        let path = log::log_path(dir, *run);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Ack, RunDescriptor};
    use crate::wire::msg::tests::{ack, sample_descriptor};
    use crate::witness::store::log::{AckLog, read_log_file};
    use crate::witness::store::storage::FsStorage;
    use std::fs::OpenOptions;

    fn logs_with_journal(
        dir: &Path,
        opts: JournalOptions,
        runs: &[RunDescriptor],
    ) -> (Arc<Journal>, Vec<AckLog>) {
        let j = Arc::new(Journal::open(FsStorage::shared(), dir, opts).unwrap());
        let logs = runs
            .iter()
            .map(|d| {
                AckLog::create(&FsStorage, dir, d)
                    .unwrap()
                    .with_journal(j.clone())
            })
            .collect();
        (j, logs)
    }

    /// What a power cut does to a log whose appends were never fdatasync'd: the page
    /// cache is gone, the file holds only what was synced at creation.
    fn lose_unsynced_appends(log: &Path, synced_len_bytes: u64) {
        let f = OpenOptions::new().write(true).open(log).unwrap();
        f.set_len(synced_len_bytes).unwrap();
    }

    #[test]
    fn replay_restores_confirmed_acks_the_logs_lost() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [sample_descriptor(11), sample_descriptor(12)];
        let (j, mut logs) = logs_with_journal(dir.path(), JournalOptions::default(), &runs);
        let created: Vec<u64> = logs.iter().map(|l| l.durable_len_bytes()).collect();
        let acks: Vec<Ack> = (0..500).map(ack).collect();
        for c in acks.chunks(50) {
            for l in &mut logs {
                let first = l.appended_acks();
                l.append_acks(first, c).unwrap();
                assert_eq!(l.commit().unwrap(), first + c.len() as u64);
            }
        }
        drop(logs);
        drop(j);
        for (d, len) in runs.iter().zip(&created) {
            let p = log::log_path(dir.path(), d.run_id);
            lose_unsynced_appends(&p, *len);
            // Read straight from the witness directory, the journal fills the gap...
            assert_eq!(read_log_file(&p).unwrap().acks, acks);
            // ...also for several logs at once.
            assert_eq!(
                crate::witness::store::log::read_log_files(&[&p, &p])
                    .unwrap()
                    .iter()
                    .map(|l| l.acks.len())
                    .collect::<Vec<_>>(),
                vec![acks.len(), acks.len()]
            );
        }
        // ...and replay puts it back into the files.
        let r = replay(&FsStorage, dir.path()).unwrap();
        assert_eq!(r.runs, 2);
        assert!(r.entries >= 20, "{r:?}");
        assert!(
            !has_journal(&FsStorage, dir.path()),
            "replayed journals are deleted"
        );
        for d in &runs {
            let p = log::log_path(dir.path(), d.run_id);
            assert_eq!(read_log_file(&p).unwrap().acks, acks);
            let (l, rec) = AckLog::open(&FsStorage, &p).unwrap();
            assert_eq!(rec.truncated_bytes, 0);
            assert_eq!(l.durable_acks(), 500);
        }
        // Twice is harmless.
        assert_eq!(replay(&FsStorage, dir.path()).unwrap(), Replayed::default());
    }

    #[test]
    fn many_threads_share_syncs_and_every_commit_is_durable() {
        let dir = tempfile::tempdir().unwrap();
        let runs: Vec<_> = (0..16).map(|i| sample_descriptor(100 + i)).collect();
        let (j, logs) = logs_with_journal(dir.path(), JournalOptions::default(), &runs);
        let lens: Vec<u64> = logs.iter().map(|l| l.durable_len_bytes()).collect();
        std::thread::scope(|s| {
            for mut l in logs {
                s.spawn(move || {
                    for i in 0..200u64 {
                        l.append_acks(i, &[ack(i)]).unwrap();
                        assert_eq!(l.commit().unwrap(), i + 1);
                    }
                });
            }
        });
        drop(j);
        for (d, len) in runs.iter().zip(lens) {
            let p = log::log_path(dir.path(), d.run_id);
            lose_unsynced_appends(&p, len);
        }
        replay(&FsStorage, dir.path()).unwrap();
        for d in &runs {
            let got = read_log_file(&log::log_path(dir.path(), d.run_id)).unwrap();
            assert_eq!(got.acks, (0..200).map(ack).collect::<Vec<_>>());
        }
    }

    #[test]
    fn rotation_checkpoints_logs_and_deletes_old_journals() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [sample_descriptor(21), sample_descriptor(22)];
        let opts = JournalOptions {
            rotate_bytes: 4096,
            ..JournalOptions::default()
        };
        let (j, mut logs) = logs_with_journal(dir.path(), opts, &runs);
        let acks: Vec<Ack> = (0..3000).map(ack).collect();
        for c in acks.chunks(30) {
            for l in &mut logs {
                let first = l.appended_acks();
                l.append_acks(first, c).unwrap();
                l.commit().unwrap();
            }
        }
        assert!(j.generation() > 3, "rotated: generation {}", j.generation());
        // Give the last checkpoint a moment; then only the current and next file stay.
        let only_current_and_next = || {
            let left = list_journals(&FsStorage, dir.path()).unwrap();
            left.len() <= 2 && left.iter().all(|(g, _)| *g >= j.generation())
        };
        for _ in 0..200 {
            if only_current_and_next() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            only_current_and_next(),
            "old journals deleted: {:?}",
            list_journals(&FsStorage, dir.path())
        );
        drop(logs);
        drop(j);
        for d in &runs {
            let p = log::log_path(dir.path(), d.run_id);
            assert_eq!(read_log_file(&p).unwrap().acks, acks);
        }
    }

    #[test]
    fn a_deleted_log_does_not_stop_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let runs = [sample_descriptor(41), sample_descriptor(42)];
        let opts = JournalOptions {
            rotate_bytes: 4096,
            ..JournalOptions::default()
        };
        let (j, mut logs) = logs_with_journal(dir.path(), opts, &runs);
        logs[0].append_acks(0, &[ack(0)]).unwrap();
        logs[0].commit().unwrap();
        std::fs::remove_file(log::log_path(dir.path(), runs[0].run_id)).unwrap();
        // The first rotation hands the deleted log's run to a checkpoint; the second
        // needs the file that checkpoint prepares, so generation 3 means it got through.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut acks = Vec::new();
        while j.generation() < 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "checkpoint never finished"
            );
            let first = logs[1].appended_acks();
            let batch: Vec<Ack> = (first..first + 20).map(ack).collect();
            logs[1].append_acks(first, &batch).unwrap();
            logs[1].commit().expect("the other run keeps committing");
            acks.extend(batch);
        }
        drop(logs);
        drop(j);
        let p = log::log_path(dir.path(), runs[1].run_id);
        assert_eq!(read_log_file(&p).unwrap().acks, acks);
    }

    /// Issue 11, defect 1, for the journal: a bad entry with valid entries after it is
    /// corruption. Replay refuses with every file as it was (the journal is not deleted,
    /// no log is written), and reading a log through the journal names the damage.
    #[test]
    fn journal_corruption_is_not_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(32);
        let (j, mut logs) = logs_with_journal(
            dir.path(),
            JournalOptions::default(),
            std::slice::from_ref(&d),
        );
        let created = logs[0].durable_len_bytes();
        let mut ends = vec![];
        for c in 0..3u64 {
            let acks: Vec<Ack> = (c * 5..c * 5 + 5).map(ack).collect();
            logs[0].append_acks(c * 5, &acks).unwrap();
            logs[0].commit().unwrap();
        }
        let generation = j.generation();
        drop(logs);
        drop(j);
        let jp = journal_path(dir.path(), generation);
        let full = std::fs::read(&jp).unwrap();
        let mut at = 0;
        while let frame::Decoded::Frame(f) = frame::decode(&full[at..]) {
            at += f.len_bytes;
            ends.push(at);
        }
        assert_eq!(ends.len(), 4, "header and three entries");
        let lp = log::log_path(dir.path(), d.run_id);
        lose_unsynced_appends(&lp, created);
        let log_before = std::fs::read(&lp).unwrap();
        // Every byte of the first two entries (the third is the tail).
        for pos in ends[0]..ends[2] {
            let mut bytes = full.clone();
            bytes[pos] ^= 1 << (pos % 8);
            std::fs::write(&jp, &bytes).unwrap();
            let e = replay(&FsStorage, dir.path())
                .err()
                .map(|e| format!("{e:#}"));
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("damaged") && e.contains("byte")),
                "flip at {pos}: {e:?}"
            );
            assert!(
                std::fs::read(&jp).unwrap() == bytes,
                "flip at {pos}: journal changed"
            );
            assert!(
                std::fs::read(&lp).unwrap() == log_before,
                "flip at {pos}: log changed"
            );
            let r = read_log_file(&lp).unwrap();
            assert!(
                r.events.iter().any(|e| e.kind == log::DAMAGE_EVENT),
                "flip at {pos}: reading through the journal names the damage"
            );
        }
    }

    #[test]
    fn torn_journal_tail_is_ignored_and_foreign_journal_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(31);
        let (j, mut logs) = logs_with_journal(
            dir.path(),
            JournalOptions::default(),
            std::slice::from_ref(&d),
        );
        let created = logs[0].durable_len_bytes();
        logs[0].append_acks(0, &[ack(0), ack(1)]).unwrap();
        logs[0].commit().unwrap();
        logs[0].append_acks(2, &[ack(2)]).unwrap();
        logs[0].commit().unwrap();
        let generation = j.generation();
        drop(logs);
        drop(j);
        let jp = journal_path(dir.path(), generation);
        let full = std::fs::read(&jp).unwrap();
        // Cut into the last entry: only the first commit survives.
        std::fs::write(&jp, &full[..full.len() - 3]).unwrap();
        let p = log::log_path(dir.path(), d.run_id);
        lose_unsynced_appends(&p, created);
        replay(&FsStorage, dir.path()).unwrap();
        assert_eq!(read_log_file(&p).unwrap().acks, vec![ack(0), ack(1)]);

        // A file with a journal's name but not a journal's content stops the start.
        let foreign = journal_path(dir.path(), 7);
        std::fs::write(&foreign, b"someone's notes").unwrap();
        let e = format!("{:#}", replay(&FsStorage, dir.path()).unwrap_err());
        assert!(e.contains("move it out of the witness directory"), "{e}");
        assert_eq!(std::fs::read(&foreign).unwrap(), b"someone's notes");
        // Other names are not ours and are left alone.
        std::fs::remove_file(&foreign).unwrap();
        std::fs::write(dir.path().join("notes.journal"), b"x").unwrap();
        assert_eq!(replay(&FsStorage, dir.path()).unwrap(), Replayed::default());
    }
}
