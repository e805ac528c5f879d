//! The write target before the first record: every check that needs no change to the
//! target (safety rules, a region of whole sectors that fits, free space), then creating
//! or growing a file target. Why split from the run: the campaign agent prepares targets
//! the same way without a witness first ([`open_target`]), and the checks must all come
//! before anything is created so a refused run leaves nothing behind.

use crate::device::open::{self, Flags, Opened, Target};
use crate::device::safety::{self, SafetyError};
use crate::device::{
    Device, DeviceError, FileDevice, FlushMethod, OpenOptions, PreparedFile, geometry, identity,
    marker, prepare_target_file,
};
use crate::record::SECTOR;
use crate::units::fmt_bytes;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

const DEFAULT_FILE_REGION: u64 = 1 << 30;

/// A target that must not or cannot be written as asked.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(transparent)]
    Unsafe(#[from] SafetyError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("--offset {offset} is not a multiple of {sector} bytes")]
    OffsetNotSector { offset: u64, sector: u64 },
    #[error("--offset is past the end of the device")]
    OffsetPastEnd,
    #[error(
        "the region ({region_bytes} bytes at offset {offset}) does not fit on {} ({device_bytes} bytes): use a smaller --size",
        .target.display()
    )]
    RegionDoesNotFit {
        region_bytes: u64,
        offset: u64,
        target: PathBuf,
        device_bytes: u64,
    },
    #[error(
        "--size {region_bytes} is not a usable region: it must be whole {sector}-byte sectors \
         and hold at least one record (e.g. --size 64M)"
    )]
    RegionUnusable { region_bytes: u64, sector: u64 },
    #[error("checking free space in {}", .dir.display())]
    FreeSpaceUnknown {
        dir: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error(
        "{} needs {} more ({} in all) but {} has only {} free: use a smaller --size or another file system",
        .path.display(),
        fmt_bytes(*.need_bytes),
        fmt_bytes(*.file_bytes),
        .dir.display(),
        fmt_bytes(*.free_bytes)
    )]
    NoSpace {
        path: PathBuf,
        need_bytes: u64,
        file_bytes: u64,
        dir: PathBuf,
        free_bytes: u64,
    },
}

/// A write target that passed every check that needs no change to it; nothing has been
/// created or written yet. An existing target is held open from the checks on: that
/// handle is the one [`TargetPlan::prepare`] hands over for writing.
#[derive(Debug)]
pub struct TargetPlan {
    /// The path opened (symlinks resolved once), or where the file will be created.
    pub path: PathBuf,
    /// The checked handle; None for a file still to be created.
    handle: Option<Target>,
    flags: Flags,
    flush: FlushMethod,
    pub is_block: bool,
    pub offset: u64,
    /// Bytes of the run's region, from `offset`.
    pub region_bytes: u64,
    /// The device's logical block size (512 for a file).
    pub logical_block_bytes: u32,
}

/// Every check that can be made before touching the target: the safety rules on the
/// target opened once with `opts`' flags (kept open in the plan), a region of whole
/// sectors that fits the device, free space for a file to be created or grown. The
/// region's default is the rest of a block device, an existing file's size past `offset`,
/// or 1 GiB for a new file.
pub fn plan_target(
    target: &Path,
    destroy: Option<&Path>,
    offset: u64,
    size: Option<u64>,
    opts: OpenOptions,
) -> Result<TargetPlan, TargetError> {
    let flags = Flags {
        direct: opts.direct,
        dsync: opts.flush == FlushMethod::Dsync,
    };
    let (path, handle) = match safety::open_checked(target, flags, destroy, offset)? {
        Opened::Existing(t) => (t.path.clone(), Some(t)),
        Opened::Missing(p) => (p, None),
    };
    let is_block = handle.as_ref().is_some_and(|t| t.is_block);
    let sector = SECTOR as u64;
    if offset % sector != 0 {
        return Err(TargetError::OffsetNotSector { offset, sector });
    }
    let (region_bytes, logical_block_bytes) = match &handle {
        Some(t) if t.is_block => {
            let g = geometry::block_geometry(&t.file).map_err(DeviceError::from)?;
            let avail = g
                .size_bytes
                .checked_sub(offset)
                .ok_or(TargetError::OffsetPastEnd)?;
            let region = size.unwrap_or(avail / sector * sector);
            if region > avail {
                return Err(TargetError::RegionDoesNotFit {
                    region_bytes: region,
                    offset,
                    target: path,
                    device_bytes: g.size_bytes,
                });
            }
            (region, g.logical_sector_bytes)
        }
        _ => {
            let existing = existing_len(&handle);
            let region = size.unwrap_or(if existing > offset {
                existing - offset
            } else {
                DEFAULT_FILE_REGION
            });
            (region, 512)
        }
    };
    if region_bytes < sector || region_bytes % sector != 0 {
        return Err(TargetError::RegionUnusable {
            region_bytes,
            sector,
        });
    }
    let plan = TargetPlan {
        path,
        handle,
        flags,
        flush: opts.flush,
        is_block,
        offset,
        region_bytes,
        logical_block_bytes,
    };
    if !is_block {
        plan.check_free_space()?;
    }
    Ok(plan)
}

