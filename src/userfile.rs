//! Files the user names that are not write targets: pages, state files and sidecars
//! plugpull writes, and small inputs (key files, reports) it reads.
//!
//! Why one place: a name is only a name. `-o /dev/sdb` or `-o link.html` pointing at
//! someone's file must not be written through, and `--key-file /dev/zero` must not be
//! read until memory runs out. So an output is written to a new temporary file beside it
//! (a random name, O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never through a
//! link) and renamed over the name, and only a name that is missing or a regular file is
//! replaced. rename(2) replaces the name itself, so even a device node or link put there
//! after the check is unlinked, never written through. Inputs are opened, checked to be
//! regular files on that handle, and read only up to a bound.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a user's file was not written or read.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error(
        "refusing to write {}: it is a symbolic link, and plugpull does not write through \
         links; give the path of the file itself, or remove the link",
        .0.display()
    )]
    Symlink(PathBuf),
    #[error("refusing to {doing} {}: it is {kind}, not a regular file", path.display())]
    NotRegular {
        path: PathBuf,
        doing: &'static str,
        kind: &'static str,
    },
    #[error("refusing to read {}: it is over {max} bytes, too big for {what}", path.display())]
    TooBig {
        path: PathBuf,
        max: u64,
        what: &'static str,
    },
    #[error("{doing}")]
    Io {
        doing: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(doing: impl FnOnce() -> String) -> impl FnOnce(io::Error) -> UserFileError {
    move |source| UserFileError::Io {
        doing: doing(),
        source,
    }
}

/// What a file type is, for a refusal.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a pipe"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Fails unless `path` is missing or a regular file (not followed if a link).
pub fn check_replaceable(path: &Path) -> Result<(), UserFileError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(|| format!("looking at {}", path.display()))(e)),
        Ok(m) if m.file_type().is_symlink() => Err(UserFileError::Symlink(path.to_owned())),
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(UserFileError::NotRegular {
            path: path.to_owned(),
            doing: "write",
            kind: kind(m.file_type()),
        }),
    }
}

/// Writes `bytes` as the file `path`: a new temporary file beside it with permissions
/// `mode` (less the umask), fsynced, renamed over `path`, the directory fsynced. After
/// a crash `path` is the old file or the new one, never a torn one. `path` must be
/// missing or a regular file.
pub fn replace(path: &Path, bytes: &[u8], mode: u32) -> Result<(), UserFileError> {
    check_replaceable(path)?;
    let (mut tmp, mut f) = TempFile::beside(path, mode)?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(io_err(|| format!("writing {}", tmp.path.display())))?;
    drop(f);
    tmp.rename_to(path)
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A temporary file this process created, removed on drop unless renamed into place.
///
/// Why so careful: outputs are written in directories other people can write (/tmp, a
/// shared lab share). A fixed name beside the output let anyone plant a file there
/// (deleted by the cleanup) or a symlink (followed: its target overwritten). So the
/// name is random and the file is created with O_CREAT|O_EXCL|O_NOFOLLOW: whatever
/// exists is never opened, followed or removed.
pub struct TempFile {
    path: PathBuf,
    /// Device and inode of the file created, so the cleanup removes only that one.
    id: (u64, u64),
    done: bool,
}

impl TempFile {
    /// Creates `.NAME.<random>.tmp` in `path`'s directory with permissions `mode`. A
    /// name taken by chance (or planted) is skipped, never opened.
    pub fn beside(path: &Path, mode: u32) -> Result<(TempFile, File), UserFileError> {
        let Some(name) = path.file_name() else {
            return Err(UserFileError::NotRegular {
                path: path.to_owned(),
                doing: "write",
                kind: "not a file name",
            });
        };
        let dir = dir_of(path);
        let mut last = None;
        for _ in 0..16 {
            let mut r = [0u8; 12];
            crate::rng::fill_os_random(&mut r);
            let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
            let tmp = dir.join(format!(".{}.{hex}.tmp", name.to_string_lossy()));
            match TempFile::create_new(tmp, mode)? {
                Ok(made) => return Ok(made),
                Err(taken) => last = Some(taken),
            }
        }
        Err(io_err(|| {
            format!("creating a temporary file in {}", dir.display())
        })(
            last.unwrap_or_else(|| io::Error::other("no free name"))
        ))
    }

    /// Creates exactly `tmp` (a name the caller made unique, and knows so as to remove
    /// it itself where no `Drop` runs: a Ctrl-C handler) with permissions `mode`, as
    /// [`TempFile::beside`] does its random name; an error if anything is there.
    pub fn at(tmp: &Path, mode: u32) -> Result<(TempFile, File), UserFileError> {
        TempFile::create_new(tmp.to_path_buf(), mode)?
            .map_err(io_err(|| format!("creating {}", tmp.display())))
    }

    /// Creates `tmp` with O_CREAT|O_EXCL|O_NOFOLLOW; `Ok(Err(_))` when the name is taken.
    fn create_new(
        tmp: PathBuf,
        mode: u32,
    ) -> Result<Result<(TempFile, File), io::Error>, UserFileError> {
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp);
        let f = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Err(e)),
            Err(e) => return Err(io_err(|| format!("creating {}", tmp.display()))(e)),
        };
        let m = f
            .metadata()
            .map_err(io_err(|| format!("creating {}", tmp.display())))?;
        if !m.is_file() || m.nlink() != 1 {
            return Err(UserFileError::NotRegular {
                path: tmp,
                doing: "write",
                kind: "not the new file it was created as",
            });
        }
        let t = TempFile {
            path: tmp,
            id: (m.dev(), m.ino()),
            done: false,
        };
        Ok(Ok((t, f)))
    }

    /// Where the file is now.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the (written and synced) file over `path`, which must be missing or a
    /// regular file (checked right before: what is refused is what is there now), and
    /// fsyncs the directory. After a crash `path` is the old file or the new one.
    pub fn rename_to(&mut self, path: &Path) -> Result<(), UserFileError> {
        check_replaceable(path)?;
        std::fs::rename(&self.path, path).map_err(io_err(|| {
            format!("renaming {} to {}", self.path.display(), path.display())
        }))?;
        self.done = true;
        File::open(dir_of(path))
            .and_then(|d| d.sync_all())
            .map_err(io_err(|| {
                format!("syncing directory {}", dir_of(path).display())
            }))
    }
}

