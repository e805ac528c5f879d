//! The witness directory: which file is what, and making its names durable.
//!
//! Why a module of its own: the log (one file per run), the journal (which checkpoints
//! those files) and the reader (which finds a log's journal) all name files in the same
//! directory. Keeping the names here lets each of them stay ignorant of the others.

use crate::record::RunId;
use crate::witness::store::error::{Context, StoreResult};
use crate::witness::store::storage::Storage;
use std::path::{Path, PathBuf};

/// File name extension of ack logs in the witness directory.
pub const LOG_EXTENSION: &str = "acklog";
/// File name extension of journal files in the witness directory.
pub const JOURNAL_EXTENSION: &str = "journal";

/// Where the log of `run` lives in the witness directory.
pub fn log_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.{LOG_EXTENSION}", run.hex()))
}

/// Where generation `generation` of the journal lives.
pub fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("{generation:016x}.{JOURNAL_EXTENSION}"))
}

/// Makes the names created, removed or renamed in `dir` durable.
pub(crate) fn sync_dir(storage: &dyn Storage, dir: &Path) -> StoreResult<()> {
    storage
        .sync_dir(dir)
        .with_context(|| format!("fsync of directory {}", dir.display()))
}
