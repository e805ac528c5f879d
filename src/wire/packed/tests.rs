//! The packed ack codec: exact round trips on every shape of run, smaller than
//! CompactAcks for a witness's small group commits, strict decoding.

use super::*;
use crate::record::RecordId;
use crate::wire::compact::tests::{Mix, decode_all, sequential_acks};
use crate::wire::frame::Decoded;
use crate::wire::msg::{ACK_ENTRY_BYTES, encode_acks_compact_into, encode_acks_packed_into};

fn round_trip(acks: &[Ack]) -> (usize, Vec<FrameType>) {
    let mut out = Vec::new();
    encode_acks_packed_into(&mut out, 0, acks);
    let (back, types) = decode_all(&out);
    assert!(back == acks, "decoded acks differ from the encoded ones");
    (out.len(), types)
}

/// Bytes a witness's commits of `batch` acks take, each encoded on its own.
fn per_commit_bytes(acks: &[Ack], batch: usize, enc: fn(&mut Vec<u8>, u64, &[Ack])) -> usize {
    let mut out = Vec::new();
    for (i, c) in acks.chunks(batch).enumerate() {
        enc(&mut out, (i * batch) as u64, c);
    }
    out.len()
}

/// Issue 15 in the witness's own log: commits of ~90 acks (what arrives during one
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

#[test]
fn every_shape_round_trips_smaller_than_plain() {
    for (streams, sizes, batch) in [
        (1u16, &[8u32][..], 1024),
        (4, &[8], 90),
        (16, &[1, 8, 128], 300),
        (17, &[8], 7),
        (64, &[8], 2000),
        (200, &[8], 500),
    ] {
        let acks = sequential_acks(
            20_000,
            streams,
            sizes,
            1_000,
            (20_000, 2_000_000),
            &mut Mix(22),
        );
        let mut bytes = 0;
        for c in acks.chunks(batch) {
            bytes += round_trip(c).0;
        }
        let per_ack = bytes as f64 / acks.len() as f64;
        eprintln!("{streams} streams, sizes {sizes:?}, batch {batch}: {per_ack:.2} B/ack");
        assert!(per_ack < ACK_ENTRY_BYTES as f64 / 2.0, "{per_ack:.2}");
    }
}

#[test]
fn random_placement_falls_back_to_plain_frames() {
    let mut mix = Mix(23);
    let mut acks = sequential_acks(5_000, 1, &[8], 1 << 20, (2_000, 20_000), &mut mix);
    for a in &mut acks {
        a.record.offset = mix.below(1 << 20) * 4096;
    }
    let (_, types) = round_trip(&acks);
    assert!(types.iter().all(|&t| t == FrameType::Acks), "{types:?}");
}

#[test]
fn extreme_values_round_trip() {
    let base = Ack {
        record: RecordId {
            stream: u16::MAX,
            seq: u64::MAX - 3,
            offset: u64::MAX - 4 * 512 * 9,
            sectors: 9,
            write_time_ns: u64::MAX - 5,
        },
        flushed_ns: 3,
    };
    let mut acks = vec![base];
    for k in 1..4u64 {
        let mut a = base;
        a.record.seq += k;
        a.record.offset += k * 9 * 512;
        // Times that run backwards and wrap: a clock step must not lose an ack.
        a.record.write_time_ns = k.wrapping_mul(0x8000_0000_0000_0001);
        a.flushed_ns = u64::MAX - k;
        acks.push(a);
    }
    for (i, sectors) in [(0u64, u32::MAX), (1, 0), (2, 1)] {
        acks.push(Ack {
            record: RecordId {
                stream: 7,
                seq: i,
                offset: [0, u32::MAX as u64 * 512, u32::MAX as u64 * 512][i as usize],
                sectors,
                write_time_ns: 0,
            },
            flushed_ns: 0,
        });
    }
    let (_, types) = round_trip(&acks);
    assert!(types.contains(&FrameType::PackedAcks), "{types:?}");
    let mut at_end = vec![base, base];
    at_end[0].record.seq = u64::MAX;
    at_end[1].record.seq = 0;
    round_trip(&at_end);
    round_trip(&[]);
}

