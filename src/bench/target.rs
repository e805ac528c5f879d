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
use crate::device::open::{self, Flags, Opened, Target};
use crate::device::safety::{SafetyError, open_checked, ram_warning};
use crate::device::{Device, DeviceError, FileDevice, FlushMethod, geometry, prepare_target_file};
use std::fs::{self, File};
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
    /// The file or block device bench opened (symlinks resolved).
    pub path: PathBuf,
    /// The handle opened once and checked; every device bench measures is reopened from
    /// it ([`BenchTarget::opener`]), never from the name.
    handle: File,
    /// The user gave a directory; `path` is bench's own file in it.
    pub is_dir: bool,
    pub is_block: bool,
    /// Bytes available for bench data from [`REGION_OFFSET_BYTES`].
    pub region_bytes: u64,
    remove_on_drop: bool,
}

impl Drop for BenchTarget {
    fn drop(&mut self) {
        // The name may have been given to something else since: never remove that.
        if self.remove_on_drop && open::still_names(&self.path, &self.handle) {
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
    let unsafe_target = |source| BenchTargetError::Unsafe {
        path: path.clone(),
        source,
    };
    let t = match open_checked(&path, Flags::BUFFERED, destroy, 0).map_err(unsafe_target)? {
        Opened::Existing(t) => t,
        Opened::Missing(p) => open::create_new(&p, Flags::BUFFERED)?,
    };
    if let Some(w) = ram_warning(&t.path) {
        eprintln!("plugpull bench: WARNING: {w}");
    }
    let (region_bytes, created) = if t.is_block {
        let g = geometry::block_geometry(&t.file)
            .doing(|| format!("reading the geometry of {}", t.path.display()))
            .map_err(DeviceError::from)?;
        let avail = g.size_bytes.saturating_sub(REGION_OFFSET_BYTES);
        if avail == 0 {
            return Err(BenchTargetError::TooSmall(t.path));
        }
        (size.min(avail), None)
    } else {
        // Ctrl-C stops the zero-fill; a file created here is then removed again.
        let f = prepare_target_file(
            &t,
            REGION_OFFSET_BYTES + size,
            Some((Creator::Bench, 0)),
            &super::measure::STOP,
        )?;
        (size, Some(f))
    };
    stamp(&t)?;
    // From here bench's own cleanup (a directory's file) or the user owns the file.
    if let Some(f) = created {
        f.keep();
    }
    drop_cached_pages(&t.file);
    Ok(BenchTarget {
        path: t.path,
        handle: t.file,
        is_dir,
        is_block: t.is_block,
        region_bytes,
        remove_on_drop: is_dir,
    })
}

impl BenchTarget {
    /// Opens the devices bench measures, with O_DIRECT if `direct`.
    pub fn opener(&self, direct: bool) -> Result<FileOpener, DeviceError> {
        Ok(FileOpener {
            file: self.handle.try_clone()?,
            path: self.path.clone(),
            is_block: self.is_block,
            direct,
        })
    }
}

/// Drops the page-cache copy of the target (left by preallocation and stamping): an
/// O_DIRECT write over cached pages makes the kernel invalidate them on every write, a
/// cost fio's figures for the same pattern do not include.
fn drop_cached_pages(f: &File) {
    // SAFETY: the fd is valid for the call; POSIX_FADV_DONTNEED only drops clean cached
    // pages (everything was synced above) and never changes the file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Writes the target marker into the first sector and makes it durable.
fn stamp(t: &Target) -> Result<(), DeviceError> {
    let path = &t.path;
    let f = open::reopen(&t.file, Flags::BUFFERED, true)
        .doing(|| format!("opening {} to stamp it", path.display()))?;
    Ok(f.write_all_at(&marker::encode(Creator::Bench, 0), 0)
        .and_then(|()| f.sync_data())
        .doing(|| format!("stamping {}", path.display()))?)
}

/// Opens the target for a given flush method. Bench needs several opens (O_DSYNC is an
/// open flag), so it takes an opener rather than one device.
pub trait TargetOpener {
    fn open(&self, flush: FlushMethod) -> Result<Box<dyn Device>, DeviceError>;
}

/// Opens a prepared file or block device once per flush method: from bench's checked
/// handle (the same inode), with that method's open flags.
pub struct FileOpener {
    file: File,
    path: PathBuf,
    is_block: bool,
    direct: bool,
}

impl TargetOpener for FileOpener {
    fn open(&self, flush: FlushMethod) -> Result<Box<dyn Device>, DeviceError> {
        let flags = Flags {
            direct: self.direct,
            dsync: flush == FlushMethod::Dsync,
        };
        let file = open::reopen(&self.file, flags, true)
            .map_err(|e| open::direct_hint(e, self.direct))
            .doing(|| format!("opening {} for writing", self.path.display()))?;
        let t = Target {
            file,
            path: self.path.clone(),
            is_block: self.is_block,
            writable_kind: true,
            created: false,
        };
        Ok(Box::new(FileDevice::from_target(t, flush)?))
    }
}
