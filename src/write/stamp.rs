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

use crate::record::SECTOR;

/// The stamp's write time sits at [48, 56); its own CRC covers [0, 60) and sits at [60, 64).
const TIME: usize = 48;
const SEALED: usize = 60;

/// Sets the write time in every sector of `record`, a record as prepared (its stamps hold
/// write time 0 and are sealed for it), and reseals the stamps.
pub fn seal_write_time(record: &mut [u8], write_time_ns: u64) {
    let t = write_time_ns.to_le_bytes();
    let mut only_time = [0u8; SEALED];
    only_time[TIME..TIME + 8].copy_from_slice(&t);
    let delta = crc32fast::hash(&only_time) ^ crc32fast::hash(&[0u8; SEALED]);
    for sector in record.chunks_exact_mut(SECTOR) {
        debug_assert_eq!(sector[TIME..TIME + 8], [0; 8], "stamp not as prepared");
        sector[TIME..TIME + 8].copy_from_slice(&t);
        let crc = u32::from_le_bytes(sector[SEALED..SEALED + 4].try_into().unwrap()) ^ delta;
        sector[SEALED..SEALED + 4].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordId, RunId, RunKey, decode_stamp, prepare_record, set_write_time};

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
