//! The record content, generated eight BLAKE3 output blocks at a time with AVX2.
//!
//! Why: the writer's generator thread spent most of its time in BLAKE3's XOF (the
//! record content is the run key's XOF for (stream, seq), docs/format.md), and the
//! `blake3` crate computes XOF output one 64-byte block per call except with AVX-512.
//! Each output block is an independent compression of the same root node with a
//! different counter, so eight lanes of AVX2 compute eight blocks at once, about four
//! times faster on this machine. The root node is known in advance: the input (stream
//! u16 LE, seq u64 LE: 10 bytes) is one chunk of one block, keyed with the run key, so
//! its chaining value is the key, its block the 10 bytes zero-padded, its length 10 and
//! its flags CHUNK_START | CHUNK_END | ROOT | KEYED_HASH. Without AVX2 the `blake3`
//! crate's reader is used. Same bytes either way (tested against `record`).

use super::stamp::{PER_SECTOR, StampCrc};
use crate::record::{RecordId, RunId, RunKey, SECTOR, STAMP_LEN, encode_stamp};

const IV: [u32; 8] = [
    0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
];
const CHUNK_START: u32 = 1;
const CHUNK_END: u32 = 2;
const ROOT: u32 = 8;
const KEYED_HASH: u32 = 16;
const BLOCK: usize = 64;

/// Fills `buf` with the content XOF of record (stream, seq) from byte 0, the bytes
/// `key.content_stream(stream, seq).fill(buf)` gives.
pub fn fill_content(key: &RunKey, stream: u16, seq: u64, buf: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if buf.len() % (8 * BLOCK) == 0 && std::arch::is_x86_feature_detected!("avx2") {
        let cv: [u32; 8] = words(key.key_bytes());
        let mut input = [0u8; BLOCK];
        input[..2].copy_from_slice(&stream.to_le_bytes());
        input[2..10].copy_from_slice(&seq.to_le_bytes());
        let m: [u32; 3] = words(&input[..12]);
        for (i, out) in buf.chunks_exact_mut(8 * BLOCK).enumerate() {
            // SAFETY: AVX2 is present (checked above); `out` is 512 bytes.
            unsafe { avx2::xof8(&cv, &m, (i * 8) as u64, out) };
        }
        return;
    }
    key.content_stream(stream, seq).fill(buf);
}

