//! The dm-log-writes on-disk format, read as a stream of entries. Why a streaming reader:
//! a log holds every byte ever written through the target (gigabytes for a long run), so
//! only one entry's data is in memory at a time.
//!
//! The layout, from the kernel's drivers/md/dm-log-writes.c (and xfstests'
//! src/log-writes/, which replays it), all little endian; docs/replay.md draws it:
//! - Sector 0 (one log sector of `sectorsize` bytes): the super block, `magic` u64
//!   (0x6a736677736872), `version` u64 (1), `nr_entries` u64, `sectorsize` u32 (the data
//!   device's logical block size), zero padding.
//! - Then `nr_entries` entries, each one log sector holding `sector` u64, `nr_sectors`
//!   u64, `flags` u64, `data_len` u64 (a mark's text follows in the same sector, else
//!   zero padding), then `nr_sectors * sectorsize` bytes of written data, unless the
//!   entry is a discard. `sector` and `nr_sectors` count `sectorsize` units, not 512.

use crate::le::{u32_at, u64_at};
use std::io::{self, Read};

pub const MAGIC: u64 = 0x006a_7366_7773_6872;
pub const VERSION: u64 = 1;
/// REQ_PREFLUSH: every write logged before it is durable.
pub const FLUSH: u64 = 1 << 0;
/// REQ_FUA: this write is durable when it completes.
pub const FUA: u64 = 1 << 1;
pub const DISCARD: u64 = 1 << 2;
/// A user's `dmsetup message ... mark NAME`; no data, the name in the entry sector.
pub const MARK: u64 = 1 << 3;
/// REQ_META: a file system's metadata; replayed like any write.
pub const METADATA: u64 = 1 << 4;
const KNOWN_FLAGS: u64 = FLUSH | FUA | DISCARD | MARK | METADATA;
/// Bytes of the entry header at the start of each entry sector.
pub const ENTRY_HEADER_BYTES: usize = 32;
/// Bytes of the super block's fields.
pub const SUPER_BYTES: usize = 28;

/// The super block: how many entries and in what sector size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Super {
    pub nr_entries: u64,
    pub sector_bytes: u32,
}

/// One logged operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// 0-based position in the log.
    pub index: u64,
    /// Byte of the log where the entry's header sector starts.
    pub log_offset: u64,
    pub flags: u64,
    /// Byte offset on the data device (`sector * sectorsize`).
    pub offset: u64,
    /// Bytes covered on the data device (`nr_sectors * sectorsize`); the data's length
    /// for a write, the zeroed range for a discard.
    pub len: u64,
    /// A mark's name.
    pub mark: Option<String>,
    /// The written bytes (empty for flushes, discards and marks).
    pub data: Vec<u8>,
}

impl Entry {
    pub fn is_flush(&self) -> bool {
        self.flags & FLUSH != 0
    }
    pub fn is_fua(&self) -> bool {
        self.flags & FUA != 0
    }
    pub fn is_discard(&self) -> bool {
        self.flags & DISCARD != 0
    }
    pub fn is_mark(&self) -> bool {
        self.flags & MARK != 0
    }
    /// Carries data to write to the device.
    pub fn is_write(&self) -> bool {
        !self.is_discard() && !self.is_mark() && self.len > 0
    }
    /// A point after which an honest drive keeps something more: a flush (everything
    /// logged before it) or a FUA write (itself).
    pub fn is_durable_point(&self) -> bool {
        self.is_flush() || (self.is_fua() && self.is_write())
    }
}

/// Why the bytes are not a (whole) dm-log-writes log.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("not a dm-log-writes log: {0}")]
    NotALog(String),
    #[error("dm-log-writes log: {0}")]
    Damaged(String),
    #[error("reading the log")]
    Io(#[source] io::Error),
}

/// Reads `buf.len()` bytes or says how many there were before the end.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<usize, io::Error> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The entries of a log, in order, one at a time; ends after `nr_entries` or at the
/// first error.
pub struct LogReader<R: Read> {
    r: R,
    pub sup: Super,
    /// The log's length in bytes when known (a file or a block device), to refuse a
    /// garbage length before allocating for it.
    log_bytes: Option<u64>,
    next: u64,
    pos: u64,
    failed: bool,
}

