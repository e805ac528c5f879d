//! The compact ack frame (`CompactAcks`, type 0x09): a batch of acks that continue one
//! another within each stream, stored as a few bits per ack instead of 40 bytes.
//!
//! Why: a sequential run's acks are nearly all predictable. Within a stream, the next
//! record follows the last one (seq + 1, offset + its length) and usually has the same
//! size; only the two times carry information, and they are close to the previous
//! flush. So a frame names each stream once (a "lane": stream, first seq, first offset,
//! first size) and then, per ack, the lane, the size change and the two times as
//! zigzag deltas packed at the frame's bit widths. Nothing is rounded: decoding gives
//! back exactly the acks encoded (the write time is part of every sector's stamp, and
//! verify regenerates the bytes from it).
//!
//! Why a new frame type beside `Acks` and not a new `Acks` layout: old logs and old
//! peers stay readable, and the decoder yields the same `Msg::Acks` either way, so no
//! reader downstream knows which encoding a log used. The encoder
//! ([`encode_acks_compact_into`]) falls back to plain `Acks` frames wherever the
//! compact form would not be smaller (random placement, a single ack).
//!
//! Payload layout (little endian; docs/protocol.md has it byte by byte):
//! ```text
//! first u64 | count u32 | lanes u8 | w_sectors u8 | w_write u8 | w_flush u8 | base_ns u64
//! lanes x (stream u16 | sectors u32 | seq u64 | offset u64)
//! bit stream, LSB first: per ack lane (ceil log2 lanes bits), d_sectors, d_write, d_flush
//! zero bits up to the next byte
//! ```

use crate::model::Ack;
use crate::record::{RecordId, SECTOR};
use crate::wire::frame::{self, FrameType};
use crate::wire::msg::{ACK_ENTRY_BYTES, DecodeError, MAX_ACKS_PER_FRAME, encode_acks_into};

/// Bytes before the lane table.
pub const COMPACT_HEADER_BYTES: usize = 24;
/// Bytes of one lane in the lane table.
pub const LANE_BYTES: usize = 22;
/// Most lanes (streams) one compact frame may name.
pub const MAX_LANES: usize = 64;
/// Most acks the encoder puts in one compact frame. Small enough that one slow flush
/// widens the bit fields of at most this many acks, large enough that the 70-odd bytes
/// of header and frame cost well under 0.1 byte per ack.
pub const ENCODER_ACKS_PER_FRAME: usize = 1024;

fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bits needed to hold `v` (0 for 0).
fn bits(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

/// Bits of the lane index for a frame of `lanes` lanes.
fn lane_bits(lanes: usize) -> u8 {
    bits(lanes.saturating_sub(1) as u64)
}

/// One stream in a frame being decoded or planned: where its next ack must be.
#[derive(Clone, Copy)]
struct Lane {
    stream: u16,
    sectors: u32,
    /// None after seq u64::MAX: no ack can follow in this lane.
    next_seq: Option<u64>,
    next_offset: u64,
    /// Flush time of the lane's previous ack (the frame's base time before its first).
    prev_ns: u64,
}

/// The acks of a compact frame, as deltas, and the widths that hold them.
struct Plan {
    n: usize,
    base_ns: u64,
    lanes: Vec<(u16, u32, u64, u64)>,
    /// Per ack: lane, zigzag sector change, zigzag write delta, zigzag flush delta.
    fields: Vec<[u64; 4]>,
    widths: [u8; 3],
}

impl Plan {
    fn payload_bytes(&self) -> usize {
        let per_ack = lane_bits(self.lanes.len()) as usize
            + self.widths.iter().map(|&w| w as usize).sum::<usize>();
        COMPACT_HEADER_BYTES + LANE_BYTES * self.lanes.len() + (self.n * per_ack).div_ceil(8)
    }
}

/// The longest prefix of `acks` (at most [`ENCODER_ACKS_PER_FRAME`]) one compact frame
/// can hold: every ack continues its stream's previous one, in at most [`MAX_LANES`]
/// streams.
fn plan(acks: &[Ack]) -> Plan {
    let base_ns = acks[0].record.write_time_ns;
    let mut lanes: Vec<Lane> = Vec::new();
    let mut fields = Vec::new();
    let mut widths = [0u8; 3];
    for a in acks.iter().take(ENCODER_ACKS_PER_FRAME) {
        let r = &a.record;
        let li = match lanes.iter().position(|l| l.stream == r.stream) {
            Some(i) => {
                let l = &lanes[i];
                if Some(r.seq) != l.next_seq || r.offset != l.next_offset {
                    break;
                }
                i
            }
            None if lanes.len() < MAX_LANES => {
                lanes.push(Lane {
                    stream: r.stream,
                    sectors: r.sectors,
                    next_seq: Some(r.seq),
                    next_offset: r.offset,
                    prev_ns: base_ns,
                });
                lanes.len() - 1
            }
            None => break,
        };
        let (Some(next_seq), Some(next_offset)) =
            (r.seq.checked_add(1), r.offset.checked_add(r.len_bytes()))
        else {
            break;
        };
        let l = &mut lanes[li];
        let f = [
            li as u64,
            zigzag(r.sectors as i64 - l.sectors as i64),
            zigzag(r.write_time_ns.wrapping_sub(l.prev_ns) as i64),
            zigzag(a.flushed_ns.wrapping_sub(r.write_time_ns) as i64),
        ];
        for k in 0..3 {
            widths[k] = widths[k].max(bits(f[k + 1]));
        }
        fields.push(f);
        l.sectors = r.sectors;
        l.next_seq = Some(next_seq);
        l.next_offset = next_offset;
        l.prev_ns = a.flushed_ns;
    }
    // Each lane's table entry is where it started: replay the first ack of each.
    let mut table: Vec<(u16, u32, u64, u64)> = Vec::with_capacity(lanes.len());
    for a in &acks[..fields.len()] {
        let r = &a.record;
        if !table.iter().any(|t| t.0 == r.stream) {
            table.push((r.stream, r.sectors, r.seq, r.offset));
        }
    }
    Plan {
        n: fields.len(),
        base_ns,
        lanes: table,
        fields,
        widths,
    }
}

/// Appends little-endian bit fields to a byte vector.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    nbits: u32,
}

