//! The on-disk record: a 64-byte stamp at the start of every 512-byte sector, then
//! incompressible content that verify can regenerate.
//!
//! Why a stamp in *every* sector rather than one header per record: a drive can tear a
//! write at any sector boundary, land it at the wrong address, or keep an older generation
//! of part of it. Only a per-sector stamp (run, stream, seq, own offset, index) lets verify
//! say which of those happened, sector by sector. The byte layout is in docs/format.md.

/// The unit of atomicity we reason about: every record is a whole number of these.
pub const SECTOR: usize = 512;
/// Bytes at the start of each sector that identify it.
pub const STAMP_LEN: usize = 64;
/// Bytes of regenerable content after the stamp.
pub const CONTENT_LEN: usize = SECTOR - STAMP_LEN;
pub const MAGIC: [u8; 4] = *b"PLUG";

mod content;
mod run_id;
use crate::le::{u16_at, u32_at, u64_at};
pub use content::{FORMAT_VERSION, OLDEST_READABLE_VERSION, RecordContent, RunKey};
pub use run_id::RunId;

/// What identifies one record: everything verify needs to regenerate its exact bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordId {
    pub stream: u16,
    pub seq: u64,
    /// Byte offset on the target; a multiple of [`SECTOR`].
    pub offset: u64,
    /// Length in sectors.
    pub sectors: u32,
    /// Submission time, writer clock, ns since the Unix epoch. Part of the stamp, so it
    /// must be carried in the ack for verify to regenerate the bytes.
    pub write_time_ns: u64,
}

impl RecordId {
    pub fn len_bytes(&self) -> u64 {
        self.sectors as u64 * SECTOR as u64
    }
    pub fn end(&self) -> u64 {
        self.offset + self.len_bytes()
    }
}

/// One decoded sector stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub version: u16,
    pub run: RunId,
    pub record: RecordId,
    /// This sector's index within its record.
    pub index: u32,
    /// CRC-32 of this sector's content bytes (64..512) as written.
    pub content_crc: u32,
}

impl Stamp {
    /// Where this sector claims it belongs.
    pub fn home(&self) -> u64 {
        self.record.offset + self.index as u64 * SECTOR as u64
    }
}

/// Why a sector's first 64 bytes are not a valid stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StampError {
    /// No magic: never written by plugpull (zeros, a file system, random bytes).
    NoMagic,
    /// Magic present but the checksum fails: a damaged stamp.
    BadChecksum,
    /// A valid stamp from a format version this build does not know.
    UnknownVersion(u16),
    /// Checksum fine but the fields contradict each other (index past the record end).
    Inconsistent,
}

/// Writes the stamp for sector `index` of `rec` into `sector[..STAMP_LEN]`; the content
/// (`sector[STAMP_LEN..]`) must already be in place, since the stamp carries its CRC.
pub fn encode_stamp(sector: &mut [u8], run: RunId, rec: &RecordId, index: u32) {
    encode_stamp_version(sector, FORMAT_VERSION, run, rec, index);
}

/// [`encode_stamp`] for format `version` (verify regenerates version 1 sectors too).
pub fn encode_stamp_version(
    sector: &mut [u8],
    version: u16,
    run: RunId,
    rec: &RecordId,
    index: u32,
) {
    let content_crc = crc32fast::hash(&sector[STAMP_LEN..SECTOR]);
    let s = &mut sector[..STAMP_LEN];
    s[0..4].copy_from_slice(&MAGIC);
    s[4..6].copy_from_slice(&version.to_le_bytes());
    s[6..8].copy_from_slice(&rec.stream.to_le_bytes());
    s[8..12].copy_from_slice(&index.to_le_bytes());
    s[12..16].copy_from_slice(&content_crc.to_le_bytes());
    s[16..32].copy_from_slice(&run.0);
    s[32..40].copy_from_slice(&rec.seq.to_le_bytes());
    s[40..48].copy_from_slice(&rec.offset.to_le_bytes());
    s[48..56].copy_from_slice(&rec.write_time_ns.to_le_bytes());
    s[56..60].copy_from_slice(&rec.sectors.to_le_bytes());
    let crc = crc32fast::hash(&s[0..60]);
    s[60..64].copy_from_slice(&crc.to_le_bytes());
}

/// True if the content bytes of `sector` still match the CRC its (valid) stamp carries.
pub fn content_matches(sector: &[u8], stamp: &Stamp) -> bool {
    crc32fast::hash(&sector[STAMP_LEN..SECTOR]) == stamp.content_crc
}

