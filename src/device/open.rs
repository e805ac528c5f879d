//! The one place a write target is opened by name. Why once: a path checked and then
//! opened again is a different file or device whenever the name changes in between (a
//! symlink put in its place, a loop number re-attached to another image, a /dev name
//! given to another disk during a slow witness handshake). So the name is resolved once,
//! opened once, every safety check runs on that handle, and that handle is written to
//! the end. Any other handle on the target (buffered for preparing a file, other open
//! flags for bench) is reopened from the first one through `/proc/self/fd`, which is
//! the same inode whatever the name now says, and is checked to be.

use super::error::{DeviceError, Doing};
use crate::io_step::IoStep;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The open flags the writes need: O_DIRECT, O_DSYNC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub direct: bool,
    pub dsync: bool,
}

impl Flags {
    /// Through the page cache, no O_DSYNC: for reading checks and preparing a file.
    pub const BUFFERED: Flags = Flags {
        direct: false,
        dsync: false,
    };

    fn bits(self) -> i32 {
        let mut f = libc::O_CLOEXEC;
        if self.direct {
            f |= libc::O_DIRECT;
        }
        if self.dsync {
            f |= libc::O_DSYNC;
        }
        f
    }
}

/// A target opened once: the handle every check and every write uses.
#[derive(Debug)]
pub struct Target {
    /// Open for reading and writing with the run's flags; for something that is neither a
    /// regular file nor a block device, an O_PATH handle (nothing opened, only looked at).
    pub file: File,
    /// The path that was opened: symlinks resolved, once.
    pub path: PathBuf,
    pub is_block: bool,
    /// A regular file or a block device (and so opened for writing).
    pub writable_kind: bool,
    /// Created by this open (O_CREAT|O_EXCL).
    pub created: bool,
}

/// What the name led to.
#[derive(Debug)]
pub enum Opened {
    Existing(Target),
    /// Nothing there: the path a file would be created at (its directory resolved).
    Missing(PathBuf),
}

/// Resolves `given` once (a /dev/disk/by-id link becomes the device node) and opens what
/// it names without following a link again (O_NOFOLLOW). A regular file or block device
/// is opened for reading and writing with `flags`; anything else only with O_PATH so
/// opening it has no side effect (a tape rewinding, a terminal).
pub fn open_once(given: &Path, flags: Flags) -> Result<Opened, DeviceError> {
    let resolved = match std::fs::canonicalize(given) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Opened::Missing(new_path(given)));
        }
        Err(e) => Err(e).doing(|| format!("resolving {}", given.display()))?,
    };
    let located = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&resolved)
        .doing(|| format!("opening {}", resolved.display()))?;
    let meta = located.metadata()?;
    let is_block = meta.file_type().is_block_device();
    if !is_block && !meta.is_file() {
        return Ok(Opened::Existing(Target {
            file: located,
            path: resolved,
            is_block: false,
            writable_kind: false,
            created: false,
        }));
    }
    let file = reopen(&located, flags, true)
        .map_err(|e| direct_hint(e, flags.direct))
        .doing(|| format!("opening {} for writing", resolved.display()))?;
    Ok(Opened::Existing(Target {
        file,
        path: resolved,
        is_block,
        writable_kind: true,
        created: false,
    }))
}

/// Creates the file `path` (as [`Opened::Missing`] gave it) with O_CREAT|O_EXCL|O_NOFOLLOW:
/// if anything appeared at that name since it was found missing, this fails instead of
/// writing to it. It is created through the page cache and then reopened from its own
/// handle with `flags`: a file system without O_DIRECT creates the file before refusing
/// the flag, and the file this call made must not be left behind to block a retry.
pub fn create_new(path: &Path, flags: Flags) -> Result<Target, DeviceError> {
    let created = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                DeviceError::Appeared(path.to_owned())
            } else {
                DeviceError::Io(IoStep {
                    doing: format!("creating {}", path.display()),
                    source: e,
                })
            }
        })?;
    let file = match flags {
        Flags::BUFFERED => created,
        _ => match reopen(&created, flags, true) {
            Ok(f) => f,
            Err(e) => {
                if still_names(path, &created) {
                    let _ = std::fs::remove_file(path);
                }
                Err(direct_hint(e, flags.direct))
                    .doing(|| format!("opening {} for writing", path.display()))?
            }
        },
    };
    Ok(Target {
        file,
        path: path.to_owned(),
        is_block: false,
        writable_kind: true,
        created: true,
    })
}

/// Another handle on the same inode as `file` (by `/proc/self/fd`, not by name), with
/// `flags`, for writing too if `write`. Fails if what opened is not that inode.
pub fn reopen(file: &File, flags: Flags, write: bool) -> io::Result<File> {
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    let f = OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(flags.bits())
        .open(&proc)?;
    let (a, b) = (file.metadata()?, f.metadata()?);
    if (a.dev(), a.ino(), a.rdev()) != (b.dev(), b.ino(), b.rdev()) {
        return Err(io::Error::other(format!(
            "{proc} did not reopen the same file (is /proc mounted?)"
        )));
    }
    Ok(f)
}

/// Whether `path` still names the inode of `file` (without following a link): before a
/// file plugpull created is removed by name again.
pub fn still_names(path: &Path, file: &File) -> bool {
    match (std::fs::symlink_metadata(path), file.metadata()) {
        (Ok(p), Ok(f)) => p.dev() == f.dev() && p.ino() == f.ino(),
        _ => false,
    }
}

/// A missing `given` as the path it would be created at: its directory resolved (if it
/// exists), its own name kept.
fn new_path(given: &Path) -> PathBuf {
    let dir = given
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match (std::fs::canonicalize(dir), given.file_name()) {
        (Ok(d), Some(n)) => d.join(n),
        _ => given.to_owned(),
    }
}

/// EINVAL on an O_DIRECT open: the file system does not do direct I/O; say what to do.
pub(crate) fn direct_hint(e: io::Error, direct: bool) -> io::Error {
    if direct && e.raw_os_error() == Some(libc::EINVAL) {
        io::Error::new(
            e.kind(),
            format!(
                "{e}; this file system does not support O_DIRECT (pass --no-direct to write through the page cache, or use another file system)"
            ),
        )
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_given_symlink_is_resolved_once_and_a_dangling_one_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real.img");
        std::fs::write(&real, [0u8; 512]).unwrap();
        let link = d.path().join("by-id");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        match open_once(&link, Flags::BUFFERED).unwrap() {
            Opened::Existing(t) => {
                assert_eq!(t.path, std::fs::canonicalize(&real).unwrap());
                assert!(still_names(&t.path, &t.file) && !still_names(&link, &t.file));
            }
            Opened::Missing(p) => panic!("{} missing", p.display()),
        }
        // A dangling link is missing, and creating the file refuses to go through it.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("elsewhere"), &dangling).unwrap();
        let Opened::Missing(p) = open_once(&dangling, Flags::BUFFERED).unwrap() else {
            panic!("a dangling link opened");
        };
        assert!(matches!(
            create_new(&p, Flags::BUFFERED),
            Err(DeviceError::Appeared(_))
        ));
        assert!(!d.path().join("elsewhere").exists());
    }
}
