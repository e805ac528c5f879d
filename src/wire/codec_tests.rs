//! Test cases both ack codecs (CompactAcks, module `compact`; PackedAcks, module `packed`)
//! must pass, written once: exact round trips on every shape of run, the fallback to
//! plain frames, a frame's CRC catching every flip and cut, strict payload decoding.
//! Each codec's `tests.rs` runs them all through [`codec_cases!`] with its [`Codec`], and
//! keeps only what is its own (header layouts, size promises).
//!
//! Why one place: the two files had grown the same tests twice, so a case added for one
//! codec silently did not run for the other.

use crate::model::Ack;
use crate::record::RecordId;
use crate::wire::compact::{CompactError, MAX_LANES, WIDTH_ZIGZAG};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{ACK_ENTRY_BYTES, Msg};

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

/// Every ack the frames in `bytes` hold, numbered from 0, with the frame types seen.
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

/// One ack codec, as the shared cases see it.
pub(crate) struct Codec {
    /// The frame type it writes.
    pub(crate) frame: FrameType,
    /// `msg::encode_acks_*_into`: its frames where they are smaller, plain ones elsewhere.
    pub(crate) encode: fn(&mut Vec<u8>, u64, &[Ack]),
    /// Its payload decoder: the first ack's number, or a refusal.
    pub(crate) decode: fn(&[u8], &mut Vec<Ack>) -> Result<u64, CompactError>,
    /// One frame of this codec holding a few acks of three streams, with exceptions,
    /// and those acks.
    pub(crate) sample: fn() -> (Vec<u8>, Vec<Ack>),
    /// Runs that must round trip in under half the plain bytes: (streams, record sizes
    /// in sectors, acks a frame; 20,000 acks in all).
    pub(crate) shapes: &'static [(u16, &'static [u32], usize)],
    /// Its quick check of a frame's length and first 24 payload bytes (for a log's
    /// recovery scan).
    pub(crate) plausible: fn(usize, &[u8]) -> bool,
    /// Where the sample's payload holds its lane count, and its first width byte.
    pub(crate) lanes_at: usize,
    pub(crate) width_at: usize,
}

impl Codec {
    /// Encodes `acks` from 0, decodes them back and checks they are the same; returns
    /// the bytes written and the frame types.
    pub(crate) fn round_trip(&self, acks: &[Ack]) -> (usize, Vec<FrameType>) {
        let mut out = Vec::new();
        (self.encode)(&mut out, 0, acks);
        let (back, types) = decode_all(&out);
        assert!(back == acks, "decoded acks differ from the encoded ones");
        (out.len(), types)
    }
}

/// The payload of a whole frame.
pub(crate) fn payload(f: &[u8]) -> &[u8] {
    &f[frame::LEN_BYTES + 1..f.len() - frame::CRC_BYTES]
}

/// Every shape of [`Codec::shapes`] round trips in under half the plain bytes.
pub(crate) fn shapes_round_trip_smaller_than_plain(c: &Codec) {
    for &(streams, sizes, batch) in c.shapes {
        let acks = sequential_acks(
            20_000,
            streams,
            sizes,
            1_000,
            (20_000, 2_000_000),
            &mut Mix(2),
        );
        let bytes: usize = acks.chunks(batch).map(|b| c.round_trip(b).0).sum();
        let per_ack = bytes as f64 / acks.len() as f64;
        eprintln!("{streams} streams, sizes {sizes:?}, batch {batch}: {per_ack:.2} B/ack");
        assert!(
            per_ack < ACK_ENTRY_BYTES as f64 / 2.0,
            "{streams} streams, sizes {sizes:?}, batch {batch}: {per_ack:.2} bytes per ack"
        );
    }
}

/// More streams than a frame has lanes: the acks still round trip.
pub(crate) fn more_streams_than_lanes_round_trip(c: &Codec) {
    let acks = sequential_acks(5_000, 200, &[8], 1_000, (20_000, 90_000), &mut Mix(5));
    c.round_trip(&acks);
}

/// Random placement does not pack: plain frames, no bigger than plain.
pub(crate) fn random_placement_falls_back_to_plain_frames(c: &Codec) {
    let mut mix = Mix(3);
    let mut acks = sequential_acks(5_000, 1, &[8], 1 << 20, (2_000, 20_000), &mut mix);
    for a in &mut acks {
        a.record.offset = mix.below(1 << 20) * 4096;
    }
    let (bytes, types) = c.round_trip(&acks);
    assert!(types.iter().all(|&t| t == FrameType::Acks), "{types:?}");
    assert!(bytes <= acks.len() * ACK_ENTRY_BYTES + 64);
}

/// Fields at the ends of their ranges, times that run backwards and wrap, sizes of
/// zero and u32::MAX sectors, the last seq of u64, no acks at all.
pub(crate) fn extreme_values_round_trip(c: &Codec) {
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
    let (_, types) = c.round_trip(&acks);
    assert!(types.contains(&c.frame), "{types:?}");
    // The last seq of u64 cannot be followed in its lane; the next ack goes elsewhere.
    let mut at_end = vec![base, base];
    at_end[0].record.seq = u64::MAX;
    at_end[1].record.seq = 0;
    c.round_trip(&at_end);
    c.round_trip(&[]);
}