impl BitWriter<'_> {
    fn put(&mut self, v: u64, w: u8) {
        debug_assert!(w == 64 || v >> w == 0);
        self.acc |= (v as u128) << self.nbits;
        self.nbits += w as u32;
        while self.nbits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }
    fn finish(self) {
        if self.nbits > 0 {
            self.out.push(self.acc as u8);
        }
    }
}

fn encode_plan(out: &mut Vec<u8>, first: u64, p: &Plan) {
    let start = frame::begin_frame(out, FrameType::CompactAcks);
    out.reserve(p.payload_bytes() + frame::CRC_BYTES);
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(p.n as u32).to_le_bytes());
    out.push(p.lanes.len() as u8);
    out.extend_from_slice(&p.widths);
    out.extend_from_slice(&p.base_ns.to_le_bytes());
    for &(stream, sectors, seq, offset) in &p.lanes {
        out.extend_from_slice(&stream.to_le_bytes());
        out.extend_from_slice(&sectors.to_le_bytes());
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
    }
    let wl = lane_bits(p.lanes.len());
    let mut w = BitWriter {
        out,
        acc: 0,
        nbits: 0,
    };
    for f in &p.fields {
        w.put(f[0], wl);
        w.put(f[1], p.widths[0]);
        w.put(f[2], p.widths[1]);
        w.put(f[3], p.widths[2]);
    }
    w.finish();
    frame::end_frame(out, start);
}

/// Appends frames holding `acks`, numbered from `first`: compact frames for every
/// stretch where that is smaller, plain `Acks` frames for the rest. Decoding the frames
/// yields exactly `acks`, in order.
pub fn encode_acks_compact_into(out: &mut Vec<u8>, first: u64, acks: &[Ack]) {
    let flush_plain = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut at = from;
        for chunk in acks[from..to].chunks(MAX_ACKS_PER_FRAME) {
            encode_acks_into(out, first + at as u64, chunk.iter());
            at += chunk.len();
        }
    };
    let (mut plain_from, mut i) = (0, 0);
    while i < acks.len() {
        let p = plan(&acks[i..]);
        if p.n > 0 && p.payload_bytes() + frame::MIN_FRAME_BYTES < p.n * ACK_ENTRY_BYTES {
            flush_plain(out, plain_from, i);
            encode_plan(out, first + i as u64, &p);
            plain_from = i + p.n;
        }
        // An ack no compact frame can start with (its end overflows) goes out plain.
        i += p.n.max(1);
    }
    flush_plain(out, plain_from, acks.len());
}

/// Reads little-endian bit fields.
struct BitReader<'a> {
    p: &'a [u8],
    at: usize,
    acc: u128,
    nbits: u32,
}

impl BitReader<'_> {
    /// The next `w` bits; the caller checked the payload holds them all.
    fn get(&mut self, w: u8) -> u64 {
        while self.nbits < w as u32 {
            self.acc |= (self.p[self.at] as u128) << self.nbits;
            self.at += 1;
            self.nbits += 8;
        }
        let v = if w == 64 {
            self.acc as u64
        } else {
            (self.acc as u64) & ((1u64 << w) - 1)
        };
        self.acc >>= w;
        self.nbits -= w as u32;
        v
    }
}

/// Returns a [`DecodeError::Malformed`] naming the compact frame.
macro_rules! malformed {
    ($($arg:tt)*) => {
        return Err(DecodeError::Malformed(format!("CompactAcks: {}", format_args!($($arg)*))))
    };
}

/// Decodes a `CompactAcks` payload, appending the acks to `into`; returns the first ack
/// number. Any payload that is not exactly what the encoder could have written for some
/// acks is refused (length, widths, lanes, padding, arithmetic past u64).
pub fn decode_compact_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, DecodeError> {
    let start = into.len();
    let r = decode_inner(p, into);
    if r.is_err() {
        into.truncate(start);
    }
    r
}

