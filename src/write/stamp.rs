//! The writer's last step before a write: stamping the submission time into every
//! sector of a prepared record and resealing each stamp's CRC, on the I/O thread, in the
//! time between two flushes. Why here and not `record::set_write_time`: that rehashes
//! all 60 stamp bytes per sector, and at several hundred thousand records per second on a
//! fast drive those 8 CRCs per 4 KiB record were the I/O thread's largest cost after the
//! system calls.
//!
//! CRC-32 is affine: for equal-length inputs, crc(a ^ b) = crc(a) ^ crc(b) ^ crc(0).
//! A prepared stamp holds write time 0 and the CRC of that; setting the time changes only
//! bytes 48..56, so the new CRC is the old one XOR `crc(time at 48..56, zeros elsewhere)
//! XOR crc(60 zeros)`: one 60-byte CRC per record, the same for all its sectors, and a
//! 4-byte XOR per sector. Same bytes on disk as `record::set_write_time` (tested below).
//! The one CRC per record is itself a table lookup per time byte ([`StampCrc`]), which also
//! gives the generator the stamps of a record's later sectors from its first.

use crate::record::SECTOR;
use std::sync::OnceLock;

/// The stamp's write time sits at [48, 56); its own CRC covers [0, 60) and sits at [60, 64).
const TIME: usize = 48;
const SEALED: usize = 60;
/// The sector index [8, 12) and the content CRC [12, 16): the stamp bytes that differ
/// between the sectors of one record.
pub const PER_SECTOR: usize = 8;

/// How the CRC of a 60-byte stamp changes when bytes at [8, 16) or [48, 56) change, by
/// table lookup. By the affine rule above, crc(s ^ d) = crc(s) ^ crc(d) ^ crc(0), and
/// crc(d) ^ crc(0) is linear in d, so it is the XOR of one entry per changed byte:
/// `table[p][b]` = crc(b at position p, zeros elsewhere) ^ crc(60 zeros). Eight lookups
/// cost a fraction of a 60-byte CRC call, which crc32fast computes byte by byte for such
/// short input; the writer did 9 of those per 4 KiB record (8 stamps, 1 write time).
pub struct StampCrc {
    /// Rows 0..8: positions 8..16; rows 8..16: positions 48..56.
    table: [[u32; 256]; 16],
}

impl StampCrc {
    /// The table, built once per process (128 CRC calls).
    pub fn get() -> &'static StampCrc {
        static T: OnceLock<Box<StampCrc>> = OnceLock::new();
        T.get_or_init(|| {
            let zero = crc32fast::hash(&[0u8; SEALED]);
            let mut t = Box::new(StampCrc {
                table: [[0; 256]; 16],
            });
            for (row, pos) in (PER_SECTOR..PER_SECTOR + 8)
                .chain(TIME..TIME + 8)
                .enumerate()
            {
                let mut bit = [0u32; 8];
                for (k, c) in bit.iter_mut().enumerate() {
                    let mut d = [0u8; SEALED];
                    d[pos] = 1 << k;
                    *c = crc32fast::hash(&d) ^ zero;
                }
                for b in 0..256usize {
                    t.table[row][b] = (0..8)
                        .filter(|k| b >> k & 1 == 1)
                        .fold(0, |a, k| a ^ bit[k]);
                }
            }
            t
        })
    }

    /// The CRC change when the 8 bytes at [8, 16) change by `xor` (old ^ new).
    #[inline]
    pub fn per_sector_delta(&self, xor: [u8; 8]) -> u32 {
        self.delta(0, xor)
    }

    /// The CRC change when the write time at [48, 56) changes by `xor`.
    #[inline]
    pub fn time_delta(&self, xor: [u8; 8]) -> u32 {
        self.delta(8, xor)
    }

    #[inline]
    fn delta(&self, row: usize, xor: [u8; 8]) -> u32 {
        let mut d = 0;
        for (k, &b) in xor.iter().enumerate() {
            d ^= self.table[row + k][b as usize];
        }
        d
    }
}

/// Sets the write time in every sector of `record`, a record as prepared (its stamps hold
/// write time 0 and are sealed for it), and reseals the stamps.
pub fn seal_write_time(record: &mut [u8], write_time_ns: u64) {
    let t = write_time_ns.to_le_bytes();
    let delta = StampCrc::get().time_delta(t);
    for sector in record.chunks_exact_mut(SECTOR) {
        debug_assert_eq!(sector[TIME..TIME + 8], [0; 8], "stamp not as prepared");
        sector[TIME..TIME + 8].copy_from_slice(&t);
        let crc = crate::le::u32_at(sector, SEALED) ^ delta;
        sector[SEALED..SEALED + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordId, RunId, RunKey, decode_stamp, prepare_record, set_write_time};

    #[test]
    fn table_deltas_are_the_crc_changes() {
        let t = StampCrc::get();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut s = [0u8; SEALED];
            for b in s.iter_mut() {
                *b = next() as u8;
            }
            let (a, b) = (next().to_le_bytes(), next().to_le_bytes());
            for (at, delta) in [(PER_SECTOR, t.per_sector_delta(b)), (TIME, t.time_delta(b))] {
                let mut n = s;
                n[at..at + 8].copy_from_slice(&a);
                let before = crc32fast::hash(&n);
                for k in 0..8 {
                    n[at + k] ^= b[k];
                }
                assert_eq!(crc32fast::hash(&n), before ^ delta, "bytes at {at}");
            }
        }
    }

    #[test]
    fn same_bytes_as_set_write_time() {
        let run = RunId([9; 16]);
        let key = RunKey::new(run);
        for sectors in [1u32, 8, 129] {
            for t in [1u64, 0x0123_4567_89ab_cdef, u64::MAX] {
                let rec = RecordId {
                    stream: 3,
                    seq: 77,
                    offset: 1 << 20,
                    sectors,
                    write_time_ns: 0,
                };
                let mut a = vec![0u8; sectors as usize * SECTOR];
                prepare_record(&mut a, &key, run, &rec);
                let mut b = a.clone();
                set_write_time(&mut a, t);
                seal_write_time(&mut b, t);
                assert!(a == b, "{sectors} sectors, time {t:#x}");
                let st = decode_stamp(&b[SECTOR * (sectors as usize - 1)..]).unwrap();
                assert_eq!(st.record.write_time_ns, t);
            }
        }
    }
}
