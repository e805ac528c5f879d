//! Record content: the incompressible bytes after each stamp, which verify regenerates
//! from the run id alone, sector by sector, to count flipped bits (docs/format.md
//! "Content"). Two generators, chosen by the format version a run was written in:
//!
//! - version 2 (written): one keyed BLAKE3 hash per record gives a 128-bit record key;
//!   every 8 content bytes are then one wyrand-style 64x64->128 multiply of a counter.
//!   About 0.7 µs per 4 KiB record, against ~1.3 µs for the BLAKE3 XOF in eight AVX2
//!   lanes (~5 µs with the `blake3` crate's reader): the content was the writer's
//!   largest cost (docs/performance.md "Writer").
//! - version 1 (read only): the keyed BLAKE3 XOF, so runs of older builds still verify.
//!
//! The content is there to defeat compressing and deduplicating controllers, not to be
//! secret or unforgeable: anyone with the run id can regenerate it.

use super::run_id::RunId;

/// The format version this build writes. Versions differ only in the content generator
/// (the stamp layout has not changed), so the version is defined with the generators.
pub const FORMAT_VERSION: u16 = 2;
/// The oldest format version this build still reads (and regenerates).
pub const OLDEST_READABLE_VERSION: u16 = 1;

/// wyrand's increment (the counter step) and output mask, as in wyhash.h final version
/// 4 (`wyrand`: `*seed += 0x2d358dccaa6c78a5; return _wymix(*seed, *seed ^
/// 0x8bb84b93962eacc9);`).
const WY_STEP: u64 = 0x2d35_8dcc_aa6c_78a5;
const WY_MASK: u64 = 0x8bb8_4b93_962e_acc9;

/// The content key of one run and the format version it generates: derived from the run
/// id, so verify regenerates the content from the run id and the run's format version.
#[derive(Clone)]
pub struct RunKey {
    version: u16,
    key: [u8; 32],
}

impl RunKey {
    /// The key for records this build writes ([`FORMAT_VERSION`]).
    pub fn new(run: RunId) -> RunKey {
        RunKey::for_version(run, FORMAT_VERSION).expect("this build writes a known version")
    }

    /// The key for a run written in format `version`; `None` for a version this build
    /// cannot regenerate.
    pub fn for_version(run: RunId, version: u16) -> Option<RunKey> {
        let context = match version {
            1 => "plugpull 2026 record content v1",
            2 => "plugpull 2026 record content v2",
            _ => return None,
        };
        let mut h = blake3::Hasher::new_derive_key(context);
        h.update(&run.0);
        Some(RunKey {
            version,
            key: *h.finalize().as_bytes(),
        })
    }

    /// The format version this key's content (and the stamps written with it) belong to.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The content generator of record (stream, seq), ready for random access.
    pub fn record(&self, stream: u16, seq: u64) -> RecordContent {
        let mut input = [0u8; 10];
        input[..2].copy_from_slice(&stream.to_le_bytes());
        input[2..].copy_from_slice(&seq.to_le_bytes());
        if self.version == 1 {
            let mut h = blake3::Hasher::new_keyed(&self.key);
            h.update(&input);
            return RecordContent::V1(h.finalize_xof());
        }
        let r = blake3::keyed_hash(&self.key, &input);
        let r = r.as_bytes();
        RecordContent::V2 {
            r0: crate::le::u64_at(r, 0),
            r1: crate::le::u64_at(r, 8),
        }
    }
}

/// One record's content, laid over the whole record: record byte `b` is content byte
/// `b` (each sector's first 64 bytes are then replaced by its stamp).
pub enum RecordContent {
    V1(blake3::OutputReader),
    /// The first 16 bytes of the record hash R, as two u64 LE.
    V2 {
        r0: u64,
        r1: u64,
    },
}