impl TargetPlan {
    /// Bytes the target file must have.
    fn file_bytes(&self) -> u64 {
        self.offset + self.region_bytes
    }

    /// Refuses a file the file system has no room to create or grow (statvfs), so
    /// preallocation does not run out of space half-way.
    fn check_free_space(&self) -> Result<(), TargetError> {
        let existing = existing_len(&self.handle);
        let need = self.file_bytes().saturating_sub(existing);
        if need == 0 {
            return Ok(());
        }
        let dir = parent_dir(&self.path);
        let st =
            nix::sys::statvfs::statvfs(dir).map_err(|source| TargetError::FreeSpaceUnknown {
                dir: dir.to_owned(),
                source,
            })?;
        let free = st.blocks_available() as u64 * st.fragment_size() as u64;
        if need > free {
            return Err(TargetError::NoSpace {
                path: self.path.clone(),
                need_bytes: need,
                file_bytes: self.file_bytes(),
                dir: dir.to_owned(),
                free_bytes: free,
            });
        }
        Ok(())
    }

    /// The identity of the target as it will be once prepared: that of the existing file
    /// or device, or, for a file still to be created, that of its directory's file system
    /// with the file's path and size (so the witness can be asked before anything exists).
    pub fn identity(&self) -> identity::DeviceIdentity {
        // Read by the resolved path the handle was opened from: a description for the
        // witness, not a check (the checks ran on the handle).
        if self.handle.is_some() {
            let mut id = identity::identify(&self.path);
            if !self.is_block {
                id.size_bytes = id.size_bytes.max(self.file_bytes());
            }
            return id;
        }
        let dir = parent_dir(&self.path);
        let mut id = identity::identify(dir);
        let canonical_dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        id.target = match self.path.file_name() {
            Some(n) => canonical_dir.join(n).display().to_string(),
            None => self.path.display().to_string(),
        };
        id.kind = "file".into();
        id.size_bytes = self.file_bytes();
        // The directory's inode is not the file's, and the file has none yet: a file this
        // run creates is named by its canonical path (identity::Medium::Path), which
        // verify matches against the file's own identity later.
        id.file = None;
        id
    }

    /// Creates (O_EXCL: refusing whatever appeared at the name since the checks) or grows
    /// a file target (marked as plugpull's, zero-filled, durable) and hands over the
    /// checked handle for writing, checking the region fits. For a file created here, the
    /// returned [`PreparedFile`] removes it again when dropped unless kept; any error here
    /// removes it too. `stop` (Ctrl-C) interrupts preallocation.
    pub fn prepare(
        &mut self,
        stop: &AtomicBool,
    ) -> Result<(FileDevice, Option<PreparedFile>), TargetError> {
        let t = match self.handle.take() {
            Some(t) => t,
            None => open::create_new(&self.path, self.flags)?,
        };
        let file = if self.is_block {
            None
        } else {
            Some(prepare_target_file(
                &t,
                self.file_bytes(),
                Some((marker::Creator::Write, self.offset)),
                stop,
            )?)
        };
        let dev = FileDevice::from_target(t, self.flush)?;
        if self.file_bytes() > dev.size_bytes() {
            return Err(TargetError::RegionDoesNotFit {
                region_bytes: self.region_bytes,
                offset: self.offset,
                target: self.path.clone(),
                device_bytes: dev.size_bytes(),
            });
        }
        Ok((dev, file))
    }
}

/// Bytes of the checked file (0 for one still to be created).
fn existing_len(handle: &Option<Target>) -> u64 {
    handle
        .as_ref()
        .and_then(|t| t.file.metadata().ok())
        .map_or(0, |m| m.len())
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Everything before the first write, for callers that need no witness first (the
/// campaign agent): [`plan_target`], then [`TargetPlan::prepare`], keeping the file.
/// Returns the device and the region's size.
pub fn open_target(
    target: &Path,
    destroy: Option<&Path>,
    offset: u64,
    size: Option<u64>,
    opts: OpenOptions,
) -> Result<(FileDevice, u64), TargetError> {
    let mut plan = plan_target(target, destroy, offset, size, opts)?;
    let (dev, file) = plan.prepare(&AtomicBool::new(false))?;
    if let Some(f) = file {
        f.keep();
    }
    Ok((dev, plan.region_bytes))
}
