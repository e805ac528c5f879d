//! The [`Device`] trait: what every target offers (a file or block device, the simulated
//! drive, memory). Why its own file: every implementation imports it, and the module
//! root only names and re-exports, so no implementation and the root import each other.

use std::io;

/// A storage target plugpull writes records to and reads them back from.
///
/// Offsets and lengths passed to every method are multiples of
/// [`Device::logical_block_bytes`]; buffers come from [`AlignedBuf`](super::AlignedBuf).
pub trait Device: Send + Sync {
    /// Usable size in bytes.
    fn size_bytes(&self) -> u64;
    /// The smallest unit the device accepts for direct I/O.
    fn logical_block_bytes(&self) -> u32;
    /// Writes all of `buf` at `offset`; success means accepted, not durable (unless the
    /// device was opened with a synchronous-write flush method).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Returns success only once every write that completed before the call is durable.
    fn flush(&self) -> io::Result<()>;
    /// Fills all of `buf` from `offset` with what the device holds, bypassing any cache.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Why every read fails, when the device is known to be gone (a drive that did not
    /// come back): a reader need not narrow a failed read down to its bad blocks.
    fn gone(&self) -> Option<String> {
        None
    }
}

impl<D: Device + ?Sized> Device for std::sync::Arc<D> {
    fn size_bytes(&self) -> u64 {
        (**self).size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        (**self).logical_block_bytes()
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn gone(&self) -> Option<String> {
        (**self).gone()
    }
}
