//! The errors of opening and preparing a target. Why a "doing" phrase: the user needs
//! to know which step failed on which path ("opening /dev/sdb for writing") and the
//! operating system's reason beneath it; [`IoStep`] keeps both (shared with the witness,
//! `crate::io_step`), so the command layer prints the same "step: reason" chain.

pub(crate) use crate::io_step::Doing;
use crate::io_step::IoStep;
use std::io;
use std::path::PathBuf;

/// Opening, sizing or preparing a file or block device failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// An I/O call failed while plugpull was doing something ("opening X for writing").
    #[error(transparent)]
    Io(#[from] IoStep),
    /// An I/O call failed where the step needs no naming (the reason says it all).
    #[error(transparent)]
    Bare(#[from] io::Error),
    /// The path is a directory, a socket, a character device...
    #[error("{} is neither a regular file nor a block device", .0.display())]
    NotFileOrBlock(PathBuf),
    /// Something was put at the path between finding it free and creating the file
    /// there: it is not plugpull's to write, whatever it is.
    #[error(
        "{} appeared while plugpull was getting ready (it did not exist when checked); \
         refusing to write to what was put there: check what it is, then run again",
        .0.display()
    )]
    Appeared(PathBuf),
}

/// Errors of a drive that lost power or left the bus, as a writer meets them (a
/// simulated drive's EIO, a SCSI disk's EIO then ENODEV, an NVMe namespace's ENXIO, a
/// FUSE daemon that died with its drive: ENOTCONN, or ECONNABORTED for the requests it
/// had in hand). Anything else (ENOSPC on a thin
/// backing, EINVAL, a quota) is a failure of the write, not evidence of a lost drive.
pub const DRIVE_GONE_ERRNOS: [i32; 7] = [
    libc::EIO,
    libc::ECONNABORTED,
    libc::ENODEV,
    libc::ENXIO,
    libc::ENOTCONN,
    libc::ENOMEDIUM,
    libc::EREMOTEIO,
];
