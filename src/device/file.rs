//! The real device: a regular file or a block device, opened with O_DIRECT by default.

use super::error::{DeviceError, Doing};
use super::geometry::{Geometry, block_geometry};
use super::interface::Device;
use super::marker::Creator;
use super::open::{self, Flags, Opened, Target, direct_hint};
use crate::record::SECTOR;
use std::fs::{File, OpenOptions as StdOpen};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// How the writer makes a record durable before acknowledging it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushMethod {
    /// fdatasync(2) after each write: data plus the metadata needed to read it back.
    Fdatasync,
    /// fsync(2) after each write.
    Fsync,
    /// Open with O_DSYNC: every write returns only once durable (FUA or write+flush).
    Dsync,
    /// No flush at all: a control run that is expected to lose data at a cut.
    None,
}

impl FlushMethod {
    /// Every method, in the order the command line lists them.
    pub const ALL: [FlushMethod; 4] = [
        FlushMethod::Fdatasync,
        FlushMethod::Fsync,
        FlushMethod::Dsync,
        FlushMethod::None,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FlushMethod::Fdatasync => "fdatasync",
            FlushMethod::Fsync => "fsync",
            FlushMethod::Dsync => "dsync",
            FlushMethod::None => "none",
        }
    }
}

impl std::fmt::Display for FlushMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A flush method name that is none of [`FlushMethod::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown flush method '{0}' (expected fdatasync, fsync, dsync or none)")]
pub struct UnknownFlushMethod(pub String);

impl std::str::FromStr for FlushMethod {
    type Err = UnknownFlushMethod;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FlushMethod::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownFlushMethod(s.to_string()))
    }
}

#[derive(Clone, Copy, Debug)]
pub struct OpenOptions {
    pub direct: bool,
    pub flush: FlushMethod,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            direct: true,
            flush: FlushMethod::Fdatasync,
        }
    }
}

/// A file or block device opened for plugpull's I/O.
pub struct FileDevice {
    file: File,
    path: PathBuf,
    size_bytes: u64,
    logical_block_bytes: u32,
    flush: FlushMethod,
    is_block: bool,
    geometry: Option<Geometry>,
}

/// True if `path` is a block device.
pub fn is_block_device(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false)
}

impl FileDevice {
    /// The device over a target opened by [`super::open::open_once`] or
    /// [`super::open::create_new`] and checked: its handle, kept to the end. A regular
    /// file must already have its final size (see [`prepare_target_file`]).
    pub fn from_target(t: Target, flush: FlushMethod) -> Result<FileDevice, DeviceError> {
        if !t.writable_kind {
            return Err(DeviceError::NotFileOrBlock(t.path));
        }
        Self::from_file(t.file, &t.path, flush)
    }

    /// Opens for reading only, bypassing the page cache: O_DIRECT, and cached pages of the
    /// file dropped first, so nothing a previous process left in memory is mistaken for
    /// what the drive kept.
    pub fn open_read(path: &Path) -> Result<FileDevice, DeviceError> {
        let file = StdOpen::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| direct_hint(e, true))
            .doing(|| format!("opening {} for reading", path.display()))?;
        // SAFETY: fd is valid; POSIX_FADV_DONTNEED over the whole file only drops clean
        // cached pages, it never changes the file.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        Self::from_file(file, path, FlushMethod::None)
    }

    fn from_file(file: File, path: &Path, flush: FlushMethod) -> Result<FileDevice, DeviceError> {
        let meta = file.metadata()?;
        let is_block = meta.file_type().is_block_device();
        let (size_bytes, lbs, geometry) = if is_block {
            let g = block_geometry(&file)
                .doing(|| format!("reading the geometry of {}", path.display()))?;
            (g.size_bytes, g.logical_sector_bytes, Some(g))
        } else if meta.is_file() {
            (meta.len(), 512, None)
        } else {
            return Err(DeviceError::NotFileOrBlock(path.to_owned()));
        };
        Ok(FileDevice {
            file,
            path: path.to_owned(),
            size_bytes,
            logical_block_bytes: lbs,
            flush,
            is_block,
            geometry,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn is_block(&self) -> bool {
        self.is_block
    }
    pub fn geometry(&self) -> Option<Geometry> {
        self.geometry
    }
    pub fn flush_method(&self) -> FlushMethod {
        self.flush
    }
}

/// The open handle, for I/O the [`Device`] trait does not express (io_uring, several
/// writes in flight: `write --iodepth`).
impl std::os::fd::AsFd for FileDevice {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Device for FileDevice {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    fn logical_block_bytes(&self) -> u32 {
        self.logical_block_bytes
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        match self.flush {
            FlushMethod::Fdatasync => self.file.sync_data(),
            FlushMethod::Fsync => self.file.sync_all(),
            FlushMethod::Dsync | FlushMethod::None => Ok(()),
        }
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}

/// A regular-file target made ready by [`prepare_target_file`]. If plugpull created the
/// file in this attempt, dropping this removes it again unless [`PreparedFile::keep`] was
/// called first: a run that fails before its first record must not leave a file behind
/// (the retry would have to ask what it is). A file that existed before is never removed.
pub struct PreparedFile {
    path: PathBuf,
    /// A handle on the file, so removal can check the name is still this file's.
    file: File,
    created: bool,
    keep: bool,
}

impl PreparedFile {
    /// Whether this attempt created the file.
    pub fn created(&self) -> bool {
        self.created
    }
    /// Keeps the file from now on (call it before the first record is written).
    pub fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for PreparedFile {
    fn drop(&mut self) {
        if !self.created || self.keep {
            return;
        }
        // The name may have been given to something else since: never remove that.
        if !open::still_names(&self.path, &self.file) {
            eprintln!(
                "plugpull: warning: not removing {}: it no longer names the file this attempt created",
                self.path.display()
            );
            return;
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => eprintln!(
                "plugpull: removed {}, which this attempt created and never wrote a record to",
                self.path.display()
            ),
            Err(e) => eprintln!(
                "plugpull: warning: could not remove {} (created by this attempt, no record written): {e}",
                self.path.display()
            ),
        }
    }
}

/// Grows a regular-file target, opened once as `t`, to `size` bytes and makes that durable
/// before any record is acknowledged: the file is filled with zeros (so later writes
/// overwrite allocated, written blocks and fdatasync has no allocation to commit) and then
/// the file and its directory are fsync'd. Otherwise a cut could lose the file system's
/// allocation and we would blame the drive. The writes go through a buffered handle
/// reopened from `t`'s (the same inode), whatever flags `t` was opened with.
///
/// A file `t`'s open created (`O_EXCL`, so it is known to be ours) first gets the target
/// marker of `marker` (creator, offset) and is fsync'd, before the long zero-fill: if the
/// process dies while filling, the file left behind is recognised as plugpull's. `stop`
/// is checked between 1 MiB chunks (Ctrl-C): preparation then fails, and like any other
/// failure removes the file if it was created here.
pub fn prepare_target_file(
    t: &Target,
    size: u64,
    marker: Option<(Creator, u64)>,
    stop: &AtomicBool,
) -> Result<PreparedFile, DeviceError> {
    let path = &t.path;
    let created = t.created;
    let prepared = PreparedFile {
        path: path.to_owned(),
        file: t.file.try_clone()?,
        created,
        keep: false,
    };
    let file = open::reopen(&t.file, Flags::BUFFERED, true)
        .doing(|| format!("opening {}", path.display()))?;
    let have = file.metadata()?.len();
    let mut zeros = vec![(have, size)];
    if let Some((creator, at)) = marker.filter(|&(_, at)| created && at + SECTOR as u64 <= size) {
        file.write_all_at(&super::marker::encode(creator, at), at)
            .and_then(|()| file.sync_all())
            .doing(|| format!("marking {} as a plugpull target", path.display()))?;
        sync_dir(path)?;
        zeros = vec![(0, at), (at + SECTOR as u64, size)];
    }
    for (from, to) in zeros {
        fill_zeros(&file, from, to, stop)
            .doing(|| format!("preallocating {} ({size} bytes)", path.display()))?;
    }
    file.sync_all()
        .doing(|| format!("fsync {}", path.display()))?;
    sync_dir(path)?;
    Ok(prepared)
}

/// Creates (or opens, if it exists) the regular file `path` and makes it `size` bytes,
/// zero-filled and durable, without a marker: a data file for tests and tools, not a
/// checked target.
pub fn prepare_file(path: &Path, size: u64) -> Result<(), DeviceError> {
    let t = match open::open_once(path, Flags::BUFFERED)? {
        Opened::Existing(t) => t,
        Opened::Missing(p) => open::create_new(&p, Flags::BUFFERED)?,
    };
    if !t.writable_kind || t.is_block {
        return Err(DeviceError::NotFileOrBlock(t.path));
    }
    prepare_target_file(&t, size, None, &AtomicBool::new(false)).map(PreparedFile::keep)
}

/// Writes zeros over `[from, to)` in 1 MiB chunks, stopping with an error of kind
/// `Interrupted` if `stop` is set.
fn fill_zeros(file: &File, from: u64, to: u64, stop: &AtomicBool) -> io::Result<()> {
    let chunk = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        if stop.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let n = chunk.len().min((to - at) as usize);
        file.write_all_at(&chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

fn sync_dir(path: &Path) -> Result<(), DeviceError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(File::open(dir)
        .and_then(|d| d.sync_all())
        .doing(|| format!("fsync directory {}", dir.display()))?)
}
