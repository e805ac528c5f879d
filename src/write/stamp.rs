//! The writer's last step before a write: stamping the submission time into every
//! sector of a prepared record and resealing each stamp's CRC, on the I/O thread, in the
//! time between two flushes. Why here and not `record::set_write_time`: that rehashes
//! all 60 stamp bytes per sector, and at several hundred thousand records per second on a
//! fast drive those 8 CRCs per 4 KiB record were the I/O thread's largest cost after the
//! system calls. The first 48 stamp bytes do not change once the generator prepared the
//! record, so the generator keeps each sector's CRC state after them ([`prefix_crcs`])
//! and the I/O thread only continues it over the last 12 bytes (time, sector count).
//! Same bytes on disk as `record::set_write_time` (tested below).

use crate::record::SECTOR;

/// Stamp bytes covered by the prefix CRC: everything before the write time.
const PREFIX: usize = 48;
/// The stamp's own CRC covers bytes [0, 60) and sits at [60, 64).
const SEALED: usize = 60;

/// Each sector's CRC state over its first 48 stamp bytes, into `out` (emptied first).
pub fn prefix_crcs(record: &[u8], out: &mut Vec<u32>) {
    out.clear();
    out.extend(
        record
            .chunks_exact(SECTOR)
            .map(|s| crc32fast::hash(&s[..PREFIX])),
    );
}

/// Sets the write time in every sector of `record` and reseals the stamps, continuing
/// each sector's CRC from `prefix` (from [`prefix_crcs`] of the same prepared bytes).
pub fn seal_write_time(record: &mut [u8], prefix: &[u32], write_time_ns: u64) {
    let t = write_time_ns.to_le_bytes();
    for (sector, &p) in record.chunks_exact_mut(SECTOR).zip(prefix) {
        sector[PREFIX..PREFIX + 8].copy_from_slice(&t);
        let mut h = crc32fast::Hasher::new_with_initial(p);
        h.update(&sector[PREFIX..SEALED]);
        sector[SEALED..SEALED + 4].copy_from_slice(&h.finalize().to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{RecordId, RunId, RunKey, prepare_record, set_write_time};

    #[test]
    fn same_bytes_as_set_write_time() {
        let run = RunId([9; 16]);
        let key = RunKey::new(run);
        for sectors in [1u32, 8, 129] {
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
            let mut prefix = Vec::new();
            prefix_crcs(&a, &mut prefix);
            assert_eq!(prefix.len(), sectors as usize);
            for t in [1u64, 0x0123_4567_89ab_cdef, u64::MAX] {
                set_write_time(&mut a, t);
                seal_write_time(&mut b, &prefix, t);
                assert!(a == b, "{sectors} sectors, time {t:#x}");
            }
        }
    }
}
