//! The witness directory's lock: one witness per directory.
//!
//! Why: two witnesses appending to one directory's logs and journal would corrupt both;
//! a `flock` on `witness.lock` makes the second one refuse to start and say why.

use anyhow::Context;
use std::path::Path;

/// Takes the witness directory's lock file, or says which witness holds it.
pub(super) fn lock_dir(dir: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let path = dir.join("witness.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        anyhow::anyhow!(
            "another plugpull witness is using {} ({e}); stop it, or give this one its own \
             --dir",
            dir.display()
        )
    })
}