/// Decodes the stamp at the start of `sector` (at least [`STAMP_LEN`] bytes).
pub fn decode_stamp(sector: &[u8]) -> Result<Stamp, StampError> {
    let s = &sector[..STAMP_LEN];
    if s[0..4] != MAGIC {
        return Err(StampError::NoMagic);
    }
    if crc32fast::hash(&s[0..60]) != u32_at(s, 60) {
        return Err(StampError::BadChecksum);
    }
    let version = u16_at(s, 4);
    if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(StampError::UnknownVersion(version));
    }
    let mut run = [0u8; 16];
    run.copy_from_slice(&s[16..32]);
    let stamp = Stamp {
        version,
        run: RunId(run),
        index: u32_at(s, 8),
        content_crc: u32_at(s, 12),
        record: RecordId {
            stream: u16_at(s, 6),
            seq: u64_at(s, 32),
            offset: u64_at(s, 40),
            write_time_ns: u64_at(s, 48),
            sectors: u32_at(s, 56),
        },
    };
    if stamp.record.sectors == 0
        || stamp.index >= stamp.record.sectors
        || stamp.record.offset % SECTOR as u64 != 0
        // A forged offset near u64::MAX must not overflow home() / end() downstream.
        || stamp.record.offset.checked_add(stamp.record.len_bytes()).is_none()
    {
        return Err(StampError::Inconsistent);
    }
    Ok(stamp)
}

/// Fills `buf` (exactly `rec.len_bytes()` long) with the record's bytes in the key's
/// format version. Content is laid over the whole record so that sector i's content is
/// content bytes [i*512 + 64, (i+1)*512) of (stream, seq) (`content::RecordContent`);
/// the stamp takes each sector's first 64 bytes.
pub fn fill_record(buf: &mut [u8], key: &RunKey, run: RunId, rec: &RecordId) {
    prepare_record(buf, key, run, rec);
    set_write_time(buf, rec.write_time_ns);
}

/// The expensive part of [`fill_record`] (content and its CRCs), which the writer does
/// ahead of time on another thread; the submission time is stamped just before the
/// write with [`set_write_time`].
pub fn prepare_record(buf: &mut [u8], key: &RunKey, run: RunId, rec: &RecordId) {
    fill_content(buf, key, rec);
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        encode_stamp_version(sector, key.version(), run, rec, i as u32);
    }
}

/// Writes the content of every sector of `rec` (bytes [64, 512) of each) into `buf`,
/// exactly `rec.len_bytes()` long, in the key's format version; the stamps are left for
/// the caller, which needs the content in place first (a stamp carries its CRC). The one
/// copy of the loop for [`prepare_record`] and the writer's `write::prepare`.
pub fn fill_content(buf: &mut [u8], key: &RunKey, rec: &RecordId) {
    assert_eq!(
        buf.len() as u64,
        rec.len_bytes(),
        "buffer must hold the whole record"
    );
    let mut content = key.record(rec.stream, rec.seq);
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        content.fill_at((i * SECTOR + STAMP_LEN) as u64, &mut sector[STAMP_LEN..]);
    }
}

/// Sets the write time in every sector stamp of a prepared record and re-seals the
/// stamps (the content CRC is unchanged).
pub fn set_write_time(buf: &mut [u8], write_time_ns: u64) {
    for sector in buf.chunks_exact_mut(SECTOR) {
        sector[48..56].copy_from_slice(&write_time_ns.to_le_bytes());
        let crc = crc32fast::hash(&sector[0..60]);
        sector[60..64].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The expected bytes of one sector of a record, for comparison by verify, in the
/// format version of `key` (the run's).
pub fn expected_sector(
    out: &mut [u8; SECTOR],
    key: &RunKey,
    run: RunId,
    rec: &RecordId,
    index: u32,
) {
    let from = index as u64 * SECTOR as u64 + STAMP_LEN as u64;
    key.record(rec.stream, rec.seq)
        .fill_at(from, &mut out[STAMP_LEN..]);
    encode_stamp_version(out, key.version(), run, rec, index);
}

/// Number of bits that differ between two equal-length byte slices.
pub fn bit_difference(a: &[u8], b: &[u8]) -> u64 {
    debug_assert_eq!(a.len(), b.len());
    let mut n = 0u64;
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    let (bc, br) = b.split_at(b.len() / 8 * 8);
    for (x, y) in ac.chunks_exact(8).zip(bc.chunks_exact(8)) {
        let x = u64::from_ne_bytes(x.try_into().unwrap());
        let y = u64::from_ne_bytes(y.try_into().unwrap());
        n += (x ^ y).count_ones() as u64;
    }
    for (x, y) in ar.iter().zip(br) {
        n += (x ^ y).count_ones() as u64;
    }
    n
}

#[cfg(test)]
mod tests;
