//! The durable ack log: one append-only file of frames per run, `<run id hex>.acklog`.
//!
//! ```text
//! FileHeader(magic "PPACKLOG", version) | Descriptor(JSON) | { Acks | Event }*
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
//! `plugpull fetch -o FILE` writes this same format, so `verify --acks` reads either with
//! [`read_log_file`].

use super::frame::{self, Decoded, FrameType};
use super::journal::{self, Journal};
use super::msg::{self, LOG_VERSION, Msg};
use super::storage::{self, FileReader, FsStorage, Storage, StorageFile};
use super::{Ack, RunDescriptor, RunLog, WitnessEvent};
use crate::record::RunId;
use anyhow::{Context, bail};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File name extension of ack logs in the witness directory.
pub const LOG_EXTENSION: &str = "acklog";
/// Acks per frame when the witness or fetch writes a whole run at once.
pub const FILE_ACKS_PER_FRAME: usize = 4096;

/// Where the log of `run` lives in the witness directory.
pub fn log_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.{LOG_EXTENSION}", run.hex()))
}

/// How a scan of frames ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanEnd {
    /// Bytes of complete, valid frames from the start.
    pub valid_len_bytes: u64,
    /// Why the scan stopped before the end of the input (torn or damaged tail), if it did.
    pub tail: Option<String>,
}

/// Reads frames from `r`, calling `each` for every valid one, until EOF or the first
/// torn or damaged frame. A torn or damaged frame is not an error (it is the expected
/// result of a crash mid-append) and is reported in [`ScanEnd::tail`]; an error from
/// `each` (a valid frame whose content makes no sense here) is.
pub fn scan_frames<R: Read>(
    mut r: R,
    mut each: impl FnMut(&frame::Frame<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<ScanEnd> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    let mut end = ScanEnd::default();
    loop {
        buf.clear();
        buf.resize(frame::LEN_BYTES, 0);
        let got = read_full(&mut r, &mut buf[..])?;
        if got == 0 {
            return Ok(end);
        }
        if got < frame::LEN_BYTES {
            end.tail = Some(format!("torn frame: {got} bytes of a length prefix"));
            return Ok(end);
        }
        let len = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
        // Check the length before sizing the buffer by it.
        if len > frame::MAX_FRAME_BYTES || len == 0 {
            if let Decoded::Error(e) = frame::decode(&buf) {
                end.tail = Some(e.to_string());
            }
            return Ok(end);
        }
        let total = frame::LEN_BYTES + len + frame::CRC_BYTES;
        buf.resize(total, 0);
        let got = read_full(&mut r, &mut buf[frame::LEN_BYTES..])?;
        if got < total - frame::LEN_BYTES {
            end.tail = Some(format!(
                "torn frame: {} of {total} bytes present",
                got + frame::LEN_BYTES
            ));
            return Ok(end);
        }
        match frame::decode(&buf) {
            Decoded::Frame(f) => {
                each(&f).with_context(|| format!("frame at byte {}", end.valid_len_bytes))?;
                end.valid_len_bytes += total as u64;
            }
            Decoded::Error(e) => {
                end.tail = Some(e.to_string());
                return Ok(end);
            }
            Decoded::NeedMore { .. } => unreachable!("whole frame buffered"),
        }
    }
}

/// Like `read_exact`, but returns how many bytes arrived before EOF.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Checks the order of frames in a log (header, descriptor, then contiguous acks and
/// events) and hands out what they hold. Shared by recovery, read_log_file and fetch.
#[derive(Default)]
pub struct LogChecker {
    pub descriptor: Option<RunDescriptor>,
    pub acks: u64,
    frames: u64,
    seen_header: bool,
}

/// One checked item of a log.
pub enum LogItem<'a> {
    Header,
    Descriptor(&'a RunDescriptor),
    Acks { first: u64, acks: &'a [Ack] },
    Event(WitnessEvent),
}

impl LogChecker {
    /// Checks one frame. `scratch` is reused to decode ack batches without allocating.
    pub fn check<'s>(
        &'s mut self,
        f: &frame::Frame<'_>,
        scratch: &'s mut Vec<Ack>,
    ) -> anyhow::Result<LogItem<'s>> {
        self.frames += 1;
        if f.mac.is_some() {
            bail!(
                "ack log frame {} carries a MAC: log files hold checked frames without MACs \
                 (is this a capture of the wire?)",
                self.frames
            );
        }
        match (self.frames, f.ty) {
            (1, FrameType::FileHeader) => match Msg::decode(f)? {
                Msg::FileHeader { version } if version == LOG_VERSION => {
                    self.seen_header = true;
                    Ok(LogItem::Header)
                }
                Msg::FileHeader { version } => bail!(
                    "ack log format version {version} is not supported (this build reads \
                     version {LOG_VERSION}); use the plugpull version that wrote it"
                ),
                _ => unreachable!(),
            },
            (1, _) => bail!("not a plugpull ack log: the first frame is not a log header"),
            (2, FrameType::Descriptor) => match Msg::decode(f)? {
                Msg::Descriptor(d) => Ok(LogItem::Descriptor(self.descriptor.insert(d))),
                _ => unreachable!(),
            },
            (2, t) => bail!("ack log: second frame is {t:?}, expected the run descriptor"),
            (_, FrameType::Acks) => {
                scratch.clear();
                let first = msg::decode_acks_into(f.payload, scratch)?;
                if first != self.acks {
                    bail!(
                        "ack log is inconsistent: a batch starts at ack {first} but {} acks \
                         precede it (the file was edited or damaged)",
                        self.acks
                    );
                }
                self.acks += scratch.len() as u64;
                Ok(LogItem::Acks {
                    first,
                    acks: scratch,
                })
            }
            (_, FrameType::Event) => match Msg::decode(f)? {
                Msg::Event(e) => Ok(LogItem::Event(e)),
                _ => unreachable!(),
            },
            (_, t) => bail!("ack log holds a {t:?} frame, which belongs only on the wire"),
        }
    }
}

