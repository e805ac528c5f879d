//! The compact ack codec: exact round trips on every shape of run, the fallback to plain
//! frames, strict decoding, and the size promise (issue 15: <= 4 bytes per ack for a
//! sequential run).

use super::*;
use crate::wire::frame::Decoded;
use crate::wire::msg::{ACK_ENTRY_BYTES, Msg, encode_acks_compact_into};

/// A small deterministic generator (splitmix64), so every test input is reproducible.
pub(crate) struct Mix(pub u64);

impl Mix {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a writer with `streams` streams, placement sequential over a ring of
/// `ring_records` records per stream, acknowledges: each stream's records follow one
/// another, streams interleave at random, sizes are `sizes_sectors[..]`, times advance by
/// a write gap and a flush latency drawn from the given ranges (ns), with a rare stall.
pub(crate) fn sequential_acks(
    n: usize,
    streams: u16,
    sizes_sectors: &[u32],
    ring_records: u64,
    flush_ns: (u64, u64),
    mix: &mut Mix,
) -> Vec<Ack> {
    let mut next: Vec<(u64, u64)> = vec![(0, 0); streams as usize];
    let mut clock = 1_764_500_000_000_000_000u64;
    let share = ring_records * 64 * 512;
    (0..n)
        .map(|_| {
            let s = mix.below(streams as u64) as u16;
            let (seq, at) = &mut next[s as usize];
            let sectors = sizes_sectors[mix.below(sizes_sectors.len() as u64) as usize];
            let len = sectors as u64 * 512;
            if *at + len > share {
                *at = 0;
            }
            let write = clock + 300 + mix.below(2_000);
            let stall = if mix.below(5_000) == 0 { 40_000_000 } else { 0 };
            let flushed = write + flush_ns.0 + mix.below(flush_ns.1 - flush_ns.0) + stall;
            clock = flushed;
            let a = Ack {
                record: RecordId {
                    stream: s,
                    seq: *seq,
                    offset: s as u64 * share + *at,
                    sectors,
                    write_time_ns: write,
                },
                flushed_ns: flushed,
            };
            *seq += 1;
            *at += len;
            a
        })
        .collect()
}

/// Every ack the frames in `bytes` hold, with the frame types seen.
pub(crate) fn decode_all(mut bytes: &[u8]) -> (Vec<Ack>, Vec<FrameType>) {
    let (mut acks, mut types) = (Vec::new(), Vec::new());
    let mut next = 0;
    while !bytes.is_empty() {
        let Decoded::Frame(f) = frame::decode(bytes) else {
            panic!("the encoder wrote a frame that does not decode");
        };
        types.push(f.ty);
        match Msg::decode(&f).expect("the encoder's frame decodes") {
            Msg::Acks { first, acks: a } => {
                assert_eq!(first, next, "frames number the acks contiguously");
                next += a.len() as u64;
                acks.extend(a);
            }
            other => panic!("not acks: {other:?}"),
        }
        bytes = &bytes[f.len_bytes..];
    }
    (acks, types)
}

fn round_trip(acks: &[Ack]) -> (usize, Vec<FrameType>) {
    let mut out = Vec::new();
    encode_acks_compact_into(&mut out, 0, acks);
    let (back, types) = decode_all(&out);
    assert!(back == acks, "decoded acks differ from the encoded ones");
    (out.len(), types)
}

#[test]
fn sequential_one_stream_is_at_most_4_bytes_per_ack() {
    // 100k acks of a fast device (flush 2-20 us), a ring of 64k records (it wraps).
    let acks = sequential_acks(100_000, 1, &[8], 65_536, (2_000, 20_000), &mut Mix(1));
    let (bytes, types) = round_trip(&acks);
    let per_ack = bytes as f64 / acks.len() as f64;
    assert!(per_ack <= 4.0, "{per_ack:.2} bytes per ack");
    assert!(types.iter().all(|&t| t == FrameType::CompactAcks));
}

#[test]
fn interleaved_streams_and_mixed_sizes_round_trip_smaller_than_plain() {
    for (streams, sizes) in [
        (4u16, &[8u32][..]),
        (16, &[1, 8, 128]),
        (17, &[8]),
        (64, &[8]),
    ] {
        let acks = sequential_acks(
            20_000,
            streams,
            sizes,
            1_000,
            (20_000, 2_000_000),
            &mut Mix(2),
        );
        let (bytes, _) = round_trip(&acks);
        let per_ack = bytes as f64 / acks.len() as f64;
        eprintln!("{streams} streams, sizes {sizes:?}: {per_ack:.2} bytes per ack");
        assert!(
            per_ack < ACK_ENTRY_BYTES as f64 / 2.0,
            "{streams} streams, sizes {sizes:?}: {per_ack:.2} bytes per ack"
        );
    }
}

#[test]
fn more_streams_than_lanes_round_trip() {
    let acks = sequential_acks(5_000, 200, &[8], 1_000, (20_000, 90_000), &mut Mix(5));
    round_trip(&acks);
}

#[test]
fn random_placement_falls_back_to_plain_frames() {
    let mut mix = Mix(3);
    let mut acks = sequential_acks(5_000, 1, &[8], 1 << 20, (2_000, 20_000), &mut mix);
    for a in &mut acks {
        a.record.offset = mix.below(1 << 20) * 4096;
    }
    let (bytes, types) = round_trip(&acks);
    assert!(types.iter().all(|&t| t == FrameType::Acks), "{types:?}");
    assert!(bytes <= acks.len() * ACK_ENTRY_BYTES + 64);
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
    // A size change to the largest and to zero sectors, in a lane of their own.
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
    assert!(types.contains(&FrameType::CompactAcks), "{types:?}");
    // The last seq of u64 cannot be followed in its lane; the next ack goes elsewhere.
    let mut at_end = vec![base, base];
    at_end[0].record.seq = u64::MAX;
    at_end[1].record.seq = 0;
    round_trip(&at_end);
    round_trip(&[]);
}

/// A compact frame of a few acks, and its payload's offset in it.
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
fn every_bit_flip_and_every_cut_of_a_frame_is_caught() {
    let (f, _) = sample_frame();
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

#[test]
fn decoder_refuses_every_malformed_payload() {
    let (f, _) = sample_frame();
    let p = &f[frame::LEN_BYTES + 1..f.len() - frame::CRC_BYTES];
    let mut into = vec![];
    assert!(decode_compact_into(p, &mut into).is_ok());
    // Every truncation, and one byte more.
    for cut in 0..p.len() {
        into.clear();
        assert!(
            decode_compact_into(&p[..cut], &mut into).is_err(),
            "cut {cut}"
        );
        assert!(into.is_empty(), "nothing is kept from a refused payload");
    }
    let mut longer = p.to_vec();
    longer.push(0);
    assert!(decode_compact_into(&longer, &mut into).is_err());
    let edit = |at: usize, v: u8| {
        let mut q = p.to_vec();
        q[at] = v;
        let mut into = vec![];
        decode_compact_into(&q, &mut into)
    };
    assert!(edit(8, 49).is_err() && edit(9, 1).is_err(), "count changed");
    assert!(edit(12, p[12] + 1).is_err(), "exception count changed");
    assert!(edit(16, 0).is_err(), "no lanes");
    assert!(edit(16, MAX_LANES as u8 + 1).is_err(), "too many lanes");
    assert!(edit(17, 65).is_err(), "width above 64");
    assert!(
        edit(17, WIDTH_ZIGZAG | 65).is_err(),
        "zigzag width above 64"
    );
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

#[test]
fn plausible_accepts_what_the_encoder_writes_and_little_else() {
    let (f, _) = sample_frame();
    let len = f.len() - frame::LEN_BYTES - frame::CRC_BYTES;
    let p = &f[frame::LEN_BYTES + 1..];
    assert!(plausible(len, &p[..24]));
    assert!(!plausible(len + 1, &p[..24]));
    assert!(!plausible(len - 1, &p[..24]));
    let mut q = p[..24].to_vec();
    q[16] = 0;
    assert!(!plausible(len, &q));
}
