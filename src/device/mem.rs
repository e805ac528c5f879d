//! A plain in-memory device: pristine storage with no cache and no faults, for unit tests
//! of the writer and verify and for injecting damage by hand.

use super::interface::Device;
use std::io;
use std::sync::Mutex;

pub struct MemDevice {
    bytes: Mutex<Vec<u8>>,
    flushes: std::sync::atomic::AtomicU64,
}

impl MemDevice {
    pub fn new(size_bytes: usize) -> MemDevice {
        MemDevice {
            bytes: Mutex::new(vec![0; size_bytes]),
            flushes: Default::default(),
        }
    }
    /// A copy of the whole image.
    pub fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().unwrap().clone()
    }
    /// Replaces the whole image (e.g. with an older snapshot: a lost cache).
    pub fn restore(&self, image: &[u8]) {
        self.bytes.lock().unwrap().copy_from_slice(image);
    }
    /// Changes bytes directly, bypassing write_at (damage injection).
    pub fn edit(&self, f: impl FnOnce(&mut [u8])) {
        f(&mut self.bytes.lock().unwrap())
    }
    pub fn flushes(&self) -> u64 {
        self.flushes.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Device for MemDevice {
    fn size_bytes(&self) -> u64 {
        self.bytes.lock().unwrap().len() as u64
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut b = self.bytes.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > b.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "write past the end of the device",
            ));
        }
        b[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let b = self.bytes.lock().unwrap();
        let end = offset as usize + buf.len();
        if end > b.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the device",
            ));
        }
        buf.copy_from_slice(&b[offset as usize..end]);
        Ok(())
    }
}

/// A read-only view of a [`MemDevice`] whose every read first calls `before(len,
/// offset)`: for tests of verify with reads that fail, stall or are counted. Writes and
/// flushes panic: verify must never write.
#[cfg(test)]
pub struct ReadHook<F> {
    pub inner: std::sync::Arc<MemDevice>,
    pub before: F,
}

#[cfg(test)]
impl<F: Fn(usize, u64) -> io::Result<()> + Send + Sync> Device for ReadHook<F> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        panic!("verify must never write")
    }
    fn flush(&self) -> io::Result<()> {
        panic!("verify must never flush")
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (self.before)(buf.len(), offset)?;
        self.inner.read_at(buf, offset)
    }
}
