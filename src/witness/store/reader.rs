//! Reading a run: its log file, with the witness journal overlaid when the log lies in
//! a witness directory, checked frame by frame, damage named, wholeness judged.
//!
//! Why a module of its own: reading depends on both the log format and the journal (after
//! the witness's machine lost power, acks it confirmed may sit only in the journal until
//! `plugpull listen` replays it), while the log and the journal know nothing of each
//! other. Nothing in the store depends back on the reader.

use crate::model::{Ack, RunLog, WitnessEvent};
use crate::record::RunId;
use crate::wire::auth::Key;
use crate::witness::store::checker::{LogChecker, LogItem, Wholeness, damage_event};
use crate::witness::store::error::{Context, StoreResult, invalid};
use crate::witness::store::journal;
use crate::witness::store::journal_replay;
use crate::witness::store::log::is_log_frame;
use crate::witness::store::scan::scan_frames_resync;
use crate::witness::store::storage::{self, FileReader, FsStorage, Storage};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Reads a whole log (a witness log or `plugpull fetch` output) without modifying it.
/// A torn tail is tolerated: the complete frames before it are returned. Damage (bad
/// bytes with valid frames after them) is tolerated too: every valid frame is read, and
/// the damage is named in `checker::DAMAGE_EVENT` events of the returned log.
///
/// A log inside a witness directory is read together with the directory's journal
/// (module `journal`): after the witness's machine lost power, acks it confirmed may sit
/// only in the journal until `plugpull listen` starts again and replays it.
pub fn read_log_file(path: &Path) -> StoreResult<RunLog> {
    read_log_file_from(&FsStorage, path)
}

/// [`read_log_file`] on `storage`.
pub fn read_log_file_from(storage: &dyn Storage, path: &Path) -> StoreResult<RunLog> {
    let mut logs = read_log_files_from(storage, &[path])?;
    Ok(logs.pop().expect("one log per path"))
}

/// [`read_log_file`], also saying whether the file proved it is whole (its end mark,
/// checked with `key` when given).
pub fn read_log_file_checked(path: &Path, key: Option<&Key>) -> StoreResult<(RunLog, Wholeness)> {
    let mut logs = read_log_files_checked(&FsStorage, &[path], key)?;
    Ok(logs.pop().expect("one log per path"))
}

/// [`read_log_file`] for several logs, reading each witness directory's journal once.
pub fn read_log_files(paths: &[&Path]) -> StoreResult<Vec<RunLog>> {
    read_log_files_from(&FsStorage, paths)
}

/// [`read_log_files`] on `storage`.
pub fn read_log_files_from(storage: &dyn Storage, paths: &[&Path]) -> StoreResult<Vec<RunLog>> {
    Ok(read_log_files_checked(storage, paths, None)?
        .into_iter()
        .map(|(l, _)| l)
        .collect())
}