/// `record::prepare_record` with the content from [`fill_content`]: the same bytes.
pub fn prepare_record(buf: &mut [u8], key: &RunKey, run: RunId, rec: &RecordId) {
    assert_eq!(
        buf.len() as u64,
        rec.len_bytes(),
        "buffer must hold the whole record"
    );
    fill_content(key, rec.stream, rec.seq, buf);
    let (first, rest) = buf.split_at_mut(SECTOR);
    encode_stamp(first, run, rec, 0);
    // The other sectors' stamps differ from the first only in index and content CRC
    // ([PER_SECTOR, +8)): copy it and patch its CRC by table instead of rehashing.
    let mut stamp = [0u8; STAMP_LEN];
    stamp.copy_from_slice(&first[..STAMP_LEN]);
    let base: [u8; 8] = stamp[PER_SECTOR..PER_SECTOR + 8].try_into().unwrap();
    let crc0 = u32::from_le_bytes(stamp[60..64].try_into().unwrap());
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

/// Little-endian words of `b` (N = b.len() / 4).
fn words<const N: usize>(b: &[u8]) -> [u32; N] {
    assert_eq!(b.len(), 4 * N);
    std::array::from_fn(|i| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()))
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    #[inline(always)]
    unsafe fn rot16(x: __m256i) -> __m256i {
        unsafe {
            _mm256_shuffle_epi8(
                x,
                _mm256_set_epi8(
                    13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, 2, 13, 12, 15, 14, 9, 8, 11,
                    10, 5, 4, 7, 6, 1, 0, 3, 2,
                ),
            )
        }
    }
    #[inline(always)]
    unsafe fn rot8(x: __m256i) -> __m256i {
        unsafe {
            _mm256_shuffle_epi8(
                x,
                _mm256_set_epi8(
                    12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, 1, 12, 15, 14, 13, 8, 11,
                    10, 9, 4, 7, 6, 5, 0, 3, 2, 1,
                ),
            )
        }
    }
    #[inline(always)]
    unsafe fn rot12(x: __m256i) -> __m256i {
        unsafe { _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20)) }
    }
    #[inline(always)]
    unsafe fn rot7(x: __m256i) -> __m256i {
        unsafe { _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25)) }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn g(
        v: &mut [__m256i; 16],
        a: usize,
        b: usize,
        c: usize,
        d: usize,
        x: __m256i,
        y: __m256i,
    ) {
        unsafe {
            v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), x);
            v[d] = rot16(_mm256_xor_si256(v[d], v[a]));
            v[c] = _mm256_add_epi32(v[c], v[d]);
            v[b] = rot12(_mm256_xor_si256(v[b], v[c]));
            v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), y);
            v[d] = rot8(_mm256_xor_si256(v[d], v[a]));
            v[c] = _mm256_add_epi32(v[c], v[d]);
            v[b] = rot7(_mm256_xor_si256(v[b], v[c]));
        }
    }

    /// Output blocks `counter .. counter + 8` of the root node (cv, m) into `out`.
    #[target_feature(enable = "avx2")]
    /// `m`: the block's first three words; the other 13 are zero (a 10-byte input).
    pub unsafe fn xof8(cv: &[u32; 8], m: &[u32; 3], counter: u64, out: &mut [u8]) {
        assert_eq!(out.len(), 8 * BLOCK);
        unsafe {
            let splat = |x: u32| _mm256_set1_epi32(x as i32);
            let mut lo = [0i32; 8];
            let mut hi = [0i32; 8];
            for (j, (l, h)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let c = counter + j as u64;
                *l = c as u32 as i32;
                *h = (c >> 32) as u32 as i32;
            }
            let mut v = [
                splat(cv[0]),
                splat(cv[1]),
                splat(cv[2]),
                splat(cv[3]),
                splat(cv[4]),
                splat(cv[5]),
                splat(cv[6]),
                splat(cv[7]),
                splat(IV[0]),
                splat(IV[1]),
                splat(IV[2]),
                splat(IV[3]),
                _mm256_loadu_si256(lo.as_ptr() as *const __m256i),
                _mm256_loadu_si256(hi.as_ptr() as *const __m256i),
                splat(10),
                splat(CHUNK_START | CHUNK_END | ROOT | KEYED_HASH),
            ];
            // The rounds written out with constant message indexes: the input is 10
            // bytes, so only words 0..3 of the block are nonzero (`m`), and with constant indexes
            // the compiler drops the additions of the 13 zero words.
            let zero = _mm256_setzero_si256();
            let mv: [__m256i; 16] = [
                splat(m[0]),
                splat(m[1]),
                splat(m[2]),
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
                zero,
            ];
            macro_rules! round {
                ($($i:literal),*) => {{
                    let s = [$($i),*];
                    g(&mut v, 0, 4, 8, 12, mv[s[0]], mv[s[1]]);
                    g(&mut v, 1, 5, 9, 13, mv[s[2]], mv[s[3]]);
                    g(&mut v, 2, 6, 10, 14, mv[s[4]], mv[s[5]]);
                    g(&mut v, 3, 7, 11, 15, mv[s[6]], mv[s[7]]);
                    g(&mut v, 0, 5, 10, 15, mv[s[8]], mv[s[9]]);
                    g(&mut v, 1, 6, 11, 12, mv[s[10]], mv[s[11]]);
                    g(&mut v, 2, 7, 8, 13, mv[s[12]], mv[s[13]]);
                    g(&mut v, 3, 4, 9, 14, mv[s[14]], mv[s[15]]);
                }};
            }
            round!(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            round!(2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8);
            round!(3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1);
            round!(10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6);
            round!(12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4);
            round!(9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7);
            round!(11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13);
            // Output words: w[i] = v[i] ^ v[i + 8] and w[i + 8] = v[i + 8] ^ cv[i], each
            // holding word i of the eight blocks. Two 8x8 transposes turn them into the
            // blocks' own order, stored straight to `out` (a scalar word-by-word copy was
            // a third of this function's time).
            let mut lo = [zero; 8];
            let mut hi = [zero; 8];
            for i in 0..8 {
                lo[i] = _mm256_xor_si256(v[i], v[i + 8]);
                hi[i] = _mm256_xor_si256(v[i + 8], splat(cv[i]));
            }
            let lo = transpose8(lo);
            let hi = transpose8(hi);
            let p = out.as_mut_ptr();
            for j in 0..8 {
                _mm256_storeu_si256(p.add(j * BLOCK) as *mut __m256i, lo[j]);
                _mm256_storeu_si256(p.add(j * BLOCK + 32) as *mut __m256i, hi[j]);
            }
        }
    }

    /// Transposes an 8x8 matrix of u32 held as eight rows: row j of the result holds
    /// element j of every input row.
    #[inline(always)]
    unsafe fn transpose8(a: [__m256i; 8]) -> [__m256i; 8] {
        unsafe {
            let t0 = _mm256_unpacklo_epi32(a[0], a[1]);
            let t1 = _mm256_unpackhi_epi32(a[0], a[1]);
            let t2 = _mm256_unpacklo_epi32(a[2], a[3]);
            let t3 = _mm256_unpackhi_epi32(a[2], a[3]);
            let t4 = _mm256_unpacklo_epi32(a[4], a[5]);
            let t5 = _mm256_unpackhi_epi32(a[4], a[5]);
            let t6 = _mm256_unpacklo_epi32(a[6], a[7]);
            let t7 = _mm256_unpackhi_epi32(a[6], a[7]);
            let u0 = _mm256_unpacklo_epi64(t0, t2);
            let u1 = _mm256_unpackhi_epi64(t0, t2);
            let u2 = _mm256_unpacklo_epi64(t1, t3);
            let u3 = _mm256_unpackhi_epi64(t1, t3);
            let u4 = _mm256_unpacklo_epi64(t4, t6);
            let u5 = _mm256_unpackhi_epi64(t4, t6);
            let u6 = _mm256_unpacklo_epi64(t5, t7);
            let u7 = _mm256_unpackhi_epi64(t5, t7);
            [
                _mm256_permute2x128_si256(u0, u4, 0x20),
                _mm256_permute2x128_si256(u1, u5, 0x20),
                _mm256_permute2x128_si256(u2, u6, 0x20),
                _mm256_permute2x128_si256(u3, u7, 0x20),
                _mm256_permute2x128_si256(u0, u4, 0x31),
                _mm256_permute2x128_si256(u1, u5, 0x31),
                _mm256_permute2x128_si256(u2, u6, 0x31),
                _mm256_permute2x128_si256(u3, u7, 0x31),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_the_bytes_record_rs_prepares() {
        let run = RunId([3; 16]);
        let key = RunKey::new(run);
        // 300 sectors: indexes past 255 change the index's second byte.
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
            assert!(want == got, "{sectors} sectors");
        }
    }

    #[test]
    fn same_bytes_as_the_blake3_reader() {
        for run in [[0u8; 16], [0xa5; 16], *b"0123456789abcdef"] {
            let key = RunKey::new(RunId(run));
            for (stream, seq) in [(0u16, 1u64), (7, 123_456_789), (u16::MAX, u64::MAX)] {
                for len in [512usize, 4096, 64 * 1024 + 512] {
                    let mut want = vec![0u8; len];
                    key.content_stream(stream, seq).fill(&mut want);
                    let mut got = vec![0u8; len];
                    fill_content(&key, stream, seq, &mut got);
                    assert!(want == got, "stream {stream} seq {seq} len {len}");
                }
            }
        }
    }
}
