//! The packed ack codec: the cases both codecs share (module `wire::codec_tests`),
//! smaller than CompactAcks for a witness's small group commits, strict decoding of its
//! own header, varints and exceptions.

use super::*;
use crate::wire::codec_tests::{Codec, Mix, codec_cases, payload, sequential_acks};
use crate::wire::msg::{encode_acks_compact_into, encode_acks_packed_into};

const CODEC: Codec = Codec {
    frame: FrameType::PackedAcks,
    encode: encode_acks_packed_into,
    decode: decode_packed_into,
    sample: sample_frame,
    shapes: &[
        (1, &[8], 1024),
        (4, &[8], 90),
        (16, &[1, 8, 128], 300),
        (17, &[8], 7),
        (64, &[8], 2000),
        (200, &[8], 500),
    ],
    plausible,
    lanes_at: 3,
    // Widths follow the base time (bytes 4..12).
    width_at: 12,
};

codec_cases!(CODEC);

/// Bytes a witness's commits of `batch` acks take, each encoded on its own.
fn per_commit_bytes(acks: &[Ack], batch: usize, enc: fn(&mut Vec<u8>, u64, &[Ack])) -> usize {
    let mut out = Vec::new();
    for (i, c) in acks.chunks(batch).enumerate() {
        enc(&mut out, (i * batch) as u64, c);
    }
    out.len()
}

/// The 4 B/ack promise in the witness's own log: commits of ~90 acks (what arrives during one
/// journal fdatasync at ~90 000 acks/s), each its own frame, times at nanoseconds with
/// flushes of 4-20 us: at most 4 bytes an ack. CompactAcks frames take more.
#[test]
fn small_commits_cost_at_most_4_bytes_per_ack_and_less_than_compact() {
    let acks = sequential_acks(90_000, 1, &[8], 65_536, (4_000, 20_000), &mut Mix(21));
    let packed = per_commit_bytes(&acks, 90, encode_acks_packed_into) as f64 / 90_000.0;
    let compact = per_commit_bytes(&acks, 90, encode_acks_compact_into) as f64 / 90_000.0;
    eprintln!("commits of 90: packed {packed:.3}, compact {compact:.3} bytes per ack");
    assert!(packed <= 4.0, "{packed:.3} bytes per ack");
    assert!(
        packed < compact - 0.3,
        "packed {packed:.3}, compact {compact:.3}"
    );
}

/// A packed frame of a few acks with exceptions, numbered from 7, and those acks.
fn sample_frame() -> (Vec<u8>, Vec<Ack>) {
    let mut acks = sequential_acks(50, 3, &[8, 16], 1_000, (2_000, 90_000), &mut Mix(24));
    acks[10].flushed_ns += 1 << 40;
    acks[30].flushed_ns += 1 << 20;
    let mut out = Vec::new();
    encode_acks_packed_into(&mut out, 7, &acks);
    (out, acks)
}

/// Past the CRC (a forged frame, or a bug): every edit of its own header and
/// exceptions that is not what the encoder writes is refused, and nothing is kept from
/// a refused payload. Cuts, a byte more and single bit flips: the shared cases.
#[test]
fn decoder_refuses_malformed_payloads() {
    let (f, _) = sample_frame();
    let p = payload(&f);
    let dec = |q: &[u8]| {
        let mut into = vec![];
        let r = decode_packed_into(q, &mut into);
        if r.is_err() {
            assert!(into.is_empty(), "nothing is kept from a refused payload");
        }
        r
    };
    assert_eq!(dec(p).unwrap(), 7, "the first ack's number");
    // Header: first 7 (1 byte), count 50, exceptions, lanes at 3.
    assert_eq!(&p[..2], &[7, 50]);
    let nexc = p[2] as usize;
    assert!(nexc >= 2, "the sample has exceptions");
    let edit = |at: usize, v: u8| {
        let mut q = p.to_vec();
        q[at] = v;
        dec(&q)
    };
    assert!(
        edit(1, 49).is_err() && edit(1, 51).is_err(),
        "count changed"
    );
    assert!(edit(1, 0).is_err(), "no acks");
    assert!(edit(2, p[2] + 1).is_err(), "exception count changed");
    // A varint not in its shortest form: the count as 50|0x80, 0.
    let mut q = p.to_vec();
    q[1] = 50 | 0x80;
    q.insert(2, 0);
    assert!(dec(&q).is_err(), "count in two bytes");
    // The last exception: its high bits zeroed (not needed) or moved before the
    // previous one.
    let (last_place, last_high) = last_exception(p, nexc);
    let mut q = p.to_vec();
    q[last_high] = 0;
    q.truncate(last_high + 1);
    assert!(dec(&q).is_err(), "zero high bits");
    let mut q = p.to_vec();
    q[last_place] = 0;
    assert!(dec(&q).is_err() || p[last_place] == 0, "out of order");
}

