//! The witness directory's lock: one witness per directory.
//!
//! Why: two witnesses appending to one directory's logs and journal would corrupt both;
//! a `flock` on `witness.lock` makes the second one refuse to start and say why.

use crate::witness::server::error::{Doing, WitnessError};
use std::path::Path;

/// Takes the witness directory's lock file, or says which witness holds it.
pub(super) fn lock_dir(dir: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, WitnessError> {
    let path = dir.join("witness.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .doing(|| format!("creating {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, cause)| {
        WitnessError::DirInUse {
            dir: dir.to_path_buf(),
            cause,
        }
    })
}
