//! Why the witness cannot start: its directory, its socket, its key or its logs.

use crate::wire::auth::KeyError;
use crate::witness::store::error::StoreError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    /// I/O on the witness directory or socket; `doing` says what, on which path.
    #[error("{doing}")]
    Io {
        doing: String,
        #[source]
        source: io::Error,
    },
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

/// Names what an I/O error struck, keeping the error typed.
pub(super) trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, WitnessError>;
}

impl<T> Doing<T> for io::Result<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, WitnessError> {
        self.map_err(|source| WitnessError::Io {
            doing: what(),
            source,
        })
    }
}
