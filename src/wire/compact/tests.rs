//! The compact ack codec: the cases both codecs share (module `wire::codec_tests`), the
//! size promise (<= 4 bytes per ack for a sequential run) and strict decoding
//! of its own header, lanes and exceptions.

use super::*;
use crate::wire::codec_tests::{Codec, Mix, codec_cases, decode_all, payload, sequential_acks};
use crate::wire::msg::encode_acks_compact_into;

const CODEC: Codec = Codec {
    frame: FrameType::CompactAcks,
    encode: encode_acks_compact_into,
    decode: decode_compact_into,
    sample: sample_frame,
    shapes: &[
        (4, &[8], 20_000),
        (16, &[1, 8, 128], 20_000),
        (17, &[8], 20_000),
        (64, &[8], 20_000),
    ],
    plausible,
    lanes_at: 16,
    width_at: 17,
};

codec_cases!(CODEC);

#[test]
fn sequential_one_stream_is_at_most_4_bytes_per_ack() {
    // 100k acks of a fast device (flush 2-20 us), a ring of 64k records (it wraps).
    let acks = sequential_acks(100_000, 1, &[8], 65_536, (2_000, 20_000), &mut Mix(1));
    let (bytes, types) = CODEC.round_trip(&acks);
    let per_ack = bytes as f64 / acks.len() as f64;
    assert!(per_ack <= 4.0, "{per_ack:.2} bytes per ack");
    assert!(types.iter().all(|&t| t == FrameType::CompactAcks));
}

/// A compact frame of a few acks with exceptions, and those acks.
fn sample_frame() -> (Vec<u8>, Vec<Ack>) {
    let mut acks = sequential_acks(50, 3, &[8, 16], 1_000, (2_000, 90_000), &mut Mix(4));
    // A stall: its flush delta, and the next write after it, need exceptions.
    acks[10].flushed_ns += 1 << 40;
    let mut out = Vec::new();
    encode_acks_compact_into(&mut out, 0, &acks);
    assert_eq!(decode_all(&out).1, vec![FrameType::CompactAcks]);
    (out, acks)
}

#[test]
fn decoder_refuses_every_malformed_payload() {
    // Every cut and a byte more: the shared `decoder_refuses_every_cut_and_a_byte_more`.
    let (f, _) = sample_frame();
    let p = payload(&f);
    let edit = |at: usize, v: u8| {
        let mut q = p.to_vec();
        q[at] = v;
        let mut into = vec![];
        decode_compact_into(&q, &mut into)
    };
    assert!(edit(8, 49).is_err() && edit(9, 1).is_err(), "count changed");
    assert!(edit(12, p[12] + 1).is_err(), "exception count changed");
    let nexc = p[12] as usize;
    assert!(nexc >= 2, "the sample frame has exceptions to edit");
    let bits_end = p.len() - nexc * EXCEPTION_BYTES;
    // Nonzero padding: the last byte's unused high bits.
    let per_ack = bits_per_ack(3, [p[17], p[18], p[19]]);
    if 50 * per_ack % 8 != 0 {
        let mut q = p.to_vec();
        q[bits_end - 1] |= 0x80;
        assert!(decode_compact_into(&q, &mut vec![]).is_err(), "padding");
    }
    let exc = |e: usize, at: usize, v: u8| {
        let mut q = p.to_vec();
        q[bits_end + e * EXCEPTION_BYTES + at] = v;
        decode_compact_into(&q, &mut vec![])
    };
    assert!(exc(0, 4, 3).is_err(), "field 3");
    assert!(exc(0, 0, 50).is_err(), "ack past the frame");
    // The second exception moved before the first: out of order.
    assert!(exc(1, 0, 0).is_err() || p[bits_end] == 0, "out of order");
    let mut q = p.to_vec();
    q[bits_end + 5..bits_end + 13].copy_from_slice(&[0; 8]);
    assert!(
        decode_compact_into(&q, &mut vec![]).is_err(),
        "zero high bits"
    );
    let w = (p[17 + p[bits_end + 4] as usize] & !WIDTH_ZIGZAG) as u32;
    q[bits_end + 5..bits_end + 13].copy_from_slice(&(1u64 << (64 - w)).to_le_bytes());
    assert!(
        decode_compact_into(&q, &mut vec![]).is_err(),
        "high bits past u64"
    );
    // A lane index past the lanes: 3 lanes in 2 bits leave index 3 free.
    let mut q = p.to_vec();
    let bits_at = COMPACT_HEADER_BYTES + 3 * LANE_BYTES;
    assert_eq!(p[16], 3, "three lanes");
    q[bits_at] |= 3;
    assert!(decode_compact_into(&q, &mut vec![]).is_err(), "lane 3 of 3");
    // An offset that makes a record end past u64::MAX.
    let mut q = p.to_vec();
    q[COMPACT_HEADER_BYTES + 6 + 8..COMPACT_HEADER_BYTES + 22]
        .copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(
        decode_compact_into(&q, &mut vec![]).is_err(),
        "end past u64"
    );
}

/// A compact frame's length follows from its header exactly: a byte more or less is
/// not plausible (the shared case checks the rest).
#[test]
fn plausible_takes_only_the_exact_length() {
    let (f, _) = sample_frame();
    let len = f.len() - frame::LEN_BYTES - frame::CRC_BYTES;
    let p = &f[frame::LEN_BYTES + 1..];
    assert!(!plausible(len + 1, &p[..24]));
    assert!(!plausible(len - 1, &p[..24]));
}
