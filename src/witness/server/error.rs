//! Why the witness cannot start: its directory, its socket, its key or its logs.

pub(super) use crate::io_step::Doing;
use crate::io_step::IoStep;
use crate::wire::auth::KeyError;
use crate::witness::store::error::StoreError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// I/O on the witness directory or socket; the step says what, on which path.
    #[error(transparent)]
    Io(#[from] IoStep),
    /// An I/O error the OS's own message says all about.
    #[error(transparent)]
    Os(#[from] io::Error),
    #[error(
        "another plugpull witness is using {} ({cause}); stop it, or give this one its own \
         --dir",
        dir.display()
    )]
    DirInUse {
        dir: PathBuf,
        cause: nix::errno::Errno,
    },
    /// The journal cannot be replayed or opened, or a log not read.
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(
        "--max-frame-bytes must be between {min} and {max} (writers send ack frames of up \
         to ~160 KiB)"
    )]
    FrameLimit { min: usize, max: usize },
}
