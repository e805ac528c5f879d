//! How much memory verify may hold, and where it puts what does not fit: the user's
//! `--memory` and `--work-dir`, apart from the engine that keeps to them (`partition`)
//! so that the options need not know the engine.

use std::path::PathBuf;

/// The memory verify may hold, and where it puts what does not fit.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Peak resident memory to stay under, in bytes.
    pub memory_bytes: u64,
    /// Where work files go (None: the system's temporary directory, `TMPDIR`).
    pub work_dir: Option<PathBuf>,
}

/// The default budget: 512 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            work_dir: None,
        }
    }
}

impl Budget {
    pub fn work_dir(&self) -> PathBuf {
        self.work_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}
