//! The scratch image the log is replayed into: one sparse file, created in a private
//! temporary directory and removed with it at once, so it has no name while replay uses
//! it (through its open descriptor). Why: however replay ends (Ctrl-C, a kill, a crash)
//! the kernel frees it, and nothing is left in the scratch directory. Why a file and not
//! memory: the data device may be as big as a disk; a sparse file costs only the bytes
//! the log wrote. It is read back through the [`Device`] trait, so verify judges it
//! exactly as it judges a drive.

use super::format::Entry;
use crate::device::Device;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The replayed data device.
pub struct ScratchImage {
    file: Arc<File>,
    size_bytes: u64,
    base: Option<PathBuf>,
    /// The data device's end: `size_bytes`, or the base image's length if longer.
    limit_bytes: u64,
}

impl ScratchImage {
    /// An image of `size_bytes` zeroes (or a copy of `base`, grown to `size_bytes`), made
    /// in a new directory under `parent` and unlinked with it before this returns.
    pub fn create(parent: &Path, size_bytes: u64, base: Option<&Path>) -> io::Result<ScratchImage> {
        let dir = parent.join(format!(
            "plugpull-replay-{}-{:016x}",
            std::process::id(),
            crate::rng::random_seed()
        ));
        std::fs::create_dir(&dir)?;
        let path = dir.join("image");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path);
        let unlinked = std::fs::remove_file(&path).and_then(|()| std::fs::remove_dir(&dir));
        let file = match (file, unlinked) {
            (Ok(f), Ok(())) => f,
            (Err(e), _) | (_, Err(e)) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let mut img = ScratchImage {
            file: Arc::new(file),
            size_bytes,
            base: base.map(Path::to_path_buf),
            limit_bytes: size_bytes,
        };
        img.reset()?;
        img.limit_bytes = img.file.metadata()?.len();
        Ok(img)
    }

    /// Back to the start state: zeroes, or the base image.
    pub fn reset(&self) -> io::Result<()> {
        self.file.set_len(0)?;
        if let Some(base) = &self.base {
            // At explicit offsets: the file's cursor is wherever the last reset left it.
            let mut from = File::open(base)?;
            let mut buf = vec![0u8; 1 << 20];
            let mut at = 0u64;
            loop {
                let n = io::Read::read(&mut from, &mut buf)?;
                if n == 0 {
                    break;
                }
                self.file.write_all_at(&buf[..n], at)?;
                at += n as u64;
            }
        }
        if self.file.metadata()?.len() < self.size_bytes {
            self.file.set_len(self.size_bytes)?;
        }
        Ok(())
    }

    /// Applies a write (its data) or a discard (zeroes); flushes and marks change nothing.
    /// An entry past the end of the data device (the run's target size, or the base
    /// image's) is refused: the log is not of this run's device.
    pub fn apply(&self, e: &Entry) -> io::Result<()> {
        self.check_bounds(e)?;
        if e.is_write() {
            self.file.write_all_at(&e.data, e.offset)
        } else if e.is_discard() {
            self.zero(e.offset, e.len)
        } else {
            Ok(())
        }
    }

    /// The refusal [`ScratchImage::apply`] gives an entry past the data device's end,
    /// for an entry a part does not apply (the log is refused whatever the part).
    pub fn check_bounds(&self, e: &Entry) -> io::Result<()> {
        if (e.is_write() || e.is_discard()) && e.offset.saturating_add(e.len) > self.limit_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "log entry {} writes bytes {}..{}, past the end of the data device ({} bytes: the run's target, or --base): is this the log of that device?",
                    e.index,
                    e.offset,
                    e.offset.saturating_add(e.len),
                    self.limit_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Zeroes [offset, offset + len): a discard, which the log does not say the contents
    /// of; zeroes are what xfstests' replay writes when the device cannot discard.
    fn zero(&self, offset: u64, len: u64) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        let end = (offset + len).min(self.file.metadata()?.len());
        let zeros = vec![0u8; CHUNK as usize];
        let mut at = offset;
        while at < end {
            let n = CHUNK.min(end - at);
            self.file.write_all_at(&zeros[..n as usize], at)?;
            at += n;
        }
        Ok(())
    }

    /// The image as a device for verify.
    pub fn device(&self) -> Arc<dyn Device> {
        Arc::new(ImageDevice {
            file: self.file.clone(),
        })
    }

    /// The image's bytes, whole (tests).
    #[cfg(test)]
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.file.metadata().unwrap().len() as usize];
        self.file.read_exact_at(&mut v, 0).unwrap();
        v
    }
}

/// Reads and writes the image file through the page cache: it is scratch, its
/// durability means nothing, and a temporary directory may be on tmpfs (no O_DIRECT).
struct ImageDevice {
    file: Arc<File>,
}

impl Device for ImageDevice {
    fn size_bytes(&self) -> u64 {
        self.file.metadata().map(|m| m.len()).unwrap_or(0)
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        Ok(())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
}
