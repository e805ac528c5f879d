//! The durable side of the simulated drive: the image (what is "on media") and the
//! sidecar of post-cut state.
//!
//! Why the image lives in a plain file in FUSE mode: the daemon's power cut is a SIGKILL,
//! and the only state that survives a SIGKILL is what the daemon already handed to the
//! host kernel. So the model keeps one invariant: the image always equals what would
//! survive a cut at this instant, and everything not yet on media lives only in the
//! daemon's memory. No fsync is needed because the host keeps power.
//!
//! Faults that only show after power returns (a range unreadable, a dead drive) cannot be
//! written into the image, so they go to a sidecar JSON file next to it
//! (`BACKING.faults`), written before they could matter and applied at the next power on.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The durable image: memory (in-process use) or a backing file (FUSE mode).
pub enum Image {
    Memory(Vec<u8>),
    File(File),
}

impl Image {
    pub fn memory(size_bytes: u64) -> io::Result<Image> {
        let n = usize::try_from(size_bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "size too large"))?;
        Ok(Image::Memory(vec![0; n]))
    }

    /// Opens or creates the backing file. An existing image keeps its contents (that is
    /// power on); a new or empty file is extended with zeros to `size_bytes`.
    ///
    /// Why so strict: an image has no header to recognise it by, and `--backing` names
    /// a file the daemon then writes at will. So a link is not followed (O_NOFOLLOW), a
    /// new file is created with O_EXCL, and an existing file is taken only if it is a
    /// regular file that is empty or exactly `size_bytes` long (the image an earlier
    /// start of this drive left); anything else is someone's file and is refused.
    pub fn file(path: &Path, size_bytes: u64) -> io::Result<Image> {
        use std::os::unix::fs::OpenOptionsExt;
        let refuse = |why: String| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing --backing {}: {why}", path.display()),
            )
        };
        let open = |create: bool| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(create)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(path)
        };
        let opened = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => open(true),
            Err(e) => Err(e),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse(
                    "it is a symbolic link; give the path of the image itself".into(),
                ));
            }
            Ok(m) if !m.is_file() => {
                return Err(refuse("it is not a regular file".into()));
            }
            Ok(_) => open(false),
        };
        let f = opened.map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse("it is a symbolic link".into()),
            _ => io::Error::new(e.kind(), format!("backing {}: {e}", path.display())),
        })?;
        let m = f.metadata()?;
        if !m.is_file() {
            return Err(refuse("it is not a regular file".into()));
        }
        if m.len() == 0 {
            f.set_len(size_bytes)?;
        } else if m.len() != size_bytes {
            return Err(refuse(format!(
                "it holds {} bytes and a drive of --size {size_bytes} has an image of exactly \
                 {size_bytes}: it is not this drive's image (give a new path, or the --size \
                 the image was made with)",
                m.len()
            )));
        }
        Ok(Image::File(f))
    }

    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Image::Memory(v) => {
                let o = offset as usize;
                buf.copy_from_slice(&v[o..o + buf.len()]);
                Ok(())
            }
            Image::File(f) => f.read_exact_at(buf, offset),
        }
    }

    pub fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        match self {
            Image::Memory(v) => {
                let o = offset as usize;
                v[o..o + buf.len()].copy_from_slice(buf);
                Ok(())
            }
            Image::File(f) => f.write_all_at(buf, offset),
        }
    }
}

/// Faults that exist only after the power comes back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PostCut {
    /// Byte ranges (offset, len) that fail to read.
    #[serde(default)]
    pub unreadable: Vec<(u64, u64)>,
    /// Reads of those ranges hang this long before failing.
    #[serde(default)]
    pub read_hang_ms: Option<u64>,
    #[serde(default)]
    pub dead: bool,
}

impl PostCut {
    pub fn is_empty(&self) -> bool {
        self.unreadable.is_empty() && !self.dead
    }
}

/// The sidecar: faults armed for the next power on, and faults already in force.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    #[serde(default)]
    pub armed: PostCut,
    #[serde(default)]
    pub active: PostCut,
}

/// Where the sidecar of a backing file lives.
pub fn sidecar_path(backing: &Path) -> PathBuf {
    let mut s = backing.as_os_str().to_owned();
    s.push(".faults");
    PathBuf::from(s)
}

impl Sidecar {
    /// Reads the sidecar; a missing file is an empty one.
    pub fn load(path: &Path) -> io::Result<Sidecar> {
        match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("sidecar {}: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Sidecar::default()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the sidecar atomically: a new temporary file with a random name (never a
    /// fixed name a link could be planted at), renamed over a sidecar that is missing or
    /// a regular file.
    pub fn store(&self, path: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        crate::userfile::replace(path, &bytes, 0o666).map_err(io::Error::other)
    }

    /// Power on: what was armed comes into force.
    pub fn power_on(&mut self) {
        let armed = std::mem::take(&mut self.armed);
        self.active.unreadable.extend(armed.unreadable);
        self.active.dead |= armed.dead;
        if armed.read_hang_ms.is_some() {
            self.active.read_hang_ms = armed.read_hang_ms;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_is_new_empty_or_an_image_of_the_same_size() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("new.img");
        drop(Image::file(&new, 4096).unwrap());
        assert_eq!(std::fs::metadata(&new).unwrap().len(), 4096);
        // Power on: the same image again.
        drop(Image::file(&new, 4096).unwrap());
        let empty = d.path().join("empty.img");
        std::fs::write(&empty, b"").unwrap();
        drop(Image::file(&empty, 4096).unwrap());
        assert_eq!(std::fs::metadata(&empty).unwrap().len(), 4096);
        // Another size is someone else's file (or another drive's image).
        assert!(Image::file(&new, 8192).is_err());
        assert_eq!(std::fs::metadata(&new).unwrap().len(), 4096);
    }

    #[test]
    fn sidecar_link_is_refused_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let sc = d.path().join("img.faults");
        std::os::unix::fs::symlink(&victim, &sc).unwrap();
        assert!(Sidecar::default().store(&sc).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        std::fs::remove_file(&sc).unwrap();
        Sidecar::default().store(&sc).unwrap();
        assert_eq!(Sidecar::load(&sc).unwrap(), Sidecar::default());
    }
}