/// The sample is one frame of the codec's type, and decodes to its acks.
pub(crate) fn the_sample_is_one_frame_of_its_type(c: &Codec) {
    let (f, acks) = (c.sample)();
    let Decoded::Frame(fr) = frame::decode(&f) else {
        panic!("not a frame");
    };
    assert_eq!((fr.ty, fr.len_bytes), (c.frame, f.len()), "one frame");
    let mut into = vec![];
    (c.decode)(fr.payload, &mut into).unwrap();
    assert!(into == acks);
}

/// The frame's CRC and length catch every single bit flip and every cut.
pub(crate) fn every_bit_flip_and_every_cut_of_a_frame_is_caught(c: &Codec) {
    let (f, _) = (c.sample)();
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

/// Past the CRC (a forged frame, or a bug): every cut of the payload and a byte more
/// are refused, and nothing is kept from a refused payload (what was in the vector
/// before stays).
pub(crate) fn decoder_refuses_every_cut_and_a_byte_more(c: &Codec) {
    let (f, _) = (c.sample)();
    let p = payload(&f);
    let kept = Ack {
        record: RecordId {
            stream: 1,
            seq: 2,
            offset: 3,
            sectors: 4,
            write_time_ns: 5,
        },
        flushed_ns: 6,
    };
    let refused = |q: &[u8]| {
        let mut into = vec![kept];
        let r = (c.decode)(q, &mut into);
        if r.is_err() {
            assert!(into == [kept], "nothing is kept from a refused payload");
        }
        r.is_err()
    };
    assert!(!refused(p));
    for cut in 0..p.len() {
        assert!(refused(&p[..cut]), "cut {cut}");
    }
    let mut longer = p.to_vec();
    longer.push(0);
    assert!(refused(&longer), "a byte more");
}

/// The sample's lane count set to none or past [`MAX_LANES`], its first width above 64
/// bits (plain or zigzag): each refused.
pub(crate) fn lane_counts_and_widths_out_of_range_are_refused(c: &Codec) {
    let (f, _) = (c.sample)();
    let p = payload(&f);
    let edit = |at: usize, v: u8| {
        let mut q = p.to_vec();
        q[at] = v;
        (c.decode)(&q, &mut vec![]).is_err()
    };
    assert!(edit(c.lanes_at, 0), "no lanes");
    assert!(edit(c.lanes_at, MAX_LANES as u8 + 1), "too many lanes");
    assert!(edit(c.width_at, 65), "width above 64");
    assert!(edit(c.width_at, WIDTH_ZIGZAG | 65), "zigzag width above 64");
}

/// `plausible` takes the sample's length and first bytes, and neither a frame too short
/// for its header nor a lane count of zero.
pub(crate) fn plausible_accepts_what_the_encoder_writes_and_little_else(c: &Codec) {
    let (f, _) = (c.sample)();
    let len = f.len() - frame::LEN_BYTES - frame::CRC_BYTES;
    let p = &f[frame::LEN_BYTES + 1..];
    assert!((c.plausible)(len, &p[..24]));
    assert!(!(c.plausible)(12, &p[..24]), "too short for its header");
    let mut q = p[..24].to_vec();
    q[c.lanes_at] = 0;
    assert!(!(c.plausible)(len, &q), "no lanes");
}

/// Every single bit flip of the payload is refused or gives other acks: no two
/// encodings of the same acks (padding, a lane past the lanes, a width's spare bit).
pub(crate) fn no_bit_flip_decodes_to_the_same_acks(c: &Codec) {
    let (f, acks) = (c.sample)();
    let p = payload(&f);
    let mut first = vec![];
    let first = (c.decode)(p, &mut first).unwrap();
    for at in 0..p.len() {
        for bit in 0..8 {
            let mut q = p.to_vec();
            q[at] ^= 1 << bit;
            let mut a = vec![];
            assert!(
                !((c.decode)(&q, &mut a) == Ok(first) && a == acks),
                "byte {at} bit {bit} flipped decodes to the same acks"
            );
        }
    }
}

/// The `#[test]`s of the cases above for one codec: `codec_cases!(CODEC)` in a codec's
/// tests module, where `CODEC` is its [`Codec`]. Each case is a test of the same name.
macro_rules! codec_cases {
    ($codec:expr) => {
        crate::wire::codec_tests::codec_cases!(@each $codec;
            shapes_round_trip_smaller_than_plain,
            more_streams_than_lanes_round_trip,
            random_placement_falls_back_to_plain_frames,
            extreme_values_round_trip,
            the_sample_is_one_frame_of_its_type,
            every_bit_flip_and_every_cut_of_a_frame_is_caught,
            decoder_refuses_every_cut_and_a_byte_more,
            lane_counts_and_widths_out_of_range_are_refused,
            plausible_accepts_what_the_encoder_writes_and_little_else,
            no_bit_flip_decodes_to_the_same_acks
        );
    };
    (@each $codec:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                crate::wire::codec_tests::$case(&$codec);
            }
        )*
    };
}
pub(crate) use codec_cases;