impl Drop for TempFile {
    /// An output not finished leaves no temporary behind, and removes nothing else.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if (m.dev(), m.ino()) == self.id {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Opens `path` for reading (a link is followed: reading through one harms nothing) and
/// fails unless what opened is a regular file. Opened with O_NONBLOCK so a pipe or a
/// device named by mistake does not hang the open; the flag is harmless on a file.
pub fn open_regular(path: &Path) -> Result<File, UserFileError> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(|| format!("opening {}", path.display())))?;
    let m = f
        .metadata()
        .map_err(io_err(|| format!("looking at {}", path.display())))?;
    if !m.is_file() {
        return Err(UserFileError::NotRegular {
            path: path.to_owned(),
            doing: "read",
            kind: kind(m.file_type()),
        });
    }
    Ok(f)
}

/// The whole of the regular file `path`, refused if over `max` bytes (`what` names it in
/// the refusal). Reads at most `max + 1` bytes whatever the file claims, so a file that
/// grows while it is read is refused too.
pub fn read_bounded(path: &Path, max: u64, what: &'static str) -> Result<Vec<u8>, UserFileError> {
    let f = open_regular(path)?;
    let too_big = || UserFileError::TooBig {
        path: path.to_owned(),
        max,
        what,
    };
    if f.metadata().is_ok_and(|m| m.len() > max) {
        return Err(too_big());
    }
    let mut out = vec![];
    f.take(max + 1)
        .read_to_end(&mut out)
        .map_err(io_err(|| format!("reading {}", path.display())))?;
    if out.len() as u64 > max {
        return Err(too_big());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_refuses_links_and_devices_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim.txt");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link.html");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(matches!(
            replace(&link, b"page", 0o644),
            Err(UserFileError::Symlink(_))
        ));
        assert!(matches!(
            replace(Path::new("/dev/null"), b"page", 0o644),
            Err(UserFileError::NotRegular { .. })
        ));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        replace(&victim, b"new", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "a temporary file was left: {names:?}");
    }

    #[test]
    fn read_bounded_refuses_devices_and_big_files() {
        let d = tempfile::tempdir().unwrap();
        let big = d.path().join("big");
        std::fs::write(&big, [0u8; 100]).unwrap();
        assert!(matches!(
            read_bounded(&big, 99, "a key file"),
            Err(UserFileError::TooBig { .. })
        ));
        assert_eq!(read_bounded(&big, 100, "a key file").unwrap().len(), 100);
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), 4096, "a key file"),
            Err(UserFileError::NotRegular { .. })
        ));
    }
}