/// A packed frame of a few acks with exceptions.
fn sample_frame() -> Vec<u8> {
    let mut acks = sequential_acks(50, 3, &[8, 16], 1_000, (2_000, 90_000), &mut Mix(24));
    acks[10].flushed_ns += 1 << 40;
    acks[30].flushed_ns += 1 << 20;
    let mut out = Vec::new();
    encode_acks_packed_into(&mut out, 7, &acks);
    assert_eq!(decode_all_from(&out, 7), acks);
    out
}

fn decode_all_from(bytes: &[u8], first: u64) -> Vec<Ack> {
    let Decoded::Frame(f) = frame::decode(bytes) else {
        panic!("not one frame");
    };
    assert_eq!(f.ty, FrameType::PackedAcks);
    assert_eq!(f.len_bytes, bytes.len(), "one frame");
    let mut into = vec![];
    assert_eq!(decode_packed_into(f.payload, &mut into).unwrap(), first);
    into
}

fn payload(f: &[u8]) -> &[u8] {
    &f[frame::LEN_BYTES + 1..f.len() - frame::CRC_BYTES]
}

#[test]
fn every_bit_flip_and_every_cut_of_a_frame_is_caught() {
    let f = sample_frame();
    for bit in 0..f.len() * 8 {
        let mut g = f.clone();
        g[bit / 8] ^= 1 << (bit % 8);
        assert!(
            !matches!(frame::decode(&g), Decoded::Frame(fr) if fr.len_bytes == f.len()),
            "flip of bit {bit} went unnoticed"
        );
    }
    for cut in 0..f.len() {
        assert!(
            matches!(frame::decode(&f[..cut]), Decoded::NeedMore { .. }),
            "cut at {cut}"
        );
    }
}

/// Past the CRC (a forged frame, or a bug): every payload edit that is not what the
/// encoder writes is refused, and nothing is kept from a refused payload.
#[test]
fn decoder_refuses_malformed_payloads() {
    let f = sample_frame();
    let p = payload(&f);
    let dec = |q: &[u8]| {
        let mut into = vec![];
        let r = decode_packed_into(q, &mut into);
        if r.is_err() {
            assert!(into.is_empty(), "nothing is kept from a refused payload");
        }
        r
    };
    assert!(dec(p).is_ok());
    for cut in 0..p.len() {
        assert!(dec(&p[..cut]).is_err(), "cut {cut}");
    }
    let mut longer = p.to_vec();
    longer.push(0);
    assert!(dec(&longer).is_err(), "a byte more");
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
    assert!(edit(3, 0).is_err(), "no lanes");
    assert!(edit(3, MAX_LANES as u8 + 1).is_err(), "too many lanes");
    // Widths follow the base time (bytes 4..12).
    assert!(edit(12, 65).is_err(), "width above 64");
    assert!(
        edit(12, WIDTH_ZIGZAG | 65).is_err(),
        "zigzag width above 64"
    );
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
    // Every single bit flip either is refused or gives other acks: no two encodings of
    // the same acks (padding, a lane past the lanes, a width's spare bit).
    let mut flipped = 0;
    for at in 0..p.len() {
        for bit in 0..8 {
            let mut q = p.to_vec();
            q[at] ^= 1 << bit;
            let mut a = vec![];
            if decode_packed_into(&q, &mut a) == Ok(7) && a == decode_all_from(&f, 7) {
                flipped += 1;
            }
        }
    }
    assert_eq!(flipped, 0, "a bit flip that decodes to the same acks");
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

#[test]
fn plausible_accepts_what_the_encoder_writes_and_little_else() {
    let f = sample_frame();
    let len = f.len() - frame::LEN_BYTES - frame::CRC_BYTES;
    let p = &f[frame::LEN_BYTES + 1..];
    assert!(plausible(len, &p[..24]));
    assert!(!plausible(12, &p[..24]), "too short for its header");
    let mut q = p[..24].to_vec();
    q[3] = 0;
    assert!(!plausible(len, &q), "no lanes");
    q[3] = 3;
    q[1] = 0;
    assert!(!plausible(len, &q), "no acks");
}
