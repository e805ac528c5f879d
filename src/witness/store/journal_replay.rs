//! Bringing the witness journal back into the run logs: [`replay`] at the witness's
//! start, and [`overlay`] for a reader that must see acks only the journal holds.
//!
//! Why apart from `journal`: this is the one place that writes journal entries into
//! logs, so it depends on the journal's format and on where logs live; the journal
//! itself (writing, syncing, checkpointing) does not need either direction.

use crate::record::RunId;
use crate::witness::store::error::{Context, StoreResult, invalid};
use crate::witness::store::journal::{list_journals, read_journal};
use crate::witness::store::layout::{log_path, sync_dir};
use crate::witness::store::storage::Storage;
use crate::witness::store::storage::StorageFile;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

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
pub fn replay(storage: &dyn Storage, dir: &Path) -> StoreResult<Replayed> {
    let journals = list_journals(storage, dir)?;
    let mut out = Replayed {
        journals: journals.len(),
        ..Replayed::default()
    };
    // Check every journal before writing anything: a damaged one stops the start with
    // every file as it was.
    for (_, path) in &journals {
        if let Some(d) = read_journal(storage, path, |_, _, _| Ok(()))?.first() {
            invalid!(
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
                let f = storage.open(&log_path(dir, run)).ok()?;
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
                    log_path(dir, run).display()
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
                .with_context(|| format!("fdatasync of {}", log_path(dir, *run).display()))?;
            out.runs += 1;
        }
    }
    for (_, path) in &journals {
        storage
            .remove(path)
            .with_context(|| format!("removing {}", path.display()))?;
    }
    if !journals.is_empty() {
        sync_dir(storage, dir)?;
    }
    Ok(out)
}

/// [`overlay`] of one run's log held in a file (`log`, `len` bytes long) rather than in
/// memory: a copy a reader made, never the witness's own log. Why: a 100 M-ack log read
/// whole is gigabytes; verify streams from the copy instead (`reader::copy_overlaid`).
pub fn overlay_file(
    storage: &dyn Storage,
    dir: &Path,
    run: RunId,
    log: &std::fs::File,
    mut len: u64,
) -> StoreResult<Vec<String>> {
    use std::os::unix::fs::FileExt;
    let mut damage = vec![];
    for (_, path) in list_journals(storage, dir)? {
        let found = read_journal(storage, &path, |r, offset, data| {
            // As `overlay`: one past the end could only follow a hole.
            if r != run || offset > len {
                return Ok(());
            }
            log.write_all_at(data, offset)
                .with_context(|| "writing the copy of an ack log".to_string())?;
            len = len.max(offset + data.len() as u64);
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
) -> StoreResult<Vec<String>> {
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