impl<R: Read> LogReader<R> {
    /// Reads and checks the super block.
    pub fn new(mut r: R, log_bytes: Option<u64>) -> Result<LogReader<R>, FormatError> {
        let mut head = [0u8; SUPER_BYTES];
        let got = read_full(&mut r, &mut head).map_err(FormatError::Io)?;
        if got < SUPER_BYTES {
            return Err(FormatError::NotALog(format!(
                "{got} bytes long, shorter than a super block ({SUPER_BYTES} bytes)"
            )));
        }
        let magic = u64_at(&head, 0);
        if magic != MAGIC {
            return Err(FormatError::NotALog(format!(
                "bad magic at byte 0 (0x{magic:x}, expected 0x{MAGIC:x})"
            )));
        }
        let version = u64_at(&head, 8);
        if version != VERSION {
            return Err(FormatError::NotALog(format!(
                "version {version} at byte 8 (this build reads version {VERSION})"
            )));
        }
        let nr_entries = u64_at(&head, 16);
        let sector_bytes = u32_at(&head, 24);
        if !sector_bytes.is_power_of_two() || !(512..=65536).contains(&sector_bytes) {
            return Err(FormatError::NotALog(format!(
                "sector size {sector_bytes} at byte 24 (expected a power of two from 512 to 65536)"
            )));
        }
        let mut rest = vec![0u8; sector_bytes as usize - SUPER_BYTES];
        let got = read_full(&mut r, &mut rest).map_err(FormatError::Io)?;
        if got < rest.len() {
            return Err(FormatError::Damaged(format!(
                "truncated in the super block's sector: {} bytes, the sector is {sector_bytes}",
                SUPER_BYTES + got
            )));
        }
        Ok(LogReader {
            r,
            sup: Super {
                nr_entries,
                sector_bytes,
            },
            log_bytes,
            next: 0,
            pos: sector_bytes as u64,
            failed: false,
        })
    }

    /// The most entries this reader can yield: the super block's count, but no more than
    /// the log's length holds (each entry takes at least its header sector). Why: a
    /// damaged count (2^60) is for the pass to report where the log ends, not for the
    /// memory check to be refused with.
    pub fn entries_at_most(&self) -> u64 {
        let ss = self.sup.sector_bytes as u64;
        self.log_bytes.map_or(self.sup.nr_entries, |len| {
            self.sup.nr_entries.min(len.saturating_sub(ss) / ss)
        })
    }

    fn truncated(&self, what: &str, at: u64) -> FormatError {
        FormatError::Damaged(format!(
            "truncated: {what} of entry {} (at byte {at}) runs past the end of the log; the super block counts {} entries",
            self.next, self.sup.nr_entries
        ))
    }

    fn read_entry(&mut self) -> Result<Entry, FormatError> {
        let ss = self.sup.sector_bytes as u64;
        let at = self.pos;
        let mut sector = vec![0u8; ss as usize];
        let got = read_full(&mut self.r, &mut sector).map_err(FormatError::Io)?;
        if got < sector.len() {
            return Err(self.truncated("the header", at));
        }
        let (sec, nr, flags, data_len) = (
            u64_at(&sector, 0),
            u64_at(&sector, 8),
            u64_at(&sector, 16),
            u64_at(&sector, 24),
        );
        let bad =
            |why: String| FormatError::Damaged(format!("entry {} at byte {at}: {why}", self.next));
        if flags == 0 && nr == 0 {
            return Err(bad(
                "all zeroes, not an entry (the log ends early, or its super block counts too many entries)".into(),
            ));
        }
        if flags & !KNOWN_FLAGS != 0 {
            return Err(bad(format!("unknown flags 0x{flags:x}")));
        }
        let mark = if flags & MARK != 0 {
            if data_len > ss - ENTRY_HEADER_BYTES as u64 {
                return Err(bad(format!(
                    "a mark of {data_len} bytes does not fit its sector"
                )));
            }
            let text = &sector[ENTRY_HEADER_BYTES..ENTRY_HEADER_BYTES + data_len as usize];
            Some(String::from_utf8_lossy(text).into_owned())
        } else {
            if sector[ENTRY_HEADER_BYTES..].iter().any(|&b| b != 0) {
                return Err(bad(
                    "the bytes after the header are not zero padding: not an entry".into(),
                ));
            }
            None
        };
        let (offset, len) = match (sec.checked_mul(ss), nr.checked_mul(ss)) {
            (Some(o), Some(l)) if o.checked_add(l).is_some() => (o, l),
            _ => return Err(bad(format!("sector {sec} + {nr} sectors overflows"))),
        };
        self.pos += ss;
        let mut data = vec![];
        if flags & (DISCARD | MARK) == 0 && len > 0 {
            if self
                .log_bytes
                .is_some_and(|end| self.pos.saturating_add(len) > end)
            {
                return Err(self.truncated("the data", at));
            }
            data = vec![0u8; len as usize];
            let got = read_full(&mut self.r, &mut data).map_err(FormatError::Io)?;
            if got < data.len() {
                return Err(self.truncated("the data", at));
            }
            self.pos += len;
        }
        Ok(Entry {
            index: self.next,
            log_offset: at,
            flags,
            offset,
            len,
            mark,
            data,
        })
    }
}

impl<R: Read> LogReader<R> {
    /// After the counted entries: whether the next sector reads as one more entry. The
    /// kernel rewrites the super block's count only at FUA writes, marks and `dmsetup
    /// remove`, so a log taken from a target that was not removed cleanly holds more
    /// entries than it counts; they are not replayed, and the caller says so.
    pub fn entry_follows(&mut self) -> bool {
        if self.failed || self.next < self.sup.nr_entries {
            return false;
        }
        self.read_entry().is_ok()
    }
}

impl<R: Read> Iterator for LogReader<R> {
    type Item = Result<Entry, FormatError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.sup.nr_entries {
            return None;
        }
        let e = self.read_entry();
        match &e {
            Ok(_) => self.next += 1,
            Err(_) => self.failed = true,
        }
        Some(e)
    }
}
