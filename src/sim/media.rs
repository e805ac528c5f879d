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

    /// Opens or creates the backing file. An existing file keeps its contents (that is
    /// power on); a new or shorter one is extended with zeros to `size_bytes`.
    pub fn file(path: &Path, size_bytes: u64) -> io::Result<Image> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("backing {}: {e}", path.display())))?;
        if f.metadata()?.len() < size_bytes {
            f.set_len(size_bytes)?;
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

    /// Replaces the sidecar atomically (write a temporary file, rename over).
    pub fn store(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).map_err(io::Error::other)?,
        )?;
        std::fs::rename(&tmp, path)
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
