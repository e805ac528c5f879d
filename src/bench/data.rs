//! The bytes bench writes. Why random: a compressing or deduplicating controller would
//! otherwise write less than it is given and look faster than it is.

use crate::rng::Rng;

/// Fills `buf` with incompressible bytes, so a compressing controller cannot cheat.
pub(super) fn fill_random(buf: &mut [u8], rng: &mut Rng) {
    for chunk in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}
