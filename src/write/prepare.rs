//! The writer's record preparation: `record::prepare_record`'s bytes, with the stamps of
//! sectors 1.. patched from sector 0's by CRC table instead of re-encoded and rehashed.
//!
//! Until format version 2 this module also held an eight-lane AVX2 BLAKE3 XOF for the
//! version 1 content. Version 2 content (one keyed hash per record, then one multiply per
//! 8 bytes, `record::RecordContent`) is about four times cheaper than even that code, and
//! nothing writes version 1 any more (verify regenerates it one sector at a time with the
//! `blake3` crate's reader), so the unsafe SIMD code was deleted.

use super::stamp::{PER_SECTOR, StampCrc};
use crate::record::{
    RecordId, RunId, RunKey, SECTOR, STAMP_LEN, encode_stamp_version, fill_content,
};

/// `record::prepare_record`: the same bytes.
pub fn prepare_record(buf: &mut [u8], key: &RunKey, run: RunId, rec: &RecordId) {
    fill_content(buf, key, rec);
    let (first, rest) = buf.split_at_mut(SECTOR);
    encode_stamp_version(first, key.version(), run, rec, 0);
    // The other sectors' stamps differ from the first only in index and content CRC
    // ([PER_SECTOR, +8)): copy it and patch its CRC by table instead of rehashing.
    let mut stamp = [0u8; STAMP_LEN];
    stamp.copy_from_slice(&first[..STAMP_LEN]);
    let base: [u8; 8] = stamp[PER_SECTOR..PER_SECTOR + 8].try_into().unwrap();
    let crc0 = crate::le::u32_at(&stamp, 60);
    let table = StampCrc::get();
    for (i, sector) in rest.chunks_exact_mut(SECTOR).enumerate() {
        let mut fields = [0u8; 8];
        fields[..4].copy_from_slice(&(i as u32 + 1).to_le_bytes());
        fields[4..].copy_from_slice(&crc32fast::hash(&sector[STAMP_LEN..]).to_le_bytes());
        let xor: [u8; 8] = std::array::from_fn(|k| fields[k] ^ base[k]);
        stamp[PER_SECTOR..PER_SECTOR + 8].copy_from_slice(&fields);
        stamp[60..64].copy_from_slice(&(crc0 ^ table.per_sector_delta(xor)).to_le_bytes());
        sector[..STAMP_LEN].copy_from_slice(&stamp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_the_bytes_record_rs_prepares() {
        let run = RunId([3; 16]);
        // 300 sectors: indexes past 255 change the index's second byte.
        for version in [1, 2] {
            let key = RunKey::for_version(run, version).unwrap();
            for (sectors, stream, seq) in [(1u32, 2, 99), (8, 2, 99), (9, 0, 1), (128, 9, 1 << 40)]
                .into_iter()
                .chain([(300, u16::MAX, u64::MAX)])
            {
                let rec = RecordId {
                    stream,
                    seq,
                    offset: 4096 * seq.min(1 << 20),
                    sectors,
                    write_time_ns: 0,
                };
                let mut want = vec![0u8; sectors as usize * SECTOR];
                crate::record::prepare_record(&mut want, &key, run, &rec);
                let mut got = vec![0u8; want.len()];
                prepare_record(&mut got, &key, run, &rec);
                assert!(want == got, "version {version}, {sectors} sectors");
            }
        }
    }
}
