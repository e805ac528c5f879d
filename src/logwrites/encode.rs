//! Writing a dm-log-writes log, byte for byte as the kernel does. Why in the library and
//! not only in tests: the integration tests and the lab's scripts build logs from a list
//! of writes, flushes, FUA writes, discards and marks without a kernel, and the encoder
//! is the reader's round-trip partner (docs/replay.md).

use super::format::{DISCARD, ENTRY_HEADER_BYTES, FLUSH, FUA, MAGIC, MARK, SUPER_BYTES, VERSION};

/// A log being built in memory; [`LogEncoder::finish`] gives its bytes.
pub struct LogEncoder {
    sector_bytes: u32,
    entries: u64,
    /// The log after the super block's sector.
    body: Vec<u8>,
}

impl LogEncoder {
    /// A log for a data device with `sector_bytes` logical blocks (512 or 4096).
    pub fn new(sector_bytes: u32) -> LogEncoder {
        assert!(sector_bytes.is_power_of_two() && sector_bytes >= 512);
        LogEncoder {
            sector_bytes,
            entries: 0,
            body: vec![],
        }
    }

    /// Any entry: the header sector (a mark's text after the header), then `data`.
    /// `offset` and `len` are bytes on the data device, multiples of the sector size.
    pub fn entry(&mut self, flags: u64, offset: u64, len: u64, data: &[u8], mark: &str) {
        let ss = self.sector_bytes as u64;
        assert!(offset % ss == 0 && len % ss == 0, "sector-aligned");
        let mut sector = vec![0u8; ss as usize];
        sector[0..8].copy_from_slice(&(offset / ss).to_le_bytes());
        sector[8..16].copy_from_slice(&(len / ss).to_le_bytes());
        sector[16..24].copy_from_slice(&flags.to_le_bytes());
        // The kernel sets data_len only for a mark's text; a write's data is counted by
        // nr_sectors and data_len stays 0.
        let data_len = if flags & MARK != 0 { mark.len() } else { 0 };
        sector[24..32].copy_from_slice(&(data_len as u64).to_le_bytes());
        sector[ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES + mark.len()]
            .copy_from_slice(mark.as_bytes());
        self.body.extend_from_slice(&sector);
        self.body.extend_from_slice(data);
        self.entries += 1;
    }

    /// A write of `data` at byte `offset`; with `fua`, a FUA write.
    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) {
        let flags = if fua { FUA } else { 0 };
        self.entry(flags, offset, data.len() as u64, data, "");
    }

    /// A flush with no data (what fdatasync sends).
    pub fn flush(&mut self) {
        self.entry(FLUSH, 0, 0, &[], "");
    }

    /// A discard of `len` bytes at `offset` (no data in the log).
    pub fn discard(&mut self, offset: u64, len: u64) {
        self.entry(DISCARD, offset, len, &[], "");
    }

    /// A user's mark named `name`.
    pub fn mark(&mut self, name: &str) {
        self.entry(MARK, 0, 0, &[], name);
    }

    /// Entries so far.
    pub fn len(&self) -> u64 {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The log's bytes: the super block's sector, then the entries.
    pub fn finish(self) -> Vec<u8> {
        let mut out = vec![0u8; self.sector_bytes as usize];
        out[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        out[8..16].copy_from_slice(&VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.entries.to_le_bytes());
        out[24..SUPER_BYTES].copy_from_slice(&self.sector_bytes.to_le_bytes());
        out.extend_from_slice(&self.body);
        out
    }
}
