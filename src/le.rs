//! Little-endian integers at fixed offsets of a byte slice. Why a module of its own:
//! every format plugpull reads (sector stamps, wire frames, ack logs, journals, markers)
//! is little-endian at known offsets, and each read was the same slice-to-array
//! conversion, spelled out at forty places. Like indexing, a read past the end of the
//! slice panics: callers check a frame's length before they read its fields.

/// The `N` bytes of `b` from `at` on.
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[at..at + N]);
    a
}

pub fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes_at(b, at))
}

pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes_at(b, at))
}

pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes_at(b, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_at_the_offset() {
        let b = [0xff, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(u16_at(&b, 1), 0x0201);
        assert_eq!(u32_at(&b, 1), 0x0403_0201);
        assert_eq!(u64_at(&b, 1), 0x0807_0605_0403_0201);
    }

    #[test]
    #[should_panic]
    fn a_read_past_the_end_panics_as_indexing_does() {
        u32_at(&[1, 2, 3, 4], 1);
    }
}
