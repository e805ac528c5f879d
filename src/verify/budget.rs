//! How much memory verify may hold, and where it puts what does not fit: the user's
//! `--memory` and `--work-dir`, apart from the engine that keeps to them (`partition`)
//! so that the options need not know the engine.
//!
//! Also whether a work directory may be used ([`check_work_dir`]), asked before anything
//! is read from the target: it must exist, be a directory, be writable, and not be on
//! the drive under test. Why the last: verify's work files would be written to the drive
//! it is judging, before and while it reads it back; a drive that misplaces writes (what
//! verify looks for) could put them in the region under test.

use crate::device::stack::{self, Node, Via};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The memory verify may hold, and where it puts what does not fit.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Peak resident memory to stay under, in bytes.
    pub memory_bytes: u64,
    /// Where work files go (None: the system's temporary directory, `TMPDIR`).
    pub work_dir: Option<PathBuf>,
}

/// The default budget: 512 MiB.
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            work_dir: None,
        }
    }
}

impl Budget {
    pub fn work_dir(&self) -> PathBuf {
        self.work_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// Why a work directory may not be used.
#[derive(Debug)]
pub enum WorkDirFault {
    Missing,
    NotADirectory,
    /// On the drive under test: what of it the directory's file system is on.
    OnTarget(String),
    /// A work file could not be made there.
    Unwritable(std::io::Error),
}

/// Whether verify may put its work files in `dir` while it judges `target` (module
/// docs). Nothing is written to a directory on the target: the probe, a work file made
/// as the spill makes them (no name, gone when closed), comes after that check.
pub fn check_work_dir(dir: &Path, target: &Path) -> Result<(), WorkDirFault> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(WorkDirFault::Missing),
        Err(e) => return Err(WorkDirFault::Unwritable(e)),
    };
    if !meta.is_dir() {
        return Err(WorkDirFault::NotADirectory);
    }
    if let Some(on) = TargetMedium::of(target).and_then(|t| t.holds_file_system(meta.dev())) {
        return Err(WorkDirFault::OnTarget(on));
    }
    super::partition::workfile::TempFile::new_in(dir)
        .map(drop)
        .map_err(WorkDirFault::Unwritable)
}

/// Where a target's bytes are, as far as a file system's device number can be on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetMedium {
    /// A file target: the device of the file system holding it.
    pub file_system: Option<u64>,
    /// The block devices that share bytes with the target, with how
    /// (`device::stack::related`: the device itself, its partitions, its disk and that
    /// disk's other partitions, what is built on it), and their names.
    pub devices: Vec<(u64, Via, String)>,
}

impl TargetMedium {
    /// The medium of the target at `path`; None when it is neither a block device nor a
    /// file (or is not there: then nothing is written to it).
    pub fn of(path: &Path) -> Option<TargetMedium> {
        let meta = std::fs::metadata(path).ok()?;
        let (node, file_system) = match meta.file_type() {
            t if t.is_block_device() => (Node::Block(meta.rdev()), None),
            t if t.is_file() => (
                Node::File {
                    dev: meta.dev(),
                    ino: meta.ino(),
                },
                Some(meta.dev()),
            ),
            _ => return None,
        };
        let devices = stack::related(node)
            .into_iter()
            .filter_map(|r| match r.node {
                Node::Block(d) => Some((d, r.via, r.name)),
                Node::File { .. } => None,
            })
            .collect();
        Some(TargetMedium {
            file_system,
            devices,
        })
    }

    /// What of the target a file system on device `fs_dev` (a directory's `st_dev`) is
    /// on, in words; None when it is on none of it.
    pub fn holds_file_system(&self, fs_dev: u64) -> Option<String> {
        if self.file_system == Some(fs_dev) {
            return Some("the file system that holds the target file".into());
        }
        let (_, via, name) = self.devices.iter().find(|(d, _, _)| *d == fs_dev)?;
        Some(match via {
            Via::Target => format!("{name}, the target itself"),
            Via::Below => format!("{name}, which the target's bytes are on"),
            Via::Partition => format!("{name}, a partition of the target's disk"),
            Via::Holder => format!("{name}, a device built on the target"),
            Via::Loop => format!("{name}, a loop device over the target"),
            Via::Unknown => format!(
                "{name}, a loop device whose backing file is unknown (it may be the target)"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(major: u32, minor: u32) -> u64 {
        libc::makedev(major, minor)
    }

    /// A disk target: its own file system, a partition's, a device built on it are on
    /// it; another disk's is not.
    #[test]
    fn a_file_system_on_the_target_disk_is_on_the_target() {
        let disk = TargetMedium {
            file_system: None,
            devices: vec![
                (dev(8, 0), Via::Target, "/dev/sda".into()),
                (dev(8, 1), Via::Partition, "/dev/sda1".into()),
                (dev(253, 0), Via::Holder, "/dev/dm-0".into()),
            ],
        };
        let on = |d| disk.holds_file_system(d);
        assert!(on(dev(8, 0)).unwrap().contains("the target itself"));
        assert!(on(dev(8, 1)).unwrap().contains("/dev/sda1, a partition"));
        assert!(on(dev(253, 0)).unwrap().contains("built on the target"));
        assert_eq!(on(dev(8, 16)), None);
    }

    /// A file target: a file system on the same device holds it; another does not.
    #[test]
    fn a_file_targets_own_file_system_is_on_the_target() {
        let file = TargetMedium {
            file_system: Some(dev(254, 0)),
            devices: vec![],
        };
        assert!(
            file.holds_file_system(dev(254, 0))
                .unwrap()
                .contains("holds the target file")
        );
        assert_eq!(file.holds_file_system(dev(254, 1)), None);
    }

    /// The checks on real paths: a directory beside a file target is refused, and
    /// before the probe; a missing one and a file are told apart.
    #[test]
    fn work_dirs_are_checked_against_a_file_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("t.img");
        std::fs::write(&target, b"x").unwrap();
        assert!(matches!(
            check_work_dir(dir.path(), &target),
            Err(WorkDirFault::OnTarget(_))
        ));
        assert!(matches!(
            check_work_dir(&dir.path().join("none"), &target),
            Err(WorkDirFault::Missing)
        ));
        assert!(matches!(
            check_work_dir(&target, &target),
            Err(WorkDirFault::NotADirectory)
        ));
        // A target that is not there holds nothing: the directory is only probed.
        assert!(check_work_dir(dir.path(), &dir.path().join("gone")).is_ok());
    }
}
