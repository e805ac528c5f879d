//! The parts' one pass over the acks and their work directory's space: each ack written
//! to the work files of the parts it touches (`Plan::parts_of`), stopping before anything
//! is read from the target when the work directory runs short.

use super::plan::{FREE_MARGIN_BYTES, Plan};
use super::workfile::{Segment, TempFile, Writer};
use crate::model::RunDescriptor;
use crate::verify::VerifyError;
use crate::verify::scale::{AckPasses, Painted};
use std::path::Path;
use std::sync::Arc;

/// What the one pass over the acks leaves.
pub(super) struct Spilled {
    /// The run's checks (`scale::Painted` without a map).
    pub painted: Painted,
    /// Per part, its work file and the acks' segment in it.
    pub files: Vec<Arc<std::fs::File>>,
    pub segments: Vec<Segment>,
    /// Per part, the furthest end of an ack it owns.
    pub ends: Vec<u64>,
    /// The lowest offset and the highest end of any ack (None: no acks): the whole run's
    /// records span, which its live records span too (every acknowledged byte is its
    /// latest ack's).
    pub records: Option<(u64, u64)>,
}

/// The one pass over the acks: the run's checks (`scale::Painted` without a map), and
/// each ack written to its parts' work files (`Plan::parts_of`). Stops, before anything
/// is read from the target, when the work directory runs short of space.
pub(super) fn spill_acks(
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    plan: &Plan,
    dir: &Path,
) -> Result<Spilled, VerifyError> {
    let work_dir_err = |e| VerifyError::WorkDir {
        dir: dir.to_path_buf(),
        source: e,
    };
    check_room(dir)?;
    let mut writers = Vec::with_capacity(plan.parts as usize);
    for _ in 0..plan.parts {
        writers.push(Writer::new(TempFile::new_in(dir).map_err(work_dir_err)?));
    }
    let mut painted = Painted::new(d, None);
    let mut ends = vec![0u64; plan.parts as usize];
    let mut records: Option<(u64, u64)> = None;
    let mut idx = 0u64;
    let mut failed: Option<VerifyError> = None;
    let mut checked_at = 0u64;
    acks.pass(&mut |chunk| {
        if failed.is_some() {
            return;
        }
        painted.add_chunk(chunk);
        for a in chunk {
            let (s, e) = (a.record.offset, a.record.end());
            records = Some(records.map_or((s, e), |(lo, hi)| (lo.min(s), hi.max(e))));
            let own = &mut ends[plan.part_of(a.record.offset) as usize];
            *own = (*own).max(a.record.end());
            for k in plan.parts_of(a.record.offset, a.record.end()) {
                if let Err(e) = writers[k as usize].push(idx, a, None) {
                    failed = Some(spill_error(e, dir));
                    return;
                }
            }
            idx += 1;
        }
        let written: u64 = writers.iter().map(|w| w.bytes()).sum();
        if written >= checked_at + (64 << 20) {
            checked_at = written;
            match free_bytes(dir) {
                Ok(f) if f < FREE_MARGIN_BYTES => failed = Some(full(dir, f, written)),
                Ok(_) => {}
                Err(e) => failed = Some(work_dir_err(e)),
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    let mut files = vec![];
    let mut segments = vec![];
    for w in writers {
        let (f, s) = w.finish().map_err(|e| spill_error(e, dir))?;
        files.push(f);
        segments.push(s);
    }
    Ok(Spilled {
        painted,
        files,
        segments,
        ends,
        records,
    })
}

/// Refuses a work directory with less than [`FREE_MARGIN_BYTES`] free.
pub(super) fn check_room(dir: &Path) -> Result<(), VerifyError> {
    let free = free_bytes(dir).map_err(|e| VerifyError::WorkDir {
        dir: dir.to_path_buf(),
        source: e,
    })?;
    match free < FREE_MARGIN_BYTES {
        true => Err(full(dir, free, 0)),
        false => Ok(()),
    }
}

fn full(dir: &Path, free: u64, written: u64) -> VerifyError {
    VerifyError::WorkDirFull {
        dir: dir.to_path_buf(),
        free,
        written,
        margin: FREE_MARGIN_BYTES,
        before_reading: true,
    }
}

/// A work file that could not be written before the target is read: a full disk
/// said as such.
fn spill_error(e: std::io::Error, dir: &Path) -> VerifyError {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        return full(dir, free_bytes(dir).unwrap_or(0), 0);
    }
    VerifyError::WorkDir {
        dir: dir.to_path_buf(),
        source: e,
    }
}

/// [`spill_error`] for the failed records, spilled while the target is read.
pub(super) fn failure_spill_error(e: std::io::Error, dir: &Path) -> VerifyError {
    match spill_error(e, dir) {
        VerifyError::WorkDirFull {
            dir,
            free,
            written,
            margin,
            ..
        } => VerifyError::WorkDirFull {
            dir,
            free,
            written,
            margin,
            before_reading: false,
        },
        e => e,
    }
}

/// Bytes an unprivileged writer may still use in `dir`'s file system.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}