/// Byte positions of the last exception's two varints (it is short: both < 128 here
/// unless the high bits are wide, so read from the end).
fn last_exception(p: &[u8], nexc: usize) -> (usize, usize) {
    // Walk the exceptions from their start: skip the header, references, lanes, bits.
    let mut c = Cursor { p, at: 0 };
    let h = header(&mut c).unwrap();
    c.bytes(8, "").unwrap();
    let mut widths = [0u8; 3];
    for w in &mut widths {
        *w = c.bytes(1, "").unwrap()[0] & !WIDTH_ZIGZAG;
        c.varint("").unwrap();
    }
    for _ in 0..h.lanes * 4 {
        c.varint("").unwrap();
    }
    let per_ack = lane_bits(h.lanes) as usize + widths.iter().map(|&w| w as usize).sum::<usize>();
    c.bytes((h.count * per_ack).div_ceil(8), "").unwrap();
    let mut last = (0, 0);
    for _ in 0..nexc {
        let place = c.at;
        c.varint("").unwrap();
        last = (place, c.at);
        c.varint("").unwrap();
    }
    assert_eq!(c.at, p.len());
    last
}

#[test]
fn varints_round_trip_and_refuse_overlong_forms() {
    for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
        let mut b = vec![];
        put_varint(&mut b, v);
        assert_eq!(b.len(), varint_bytes(v));
        let mut c = Cursor { p: &b, at: 0 };
        assert_eq!(c.varint("v").unwrap(), v);
        assert_eq!(c.at, b.len());
    }
    let refuse = |b: &[u8]| Cursor { p: b, at: 0 }.varint("v").is_err();
    assert!(refuse(&[0x80, 0]), "trailing zero byte");
    assert!(refuse(
        &[0xff; 9].iter().copied().chain([2]).collect::<Vec<_>>()
    ));
    assert!(refuse(&[0x80; 11]), "too long");
    assert!(refuse(&[0x80]), "cut");
}

/// A header that counts no acks is not plausible (the shared case checks the length and
/// the lane count).
#[test]
fn plausible_refuses_a_frame_of_no_acks() {
    let (f, _) = sample_frame();
    let len = f.len() - frame::LEN_BYTES - frame::CRC_BYTES;
    let p = &f[frame::LEN_BYTES + 1..];
    let mut q = p[..24].to_vec();
    q[1] = 0;
    assert!(!plausible(len, &q), "no acks");
}

/// `choose` as first written: every width against every histogram bin.
fn choose_every_bin(raw: &[u64]) -> Coding {
    let n = raw.len();
    let mut best = (
        usize::MAX,
        Coding {
            zigzag: false,
            reference: 0,
            width: 64,
            exceptions: 0,
        },
    );
    for zz in [false, true] {
        let t = |v: u64| if zz { zigzag(v as i64) } else { v };
        let reference = raw.iter().map(|&v| t(v)).min().unwrap_or(0);
        let mut hist = [0usize; 65];
        for &v in raw {
            hist[bits(t(v) - reference) as usize] += 1;
        }
        let fixed = 8 * varint_bytes(reference);
        let top = hist.iter().rposition(|&h| h > 0).unwrap_or(0);
        for w in 0..=top {
            let mut cost = fixed + n * w;
            let mut exceptions = 0;
            for (b, &h) in hist.iter().enumerate().take(top + 1).skip(w + 1) {
                cost += h * (EXCEPTION_INDEX_BITS + 8 * (b - w).div_ceil(7));
                exceptions += h;
            }
            if cost < best.0 {
                let c = Coding {
                    zigzag: zz,
                    reference,
                    width: w as u8,
                    exceptions,
                };
                best = (cost, c);
            }
        }
    }
    best.1
}

/// The faster `choose` (only the widths that occur) picks exactly the coding of the
/// original for columns of every shape a log sees: steady, noisy, outliers, negative
/// deltas, huge values, all equal.
#[test]
fn choose_only_used_widths_picks_the_same_coding() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for case in 0..3000 {
        let n = 1 + (next() % 300) as usize;
        let shape = case % 6;
        let col: Vec<u64> = (0..n)
            .map(|_| {
                let r = next();
                match shape {
                    0 => 1000 + r % 64,
                    1 => r >> (r % 64),
                    2 if r % 17 == 0 => r,
                    2 => 5000 + r % 300,
                    3 => (-((r % 2000) as i64) + 900) as u64,
                    4 => 42,
                    _ => (r % 3) << (r % 61),
                }
            })
            .collect();
        assert_eq!(choose(&col), choose_every_bin(&col), "case {case}: {col:?}");
    }
}
