//! Where bench writes, and the refusals before it does. Bench overwrites what it measures,
//! so a block device goes through the same checks as `plugpull write`
//! (`safety::check_write_target`, `--destroy-data-on`); a directory gets bench's own file,
//! removed afterwards; a file path is created, or reused only if it is a plugpull target.
//!
//! Every target gets the target marker (`device::marker`, creator "bench") in its first
//! sector and bench data only from [`REGION_OFFSET_BYTES`] on, so a later `bench` or
//! `write` recognises it as plugpull's and does not ask for `--destroy-data-on` again
//! (on a block device, unless a file-system signature from before is still there). A
//! file bench creates gets the marker before the long zero-fill, and is removed again if
//! preparing it fails. A target in RAM (tmpfs, a RAM disk) gets a loud warning: bench
//! would measure memory, not a drive.

use crate::device::error::Doing;
use crate::device::marker::{self, Creator};
use crate::device::safety::{SafetyError, check_write_target, ram_warning};
use crate::device::{
    Device, DeviceError, FileDevice, FlushMethod, OpenOptions, is_block_device, prepare_target_file,
};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The file bench creates in a directory target (and removes when done).
pub const BENCH_FILE_NAME: &str = "plugpull-bench.tmp";
/// Where bench data starts: past the stamp, and a multiple of the largest sweep size so
/// every size-aligned offset is aligned on the device too.
pub const REGION_OFFSET_BYTES: u64 = 8 << 20;

/// A target bench must not or cannot write to.
#[derive(Debug, thiserror::Error)]
pub enum BenchTargetError {
    #[error("--size must be more than 0")]
    ZeroSize,
    #[error("checking {} before bench writes to it", .path.display())]
    Unsafe {
        path: PathBuf,
        #[source]
        source: SafetyError,
    },
    #[error("{} is too small for bench (needs more than {} bytes)", .0.display(), REGION_OFFSET_BYTES)]
    TooSmall(PathBuf),
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A prepared target.
#[derive(Debug)]
pub struct BenchTarget {
    /// The file or block device bench opens.
    pub path: PathBuf,
    /// The user gave a directory; `path` is bench's own file in it.
    pub is_dir: bool,
    pub is_block: bool,
    /// Bytes available for bench data from [`REGION_OFFSET_BYTES`].
    pub region_bytes: u64,
    remove_on_drop: bool,
}

impl Drop for BenchTarget {
    fn drop(&mut self) {
        if self.remove_on_drop {
            if let Err(e) = fs::remove_file(&self.path) {
                eprintln!(
                    "plugpull: warning: could not remove {}: {e}",
                    self.path.display()
                );
            }
        }
    }
}

/// Checks and prepares `target` for a bench over `size` bytes.
pub fn prepare(
    target: &Path,
    size: u64,
    destroy: Option<&Path>,
) -> Result<BenchTarget, BenchTargetError> {
    if size == 0 {
        return Err(BenchTargetError::ZeroSize);
    }
    let is_dir = target.is_dir();
    let path = if is_dir {
        target.join(BENCH_FILE_NAME)
    } else {
        target.to_path_buf()
    };
    check_write_target(&path, destroy, 0).map_err(|source| BenchTargetError::Unsafe {
        path: path.clone(),
        source,
    })?;
    if let Some(w) = ram_warning(&path) {
        eprintln!("plugpull bench: WARNING: {w}");
    }
    let is_block = is_block_device(&path);
    let (region_bytes, created) = if is_block {
        let dev = FileDevice::open_write(&path, OpenOptions::default())?;
        let avail = dev.size_bytes().saturating_sub(REGION_OFFSET_BYTES);
        if avail == 0 {
            return Err(BenchTargetError::TooSmall(path));
        }
        (size.min(avail), None)
    } else {
        // Ctrl-C stops the zero-fill; a file created here is then removed again.
        let f = prepare_target_file(
            &path,
            REGION_OFFSET_BYTES + size,
            Some((Creator::Bench, 0)),
            &super::measure::STOP,
        )?;
        (size, Some(f))
    };
    stamp(&path)?;
    // From here bench's own cleanup (a directory's file) or the user owns the file.
    if let Some(f) = created {
        f.keep();
    }
    let t = BenchTarget {
        path,
        is_dir,
        is_block,
        region_bytes,
        remove_on_drop: is_dir,
    };
    drop_cached_pages(&t.path);
    Ok(t)
}

/// Drops the page-cache copy of the target (left by preallocation and stamping): an
/// O_DIRECT write over cached pages makes the kernel invalidate them on every write, a
/// cost fio's figures for the same pattern do not include.
fn drop_cached_pages(path: &Path) {
    if let Ok(f) = fs::File::open(path) {
        // SAFETY: the fd is valid for the call; POSIX_FADV_DONTNEED only drops clean
        // cached pages (everything was synced above) and never changes the file.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// Writes the target marker into the first sector and makes it durable.
fn stamp(path: &Path) -> Result<(), DeviceError> {
    let f = fs::OpenOptions::new()
        .write(true)
        .open(path)
        .doing(|| format!("opening {} to stamp it", path.display()))?;
    f.write_all_at(&marker::encode(Creator::Bench, 0), 0)
        .and_then(|()| f.sync_data())
        .doing(|| format!("stamping {}", path.display()))
}

/// Opens the target for a given flush method. Bench needs several opens (O_DSYNC is an
/// open flag), so it takes an opener rather than one device.
pub trait TargetOpener {
    fn open(&self, flush: FlushMethod) -> Result<Box<dyn Device>, DeviceError>;
}

/// Opens a prepared file or block device once per flush method.
pub struct FileOpener {
    pub path: PathBuf,
    pub direct: bool,
}

impl TargetOpener for FileOpener {
    fn open(&self, flush: FlushMethod) -> Result<Box<dyn Device>, DeviceError> {
        let dev = FileDevice::open_write(
            &self.path,
            OpenOptions {
                direct: self.direct,
                flush,
            },
        )?;
        Ok(Box::new(dev))
    }
}