fn read_log_files_checked(
    storage: &dyn Storage,
    paths: &[&Path],
    key: Option<&Key>,
) -> StoreResult<Vec<(RunLog, Wholeness)>> {
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
    let mut journal_damage: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for (dir, logs) in &mut whole {
        journal_damage.insert(dir.clone(), journal_replay::overlay(storage, dir, logs)?);
    }
    paths
        .iter()
        .zip(&keys)
        .map(|(path, dir_run)| {
            let (mut log, wholeness) = match dir_run {
                Some((dir, run)) => read_log_bytes(path, &whole[dir][run][..], key)?,
                None => {
                    let f = storage
                        .open_read(path)
                        .with_context(|| format!("opening ack log {}", path.display()))?;
                    let r = FileReader::new(&*f);
                    read_log_bytes(path, io::BufReader::with_capacity(256 << 10, r), key)?
                }
            };
            if let Some((dir, _)) = dir_run {
                for d in &journal_damage[dir] {
                    log.events.push(damage_event(
                        0,
                        format!("{d}; acks of this run that only the journal held may be missing"),
                    ));
                }
            }
            Ok((log, wholeness))
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

fn read_log_bytes(
    path: &Path,
    r: impl Read,
    key: Option<&Key>,
) -> StoreResult<(RunLog, Wholeness)> {
    let mut acks = Vec::new();
    let (mut log, wholeness) = stream_log_bytes(path, r, key, &mut |a| acks.extend_from_slice(a))?;
    log.acks = acks;
    Ok((log, wholeness))
}

/// For a log in a witness directory with a journal (not [`streamable`]): copies its
/// bytes to `out` with the journal overlaid, as [`read_log_file`] reads it, so it can be
/// streamed from there; returns the journal's damage, as events to add to the log read
/// from the copy. None: `path` is streamable as it is.
pub fn copy_overlaid(path: &Path, out: &Path) -> StoreResult<Option<Vec<WitnessEvent>>> {
    let Some((dir, run)) = in_journaled_dir(&FsStorage, path) else {
        return Ok(None);
    };
    let copy = || -> io::Result<(std::fs::File, u64)> {
        let mut from = std::fs::File::open(path)?;
        // A new file, never one planted at the name (a link is not followed).
        use std::os::unix::fs::OpenOptionsExt;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(out)?;
        let len = io::copy(&mut from, &mut to)?;
        Ok((to, len))
    };
    let (file, len) = copy().with_context(|| format!("copying ack log {}", path.display()))?;
    let damage = journal_replay::overlay_file(&FsStorage, &dir, run, &file, len)?;
    Ok(Some(
        damage
            .into_iter()
            .map(|d| {
                damage_event(
                    0,
                    format!("{d}; acks of this run that only the journal held may be missing"),
                )
            })
            .collect(),
    ))
}

/// Whether [`stream_log_file`] can read `path`: not a log in a witness directory with a
/// journal (those are read whole, with the journal overlaid).
pub fn streamable(path: &Path) -> bool {
    in_journaled_dir(&FsStorage, path).is_none()
}

/// [`read_log_file_checked`] without holding the acks: each frame's acks go to `sink`
/// in order, and the returned log has none. Why: verify at scale reads a 100 M-ack log
/// twice rather than keep 5 GB of acks (`verify::scale`). Only for a [`streamable`] path.
pub fn stream_log_file(
    path: &Path,
    key: Option<&Key>,
    sink: &mut dyn FnMut(&[Ack]),
) -> StoreResult<(RunLog, Wholeness)> {
    let f = FsStorage
        .open_read(path)
        .with_context(|| format!("opening ack log {}", path.display()))?;
    let r = FileReader::new(&*f);
    stream_log_bytes(path, io::BufReader::with_capacity(1 << 20, r), key, sink)
}

fn stream_log_bytes(
    path: &Path,
    r: impl Read,
    key: Option<&Key>,
    sink: &mut dyn FnMut(&[Ack]),
) -> StoreResult<(RunLog, Wholeness)> {
    let mut checker = LogChecker::with_key(key);
    let mut scratch = Vec::new();
    let mut events = Vec::new();
    // File names by the index of their ack in the order `sink` receives them.
    let (mut files, mut taken) = (BTreeMap::new(), 0usize);
    let end = scan_frames_resync(r, is_log_frame, |fr, damage| {
        if let Some(d) = damage {
            checker.note_damage(d);
        }
        match checker.check(fr, &mut scratch)? {
            LogItem::Acks { acks: a, names, .. } => {
                files.extend((taken..).zip(names.iter().cloned()));
                taken += a.len();
                sink(a)
            }
            LogItem::Event(e) => events.push(e),
            LogItem::Header | LogItem::Descriptor(_) | LogItem::EndMark => {}
        }
        Ok(())
    })
    .with_context(|| format!("reading ack log {}", path.display()))?;
    let Some(descriptor) = checker.descriptor.clone() else {
        invalid!(
            "{} holds no complete run descriptor: not a plugpull ack log, or the witness \
             was killed while creating it",
            path.display()
        );
    };
    events.extend(checker.damage_events(&format!("ack log {}", path.display()), &end));
    let wholeness = checker.wholeness(&end);
    Ok((
        RunLog {
            descriptor,
            acks: Vec::new(),
            events,
            files,
        },
        wholeness,
    ))
}
