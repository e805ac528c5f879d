//! What the first bytes of a target hold: a previous plugpull target (recognised only by
//! a whole sector that checks out), or a partition table or file system from a short
//! hand-kept list. Why whole sectors: a few magic bytes would let a text file starting
//! "PLUG" pass as plugpull's, and plugpull's own record content must not read as someone
//! else's file system. The list is only a second opinion: libblkid (`super::probe`) is
//! what knows every signature; the list still counts when libblkid passes over a
//! damaged superblock whose magic is intact.

use super::super::marker;
use crate::record::{SECTOR, content_matches, decode_stamp};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// True if a sector of the target (read through `f`, `len` bytes long) checks out as
/// plugpull's: the one at the region's start or the one at 0 holds a record sector at its
/// own home with both CRCs right, or the target marker written for that offset. A file's
/// length must be whole sectors.
pub(super) fn holds_plugpull(f: &File, len: u64, region_offset: u64) -> bool {
    if len % SECTOR as u64 != 0 {
        return false;
    }
    [region_offset, 0].into_iter().any(|at| {
        let mut b = [0u8; SECTOR];
        f.read_exact_at(&mut b, at).is_ok() && is_plugpull_sector(&b, at, len)
    })
}

/// True if every sector the `n` bytes at `off` touch is plugpull's
/// ([`is_plugpull_sector`]): a magic found there is plugpull's record content.
pub(super) fn in_plugpull_sectors(f: &File, off: u64, n: u64, len: u64) -> bool {
    let s = SECTOR as u64;
    (off / s..=(off + n.max(1) - 1) / s).all(|i| {
        let mut b = [0u8; SECTOR];
        f.read_exact_at(&mut b, i * s).is_ok() && is_plugpull_sector(&b, i * s, len)
    })
}

/// True if `sector`, read at byte `at` of a target of `len` bytes, is plugpull's: a
/// valid record stamp whose home is `at` and whose record ends inside the target, with
/// the content CRC right; or the target marker written for `at`.
pub fn is_plugpull_sector(sector: &[u8], at: u64, len: u64) -> bool {
    if marker::decode(sector, at).is_some() {
        return true;
    }
    decode_stamp(sector)
        .is_ok_and(|s| s.home() == at && s.record.end() <= len && content_matches(sector, &s))
}

/// The hand-kept list's partition-table and file-system signatures in the first 128 KiB
/// of `f` (`len` bytes long; `u64::MAX` for a block device), skipping any
/// whose bytes lie wholly inside sectors that are plugpull's ([`is_plugpull_sector`]):
/// those bytes are plugpull's record content, not a file system. A signature anywhere
/// else counts, whatever the first sector holds.
pub(super) fn signature(f: &File, len: u64) -> std::io::Result<Option<&'static str>> {
    let mut buf = vec![0u8; 128 * 1024];
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    let b = &buf[..n];
    let ours: Vec<bool> = b
        .chunks_exact(SECTOR)
        .enumerate()
        .map(|(i, s)| is_plugpull_sector(s, (i * SECTOR) as u64, len))
        .collect();
    Ok(signature_outside(b, &ours))
}

/// Looks for signatures in the leading bytes of a device.
pub fn signature_in(b: &[u8]) -> Option<&'static str> {
    signature_outside(b, &[])
}

/// Looks for signatures in `b`, ignoring those whose bytes all lie in sectors `i` with
/// `ours[i]` true.
pub(super) fn signature_outside(b: &[u8], ours: &[bool]) -> Option<&'static str> {
    let is_ours = |off: usize, len: usize| {
        (off / SECTOR..=(off + len - 1) / SECTOR).all(|i| ours.get(i).copied().unwrap_or(false))
    };
    let at = |off: usize, sig: &[u8]| {
        b.len() >= off + sig.len() && &b[off..off + sig.len()] == sig && !is_ours(off, sig.len())
    };
    const CHECKS: &[(usize, &[u8], &str)] = &[
        (512, b"EFI PART", "a GPT partition table"),
        (4096, b"EFI PART", "a GPT partition table"),
        (1080, &[0x53, 0xEF], "an ext2/3/4 file system"),
        (0, b"XFSB", "an XFS file system"),
        (65600, b"_BHRfS_M", "a btrfs file system"),
        (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
        (3, b"NTFS    ", "an NTFS file system"),
        (54, b"FAT1", "a FAT file system"),
        (82, b"FAT32   ", "a FAT32 file system"),
        (3, b"EXFAT   ", "an exFAT file system"),
        (32769, b"CD001", "an ISO 9660 file system"),
        (536, b"LVM2 001", "an LVM physical volume"),
        (4086, b"SWAPSPACE2", "a swap area"),
        (4086, b"SWAP-SPACE", "a swap area"),
        (65536, b"_BHRfS_M", "a btrfs file system"),
        (1024, b"\x10\x20\xf5\xf2", "an F2FS file system"),
        (
            4096,
            b"\xfc\x4e\x2b\xa9",
            "an md RAID member (metadata 1.2)",
        ),
    ];
    for (off, sig, what) in CHECKS {
        if at(*off, sig) {
            return Some(what);
        }
    }
    // MBR: boot signature plus at least one non-empty partition entry.
    if at(510, &[0x55, 0xAA]) && (0..4).any(|i| b[446 + 16 * i + 4] != 0) {
        return Some("an MBR partition table");
    }
    None
}