/// Reads a whole log (a witness log or `plugpull fetch` output) without modifying it.
/// A torn tail is tolerated: the complete frames before it are returned.
///
/// A log inside a witness directory is read together with the directory's journal
/// (module `journal`): after the witness's machine lost power, acks it confirmed may sit
/// only in the journal until `plugpull listen` starts again and replays it.
pub fn read_log_file(path: &Path) -> anyhow::Result<RunLog> {
    read_log_file_from(&FsStorage, path)
}

/// [`read_log_file`] on `storage`.
pub fn read_log_file_from(storage: &dyn Storage, path: &Path) -> anyhow::Result<RunLog> {
    let mut logs = read_log_files_from(storage, &[path])?;
    Ok(logs.pop().expect("one log per path"))
}

/// [`read_log_file`] for several logs, reading each witness directory's journal once.
pub fn read_log_files(paths: &[&Path]) -> anyhow::Result<Vec<RunLog>> {
    read_log_files_from(&FsStorage, paths)
}

/// [`read_log_files`] on `storage`.
pub fn read_log_files_from(storage: &dyn Storage, paths: &[&Path]) -> anyhow::Result<Vec<RunLog>> {
    // Logs named by their run inside a directory with a journal: read whole, overlaid.
    let keys: Vec<Option<(PathBuf, RunId)>> =
        paths.iter().map(|p| in_journaled_dir(storage, p)).collect();
    let mut whole: HashMap<PathBuf, HashMap<RunId, Vec<u8>>> = HashMap::new();
    for (path, key) in paths.iter().zip(&keys) {
        if let Some((dir, run)) = key {
            let bytes = storage::read_all(storage, path)
                .with_context(|| format!("reading ack log {}", path.display()))?;
            whole.entry(dir.clone()).or_default().insert(*run, bytes);
        }
    }
    for (dir, logs) in &mut whole {
        journal::overlay(storage, dir, logs)?;
    }
    paths
        .iter()
        .zip(&keys)
        .map(|(path, key)| match key {
            Some((dir, run)) => read_log_bytes(path, &whole[dir][run][..]),
            None => {
                let f = storage
                    .open_read(path)
                    .with_context(|| format!("opening ack log {}", path.display()))?;
                let r = FileReader::new(&*f);
                read_log_bytes(path, io::BufReader::with_capacity(256 << 10, r))
            }
        })
        .collect()
}

