//! The target marker: one checksummed sector that says "plugpull created this file (or
//! scratch area) and nobody else's data is here".
//!
//! Why it exists: a run that fails between creating its file and writing the first record
//! (witness gone, Ctrl-C or a kill during preallocation) leaves a file with no record
//! stamp in it. Without a marker the retry could not tell that file from someone else's
//! and would refuse it. The marker is written right after the file is created, before
//! the long zero-fill, so any file plugpull creates carries either the marker or records.
//! It is a whole sector with a CRC and its own offset, so no text or image that happens
//! to start with the same letters passes for it. Byte layout: docs/format.md.

use crate::record::SECTOR;

/// First bytes of a marker sector (differs from a record stamp's `PLUG`, so verify and
/// the record decoder never mistake one for the other).
pub const MARKER_MAGIC: [u8; 8] = *b"PPTARGET";
pub const MARKER_VERSION: u16 = 1;
/// Human-readable text in the marker, for someone looking at the file with `xxd`.
const MARKER_TEXT: &[u8] = b"plugpull target: created by plugpull, holds no one else's data\n";
const TEXT_AT: usize = 32;
const CRC_AT: usize = SECTOR - 4;

/// Which plugpull command created the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creator {
    /// `write` (or the campaign agent): the run region starts at the marker.
    Write = 1,
    /// `bench`: the marker is at offset 0, bench data starts past it.
    Bench = 2,
}

/// A decoded marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    pub creator: Creator,
    /// Where the marker was written: it is valid only when found there.
    pub offset: u64,
    /// When the file was created, ns since the Unix epoch (informational).
    pub created_ns: u64,
}

/// The marker sector for a target created by `creator`, to be written at `offset`.
pub fn encode(creator: Creator, offset: u64) -> [u8; SECTOR] {
    let created_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut s = [0u8; SECTOR];
    s[0..8].copy_from_slice(&MARKER_MAGIC);
    s[8..10].copy_from_slice(&MARKER_VERSION.to_le_bytes());
    s[10..12].copy_from_slice(&(creator as u16).to_le_bytes());
    s[16..24].copy_from_slice(&offset.to_le_bytes());
    s[24..32].copy_from_slice(&created_ns.to_le_bytes());
    s[TEXT_AT..TEXT_AT + MARKER_TEXT.len()].copy_from_slice(MARKER_TEXT);
    let crc = crc32fast::hash(&s[..CRC_AT]);
    s[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    s
}

/// The marker in `sector`, if it is one, intact, and written for offset `at`.
pub fn decode(sector: &[u8], at: u64) -> Option<Marker> {
    let s = sector.get(..SECTOR)?;
    let u16_at = |i: usize| crate::le::u16_at(s, i);
    let u64_at = |i: usize| crate::le::u64_at(s, i);
    if s[0..8] != MARKER_MAGIC
        || crc32fast::hash(&s[..CRC_AT]) != crate::le::u32_at(s, CRC_AT)
        || u16_at(8) != MARKER_VERSION
        || u64_at(16) != at
    {
        return None;
    }
    let creator = match u16_at(10) {
        1 => Creator::Write,
        2 => Creator::Bench,
        _ => return None,
    };
    Some(Marker {
        creator,
        offset: at,
        created_ns: u64_at(24),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips_only_at_its_own_offset() {
        let s = encode(Creator::Write, 4096);
        let m = decode(&s, 4096).expect("valid marker");
        assert_eq!(m.creator, Creator::Write);
        assert_eq!(m.offset, 4096);
        assert!(m.created_ns > 0);
        assert_eq!(
            decode(&s, 0),
            None,
            "a marker copied elsewhere is not valid"
        );
        assert_eq!(
            decode(&encode(Creator::Bench, 0), 0).map(|m| m.creator),
            Some(Creator::Bench)
        );
    }

    #[test]
    fn any_flipped_marker_bit_is_refused() {
        let s = encode(Creator::Bench, 0);
        for bit in 0..SECTOR * 8 {
            let mut t = s;
            t[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode(&t, 0), None, "bit {bit} flip went unnoticed");
        }
    }

    #[test]
    fn text_with_the_magic_is_not_a_marker() {
        let mut s = [b' '; SECTOR];
        s[..MARKER_MAGIC.len()].copy_from_slice(&MARKER_MAGIC);
        assert_eq!(decode(&s, 0), None);
    }
}