impl RecordContent {
    /// Writes content bytes `[from, from + buf.len())`. `from` and `buf.len()` must be
    /// multiples of 8 (the stamps and sectors are).
    pub fn fill_at(&mut self, from: u64, buf: &mut [u8]) {
        assert!(
            from % 8 == 0 && buf.len() % 8 == 0,
            "content is drawn in words"
        );
        match self {
            RecordContent::V1(xof) => {
                xof.set_position(from);
                xof.fill(buf);
            }
            RecordContent::V2 { r0, r1 } => v2_words(*r0, *r1, from / 8, buf),
        }
    }
}

/// Content word j (u64 LE at record byte 8j) of version 2: wyrand's output for the
/// counter `r0 + (j + 1) * WY_STEP`, with the multiply's second operand also keyed by
/// `r1` (with r1 = 0 this is exactly wyrand seeded with r0).
fn v2_words(r0: u64, r1: u64, first_word: u64, buf: &mut [u8]) {
    let word = |s: u64| mum(s ^ WY_MASK, s ^ r1).to_le_bytes();
    let mut s = r0.wrapping_add(first_word.wrapping_add(1).wrapping_mul(WY_STEP));
    // Four words per step from four counters: a one-word loop lets LLVM vectorise the
    // counter into SSE2 and shuffle every product in and out (12.7 instructions a word,
    // 9.9 this way, by callgrind).
    let mut quads = buf.chunks_exact_mut(32);
    for q in &mut quads {
        let [s1, s2, s3] = [1u64, 2, 3].map(|k| s.wrapping_add(k.wrapping_mul(WY_STEP)));
        q[0..8].copy_from_slice(&word(s));
        q[8..16].copy_from_slice(&word(s1));
        q[16..24].copy_from_slice(&word(s2));
        q[24..32].copy_from_slice(&word(s3));
        s = s.wrapping_add(WY_STEP.wrapping_mul(4));
    }
    for out in quads.into_remainder().chunks_exact_mut(8) {
        out.copy_from_slice(&word(s));
        s = s.wrapping_add(WY_STEP);
    }
}

/// wyhash's `mum` folded: the low and high halves of the 128-bit product, xored.
fn mum(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    (p as u64) ^ ((p >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// wyrand as wyhash.h (final version 4) defines it: `*seed += WY_STEP;
    /// return _wymix(*seed, *seed ^ WY_MASK);` with `_wymix` = mum folded. With
    /// r1 = 0 the version 2 words must be exactly that stream, so the constants and the
    /// counter are the ones wyrand's quality claims are about.
    #[test]
    fn v2_with_r1_zero_is_wyrand() {
        let seed0 = 0x0123_4567_89ab_cdefu64;
        let mut seed = seed0;
        let mut want = Vec::new();
        for _ in 0..64 {
            seed = seed.wrapping_add(WY_STEP);
            want.extend_from_slice(&mum(seed, seed ^ WY_MASK).to_le_bytes());
        }
        let mut got = vec![0u8; want.len()];
        v2_words(seed0, 0, 0, &mut got);
        assert_eq!(got, want);
        // Random access: words 10.. alone are the same words.
        let mut tail = vec![0u8; want.len() - 80];
        v2_words(seed0, 0, 10, &mut tail);
        assert_eq!(tail, want[80..]);
    }

    #[test]
    fn versions_and_runs_give_different_content() {
        let run = RunId([1; 16]);
        let fill = |k: &RunKey, stream, seq| {
            let mut b = [0u8; 64];
            k.record(stream, seq).fill_at(0, &mut b);
            b
        };
        let v1 = RunKey::for_version(run, 1).unwrap();
        let v2 = RunKey::new(run);
        let other = RunKey::new(RunId([2; 16]));
        assert_eq!(v2.version(), 2);
        assert_ne!(fill(&v1, 0, 1), fill(&v2, 0, 1));
        assert_ne!(fill(&v2, 0, 1), fill(&other, 0, 1));
        assert_ne!(fill(&v2, 0, 1), fill(&v2, 1, 1));
        assert_ne!(fill(&v2, 0, 1), fill(&v2, 0, 2));
        assert!(RunKey::for_version(run, 3).is_none());
        assert!(RunKey::for_version(run, 0).is_none());
    }
}