fn decode_inner(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, DecodeError> {
    if p.len() < COMPACT_HEADER_BYTES {
        malformed!(
            "payload of {} bytes is shorter than its {COMPACT_HEADER_BYTES}-byte header",
            p.len()
        );
    }
    let u64_at = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
    let first = u64_at(0);
    let count = u32::from_le_bytes(p[8..12].try_into().unwrap()) as usize;
    let nlanes = p[12] as usize;
    let widths = [p[13], p[14], p[15]];
    let base_ns = u64_at(16);
    if count == 0 || count > MAX_ACKS_PER_FRAME {
        malformed!("{count} acks (1 to {MAX_ACKS_PER_FRAME} allowed)");
    }
    if nlanes == 0 || nlanes > MAX_LANES || nlanes > count {
        malformed!("{nlanes} lanes for {count} acks (1 to {MAX_LANES}, at most one per ack)");
    }
    if widths.iter().any(|&w| w > 64) {
        malformed!("bit widths {widths:?} exceed 64");
    }
    if first.checked_add(count as u64).is_none() {
        malformed!("numbering overflows (first {first}, count {count})");
    }
    let wl = lane_bits(nlanes);
    let per_ack = wl as usize + widths.iter().map(|&w| w as usize).sum::<usize>();
    let table_end = COMPACT_HEADER_BYTES + nlanes * LANE_BYTES;
    let want = table_end + (count * per_ack).div_ceil(8);
    if p.len() != want {
        malformed!(
            "{count} acks in {nlanes} lanes at {per_ack} bits each need {want} bytes, \
             the payload is {}",
            p.len()
        );
    }
    let mut lanes: Vec<Lane> = p[COMPACT_HEADER_BYTES..table_end]
        .chunks_exact(LANE_BYTES)
        .map(|e| Lane {
            stream: u16::from_le_bytes([e[0], e[1]]),
            sectors: u32::from_le_bytes(e[2..6].try_into().unwrap()),
            next_seq: Some(u64::from_le_bytes(e[6..14].try_into().unwrap())),
            next_offset: u64::from_le_bytes(e[14..22].try_into().unwrap()),
            prev_ns: base_ns,
        })
        .collect();
    let mut used = [false; MAX_LANES];
    let mut bits = BitReader {
        p: &p[table_end..],
        at: 0,
        acc: 0,
        nbits: 0,
    };
    into.reserve(count);
    for k in 0..count {
        let li = bits.get(wl) as usize;
        let (ds, dw, df) = (
            bits.get(widths[0]),
            bits.get(widths[1]),
            bits.get(widths[2]),
        );
        let Some(l) = lanes.get_mut(li) else {
            malformed!("ack {k} names lane {li} of {nlanes}");
        };
        let Ok(sectors) = u32::try_from(l.sectors as i64 + unzigzag(ds)) else {
            malformed!("ack {k}'s size is out of range");
        };
        let (Some(seq), Some(len_bytes)) =
            (l.next_seq, (sectors as u64).checked_mul(SECTOR as u64))
        else {
            malformed!("ack {k}'s seq overflows");
        };
        let offset = l.next_offset;
        // No real record ends past u64::MAX; a forged one must not overflow verify's
        // arithmetic (offset + length) later.
        let Some(end) = offset.checked_add(len_bytes) else {
            malformed!("ack {} ends past the largest byte offset", first + k as u64);
        };
        let write_time_ns = l.prev_ns.wrapping_add(unzigzag(dw) as u64);
        let flushed_ns = write_time_ns.wrapping_add(unzigzag(df) as u64);
        into.push(Ack {
            record: RecordId {
                stream: l.stream,
                seq,
                offset,
                sectors,
                write_time_ns,
            },
            flushed_ns,
        });
        used[li] = true;
        l.sectors = sectors;
        l.next_seq = seq.checked_add(1);
        l.next_offset = end;
        l.prev_ns = flushed_ns;
    }
    if !used[..nlanes].iter().all(|&u| u) {
        malformed!("a lane holds no ack");
    }
    if bits.acc != 0 || bits.at != bits.p.len() {
        malformed!("the padding after the last ack is not zero");
    }
    Ok(first)
}

/// Whether a `CompactAcks` frame of `len` (type + payload) bytes whose payload starts
/// with `p` has a shape the encoder writes: for module `scan`'s resynchronisation.
pub fn plausible(len: usize, p: &[u8]) -> bool {
    let payload = len - 1;
    if payload < COMPACT_HEADER_BYTES || p.len() < 16 {
        return false;
    }
    let count = u32::from_le_bytes(p[8..12].try_into().unwrap()) as usize;
    let nlanes = p[12] as usize;
    let widths = [p[13], p[14], p[15]];
    if count == 0 || count > MAX_ACKS_PER_FRAME || nlanes == 0 || nlanes > MAX_LANES {
        return false;
    }
    if widths.iter().any(|&w| w > 64) {
        return false;
    }
    let per_ack = lane_bits(nlanes) as usize + widths.iter().map(|&w| w as usize).sum::<usize>();
    payload == COMPACT_HEADER_BYTES + nlanes * LANE_BYTES + (count * per_ack).div_ceil(8)
}

#[cfg(test)]
pub(crate) mod tests;
