//! The witness's storage: the few file operations its ack logs and journal need, behind a
//! trait, so the same code runs on the real file system and on a simulated disk that
//! loses power.
//!
//! Why: the witness's whole job is to keep every ack it reported durable across a power
//! cut of its own machine, and we prove drives by cutting them at every step, not by
//! reasoning. Hand-modelled power loss (truncating a file in a test) only covers the
//! cases someone thought of; a disk that drops unsynced writes, keeps a random subset of
//! them and tears the last one at a sector boundary covers the ones nobody did.
//! [`FsStorage`] is what `plugpull listen` uses: each method is one system call on a
//! `std::fs::File`, so the journal's group commit pays one virtual call per syscall and
//! nothing else. `sim::SimStorage` is the simulated disk (after redb's FailingBackend
//! and TigerBeetle's storage simulator; test support, not in the shipped binary):
//! tests/integration/witness_crash.rs drives the real log, journal and recovery code
//! over it and cuts it at every operation.
//!
//! The contract is the one POSIX gives and no more: written bytes and length changes are
//! durable only after `sync_data`/`sync_all` of that file returned, and a name
//! (create, remove, rename) only after `sync_dir` of its directory returned. Until then a
//! power cut may keep any of them, in any combination.

// Test support (Cargo.toml's test-support feature): not in the shipped binary.
#[cfg(any(test, feature = "test-support"))]
pub mod sim;

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An open file of a [`Storage`].
pub trait StorageFile: Send + Sync {
    /// Length in bytes as reads see it now (including writes not yet durable).
    fn size(&self) -> io::Result<u64>;
    /// Reads at most `buf.len()` bytes at `offset`; returns how many (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes all of `data` at `offset`, extending the file (with zeros before it, if
    /// `offset` is past the end); durable only after `sync_data`.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Sets the length, cutting or zero-extending; durable only after `sync_data`.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes every earlier write and length change of this file durable (fdatasync); not
    /// its name.
    fn sync_data(&self) -> io::Result<()>;
    /// `sync_data` and the file's other metadata too (fsync).
    fn sync_all(&self) -> io::Result<()>;
}

/// The files of a directory tree.
pub trait Storage: Send + Sync {
    /// Creates `path`, which must not exist, empty and open for reading and writing; the
    /// name is durable only after `sync_dir` of its directory.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens the existing file `path` for reading and writing.
    fn open(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Opens the existing file `path` for reading only (needs no write permission).
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>>;
    /// Whether `path` names a file (`Ok(false)` only when it does not exist).
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes the name `path`; durable only after `sync_dir` of its directory.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to`; durable only after `sync_dir`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes every create, remove and rename in `dir` so far durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Paths of the entries of `dir`, in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
}

/// The real file system: what the witness runs on.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsStorage;

impl FsStorage {
    /// The real file system as a shared [`Storage`].
    pub fn shared() -> Arc<dyn Storage> {
        Arc::new(FsStorage)
    }
}

impl StorageFile for File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.write_all_at(data, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn sync_all(&self) -> io::Result<()> {
        File::sync_all(self)
    }
}

impl Storage for FsStorage {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Box::new(f))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let f = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Box::new(f))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(File::open(path)?))
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        match std::fs::metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect()
    }
}

/// Reads a [`StorageFile`] from the start as a stream (wrap it in a `BufReader`).
pub struct FileReader<'a> {
    file: &'a dyn StorageFile,
    pos: u64,
}

impl<'a> FileReader<'a> {
    pub fn new(file: &'a dyn StorageFile) -> FileReader<'a> {
        FileReader { file, pos: 0 }
    }
}

impl Read for FileReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// The whole content of `path`.
pub fn read_all(storage: &dyn Storage, path: &Path) -> io::Result<Vec<u8>> {
    let f = storage.open_read(path)?;
    let mut out = Vec::with_capacity(f.size()? as usize);
    FileReader::new(&*f).read_to_end(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_storage_does_what_each_method_says() {
        let dir = tempfile::tempdir().unwrap();
        let s = FsStorage;
        let p = dir.path().join("a");
        assert!(!s.exists(&p).unwrap());
        let f = s.create_new(&p).unwrap();
        assert!(
            s.create_new(&p).is_err(),
            "create_new refuses an existing name"
        );
        f.write_at(b"world", 6).unwrap();
        f.write_at(b"hello", 0).unwrap();
        f.sync_data().unwrap();
        s.sync_dir(dir.path()).unwrap();
        assert_eq!(read_all(&s, &p).unwrap(), b"hello\0world");
        f.set_len(5).unwrap();
        assert_eq!(f.size().unwrap(), 5);
        let q = dir.path().join("b");
        s.rename(&p, &q).unwrap();
        assert_eq!(s.list(dir.path()).unwrap(), vec![q.clone()]);
        assert_eq!(read_all(&s, &q).unwrap(), b"hello");
        s.remove(&q).unwrap();
        assert!(!s.exists(&q).unwrap());
        assert!(s.open(&q).is_err());
    }
}