/// The directory and run of a log named `<run id>.acklog` in a directory with a journal.
fn in_journaled_dir(storage: &dyn Storage, path: &Path) -> Option<(PathBuf, RunId)> {
    let run = RunId::parse(path.file_stem()?.to_str()?)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    journal::has_journal(storage, dir).then(|| (dir.to_path_buf(), run))
}

fn read_log_bytes(path: &Path, r: impl Read) -> anyhow::Result<RunLog> {
    let mut checker = LogChecker::default();
    let mut scratch = Vec::new();
    let mut acks = Vec::new();
    let mut events = Vec::new();
    scan_frames(r, |fr| {
        match checker.check(fr, &mut scratch)? {
            LogItem::Acks { acks: a, .. } => acks.extend_from_slice(a),
            LogItem::Event(e) => events.push(e),
            LogItem::Header | LogItem::Descriptor(_) => {}
        }
        Ok(())
    })
    .with_context(|| format!("reading ack log {}", path.display()))?;
    let Some(descriptor) = checker.descriptor else {
        bail!(
            "{} holds no complete run descriptor: not a plugpull ack log, or the witness \
             was killed while creating it",
            path.display()
        );
    };
    Ok(RunLog {
        descriptor,
        acks,
        events,
    })
}

/// Writes `log` as a log file (what `plugpull fetch -o` produces) and fsyncs it. Written
/// to a temporary name and renamed, so a crash never leaves a half file under `path`.
pub fn write_log_file(path: &Path, log: &RunLog) -> anyhow::Result<()> {
    let mut buf = Vec::with_capacity(1 << 20);
    Msg::FileHeader {
        version: LOG_VERSION,
    }
    .encode_into(&mut buf);
    Msg::Descriptor(log.descriptor.clone()).encode_into(&mut buf);
    let tmp = path.with_extension("acklog.tmp");
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut first = 0u64;
    for chunk in log.acks.chunks(FILE_ACKS_PER_FRAME) {
        msg::encode_acks_into(&mut buf, first, chunk.iter());
        first += chunk.len() as u64;
        if buf.len() >= 1 << 20 {
            f.write_all(&buf)?;
            buf.clear();
        }
    }
    for e in &log.events {
        Msg::Event(e.clone()).encode_into(&mut buf);
    }
    f.write_all(&buf)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

pub(crate) fn sync_dir(storage: &dyn Storage, dir: &Path) -> anyhow::Result<()> {
    storage
        .sync_dir(dir)
        .with_context(|| format!("fsync of directory {}", dir.display()))
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
    journal: Option<Arc<Journal>>,
    path: PathBuf,
    descriptor: RunDescriptor,
    appended_acks: u64,
    durable_acks: u64,
    durable_len_bytes: u64,
    pending: Vec<u8>,
    /// Set when a write or fdatasync failed: the file's state past `durable_len_bytes`
    /// is unknown, so nothing more may be reported durable from this handle.
    poisoned: Option<String>,
}

impl AckLog {
    /// Creates a new log with header and descriptor, durable (file and directory entry)
    /// before it returns. Fails if the file exists.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        desc: &RunDescriptor,
    ) -> anyhow::Result<AckLog> {
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
            poisoned: None,
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

    /// Opens an existing log for appending: scans it, truncates a torn or damaged tail
    /// (keeping every complete frame before it) and makes the truncation durable.
    pub fn open(storage: &dyn Storage, path: &Path) -> anyhow::Result<(AckLog, Recovery)> {
        let file = storage
            .open(path)
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let file_len = file
            .size()
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let mut checker = LogChecker::default();
        let mut scratch = Vec::new();
        let reader = FileReader::new(&*file);
        let end = scan_frames(io::BufReader::with_capacity(256 << 10, reader), |fr| {
            checker.check(fr, &mut scratch).map(|_| ())
        })
        .with_context(|| format!("recovering ack log {}", path.display()))?;
        let Some(descriptor) = checker.descriptor else {
            bail!(
                "{} holds no complete run descriptor ({} bytes): the witness was killed \
                 while creating it, or it is not an ack log",
                path.display(),
                file_len
            );
        };
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
                poisoned: None,
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
    ) -> anyhow::Result<(AckLog, Option<Recovery>)> {
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
                    bail!(
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
    pub fn with_journal(mut self, journal: Arc<Journal>) -> AckLog {
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
    pub fn append_acks(&mut self, first: u64, acks: &[Ack]) -> anyhow::Result<u64> {
        if first > self.appended_acks {
            bail!(
                "acks {first}.. would leave a gap: the witness has {} acks of this run; \
                 a writer must resend from the Welcome's durable count",
                self.appended_acks
            );
        }
        let skip = (self.appended_acks - first) as usize;
        if skip >= acks.len() {
            return Ok(0);
        }
        let new = &acks[skip..];
        for chunk in new.chunks(msg::MAX_ACKS_PER_FRAME) {
            msg::encode_acks_into(&mut self.pending, self.appended_acks, chunk.iter());
            self.appended_acks += chunk.len() as u64;
        }
        Ok(new.len() as u64)
    }

    pub fn append_event(&mut self, e: &WitnessEvent) {
        Msg::Event(e.clone()).encode_into(&mut self.pending);
    }

    /// Writes everything appended and fdatasyncs once; returns the durable ack count.
    /// Nothing appended is durable unless this returned Ok.
    pub fn commit(&mut self) -> anyhow::Result<u64> {
        if let Some(why) = &self.poisoned {
            bail!("ack log {} failed earlier: {why}", self.path.display());
        }
        if self.pending.is_empty() {
            return Ok(self.durable_acks);
        }
        let start = self.durable_len_bytes;
        let res = self
            .file
            .write_at(&self.pending, start)
            .map_err(anyhow::Error::from)
            .and_then(|()| match &self.journal {
                // The log write above comes first: a checkpoint relies on it.
                Some(j) => j.commit(self.descriptor.run_id, start, &self.pending),
                None => self.file.sync_data().map_err(Into::into),
            });
        if let Err(e) = res {
            let why = format!("{e:#}");
            self.poisoned = Some(why.clone());
            // Best effort: cut what may be a partial frame; recovery on the next open
            // would do the same.
            let _ = self.file.set_len(self.durable_len_bytes);
            bail!(
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
        self.durable_acks = self.appended_acks;
        Ok(self.durable_acks)
    }
}

/// If `path` is a log whose creation was interrupted (a prefix of header + descriptor,
/// nothing else), says why; such a file never held an ack.
fn creation_torn(storage: &dyn Storage, path: &Path) -> anyhow::Result<Option<String>> {
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
    if frames < 2 && header_ok && end.tail.as_deref().is_none_or(|t| t.starts_with("torn")) {
        return Ok(Some(format!(
            "log creation was interrupted ({} frames, {})",
            frames,
            end.tail.as_deref().unwrap_or("empty")
        )));
    }
    Ok(None)
}

/// Reads the descriptor of a log without reading its acks (for the witness's index).
pub fn read_descriptor(storage: &dyn Storage, path: &Path) -> anyhow::Result<RunDescriptor> {
    let f = storage.open_read(path)?;
    let mut checker = LogChecker::default();
    let mut scratch = Vec::new();
    // Stop after the second frame by returning a sentinel error.
    let r = scan_frames(io::BufReader::new(FileReader::new(&*f)), |fr| {
        checker.check(fr, &mut scratch)?;
        if checker.descriptor.is_some() {
            bail!(StopScan);
        }
        Ok(())
    });
    match (r, checker.descriptor) {
        (_, Some(d)) => Ok(d),
        (Err(e), None) => Err(e),
        (Ok(_), None) => bail!("{} holds no complete run descriptor", path.display()),
    }
}

#[derive(Debug)]
struct StopScan;
impl std::fmt::Display for StopScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scan stopped")
    }
}
impl std::error::Error for StopScan {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ack::msg::tests::{ack, sample_descriptor};

    fn event(kind: &str) -> WitnessEvent {
        WitnessEvent {
            at_ns: 1,
            kind: kind.into(),
            peer: "p".into(),
            durable_acks: 0,
            last_ack_at_ns: None,
            detail: String::new(),
        }
    }

    #[test]
    fn append_commit_reopen_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(1);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        let acks: Vec<Ack> = (0..10).map(ack).collect();
        assert_eq!(log.append_acks(0, &acks[..6]).unwrap(), 6);
        log.append_event(&event("connect"));
        assert_eq!(log.durable_acks(), 0, "not durable before commit");
        assert_eq!(log.commit().unwrap(), 6);
        // A resend overlapping what is there adds only the new part.
        assert_eq!(log.append_acks(4, &acks[4..]).unwrap(), 4);
        assert!(log.append_acks(11, &acks[..1]).is_err(), "gap refused");
        assert_eq!(log.commit().unwrap(), 10);
        drop(log);

        let (log, rec) = AckLog::open(&FsStorage, &log_path(dir.path(), d.run_id)).unwrap();
        assert_eq!(rec, Recovery::default());
        assert_eq!(log.durable_acks(), 10);
        let r = read_log_file(&log_path(dir.path(), d.run_id)).unwrap();
        assert_eq!(r.descriptor, d);
        assert_eq!(r.acks, acks);
        assert_eq!(r.events, vec![event("connect")]);
        assert_eq!(read_descriptor(&FsStorage, log.path()).unwrap(), d);
    }

    #[test]
    fn torn_tail_truncated_at_every_cut() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(2);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        let acks: Vec<Ack> = (0..30).map(ack).collect();
        let mut ends = vec![log.durable_len_bytes()];
        for c in acks.chunks(10) {
            let first = log.appended_acks();
            log.append_acks(first, c).unwrap();
            log.commit().unwrap();
            ends.push(log.durable_len_bytes());
        }
        let path = log.path().to_path_buf();
        drop(log);
        let full = std::fs::read(&path).unwrap();
        for cut in ends[0] as usize..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let complete = ends.iter().rposition(|&e| e as usize <= cut).unwrap();
            let keep = ends[complete];
            // read-only reading tolerates the tail and leaves the file alone
            assert_eq!(read_log_file(&path).unwrap().acks.len(), complete * 10);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), cut as u64);
            let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
            assert_eq!(log.durable_acks(), complete as u64 * 10, "cut {cut}");
            assert_eq!(rec.truncated_bytes, cut as u64 - keep);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
        }
    }

    #[test]
    fn garbage_tail_and_bit_flip_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(3);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        log.append_acks(0, &[ack(0), ack(1)]).unwrap();
        log.commit().unwrap();
        let keep = log.durable_len_bytes();
        log.append_acks(2, &[ack(2)]).unwrap();
        log.commit().unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0x40;
        bytes.extend_from_slice(b"garbage garbage");
        std::fs::write(&path, &bytes).unwrap();
        let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
        assert_eq!(log.durable_acks(), 2);
        assert!(rec.reason.unwrap().contains("checksum"));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
    }

    #[test]
    fn interrupted_creation_is_rewritten_but_foreign_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(4);
        let path = log_path(dir.path(), d.run_id);
        let mut header = Vec::new();
        Msg::FileHeader {
            version: LOG_VERSION,
        }
        .encode_into(&mut header);
        let mut desc_frame = Vec::new();
        Msg::Descriptor(d.clone()).encode_into(&mut desc_frame);
        header.extend_from_slice(&desc_frame[..desc_frame.len() - 5]);
        std::fs::write(&path, &header).unwrap();
        let (log, rec) = AckLog::open_or_create(&FsStorage, dir.path(), &d).unwrap();
        assert!(rec.unwrap().reason.unwrap().contains("interrupted"));
        assert_eq!(log.durable_acks(), 0);
        drop(log);

        let other = sample_descriptor(5);
        let p2 = log_path(dir.path(), other.run_id);
        std::fs::write(&p2, b"this is somebody's file, not a log").unwrap();
        assert!(AckLog::open_or_create(&FsStorage, dir.path(), &other).is_err());
        assert_eq!(
            std::fs::read(&p2).unwrap(),
            b"this is somebody's file, not a log"
        );
        // Same run id, different descriptor: refused, file unchanged.
        let before = std::fs::read(&path).unwrap();
        let mut forged = d.clone();
        forged.host = "evil".into();
        assert!(AckLog::open_or_create(&FsStorage, dir.path(), &forged).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn write_log_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let rl = RunLog {
            descriptor: sample_descriptor(6),
            acks: (0..10_000).map(ack).collect(),
            events: vec![event("bye")],
        };
        let p = dir.path().join("out.acklog");
        write_log_file(&p, &rl).unwrap();
        let back = read_log_file(&p).unwrap();
        assert_eq!(back.acks, rl.acks);
        assert_eq!(back.events, rl.events);
        assert_eq!(back.descriptor, rl.descriptor);
    }
}
