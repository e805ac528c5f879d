//! The whole-stack mode: files and directories through a file system
//! (docs/tree.md).
//!
//! Why a mode of its own: a drive is rarely the whole story. A file survives a power cut
//! only if the file system keeps its data, its inode, its directory entry and the rename
//! that put it in place, and the drive keeps all of that. The untar test (many small
//! files, each durable before it is acknowledged) exercises that whole stack. `plan`
//! says what to create, from one seed; `write` creates it and acknowledges each durable
//! file; `verify` reads it back and says, file by file, what survived.
//!
//! A file's content is stamped records like every other target (src/record/): one record
//! per file version, stream [`FILE_STREAM`], seq = the file's id in the plan, offset 0
//! (offsets are within the file). Its ack is a file entry (FileAcks): an ordinary ack
//! entry with those fields plus the file's path and the temporary name it was renamed
//! from. Which version a file replaces comes from the plan, which verify regenerates from
//! the run descriptor's `tree` settings and checks the names against (`names`); logs
//! from before file entries carry no names, and the plan alone says where files are.

pub mod budget;
pub mod names;
pub mod plan;
mod uncached;
pub mod verify;
mod verify_run;
pub mod write;

pub use verify_run::{TreeError, TreeVerified, for_a_tree, verify_dir};

use crate::record::SECTOR;

/// The stream number of every file record and file ack.
pub const FILE_STREAM: u16 = 0;
/// The plan generator's version; a change to `plan` that changes any plan must bump it
/// (pinned by a test), since verify regenerates the plan of old runs.
pub const PLAN_VERSION: u16 = 1;
/// Largest file a plan holds, in bytes: the acks' region is [0, this).
pub const MAX_FILE_BYTES: u64 = plan::LARGE_SECTORS_MAX as u64 * SECTOR as u64;

/// How a tree run makes a file durable before acknowledging it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeFlush {
    /// fsync(2) the file, then its directory (and a new directory's parent), as POSIX
    /// requires for a new name to be durable. The default.
    Fsync,
    /// fdatasync(2) the file, fsync(2) its directory.
    Fdatasync,
    /// The file opened with O_DSYNC, then fsync(2) of its directory.
    Dsync,
    /// Nothing: a control run expected to lose files at a cut.
    None,
    /// fsync(2) the file but never its directory: simulates a stack that loses
    /// directory entries, so tests can show verify names the files missing. Testing
    /// only: hidden from --help.
    TestingOnlySkipDirFsync,
}

impl TreeFlush {
    pub fn name(self) -> &'static str {
        match self {
            TreeFlush::Fsync => "fsync",
            TreeFlush::Fdatasync => "fdatasync",
            TreeFlush::Dsync => "dsync",
            TreeFlush::None => "none",
            TreeFlush::TestingOnlySkipDirFsync => "testing-only-skip-dir-fsync",
        }
    }
    /// Whether directories are fsynced after a new name appears in them.
    pub fn syncs_dirs(self) -> bool {
        matches!(
            self,
            TreeFlush::Fsync | TreeFlush::Fdatasync | TreeFlush::Dsync
        )
    }
}
