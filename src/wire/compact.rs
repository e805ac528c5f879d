//! The compact ack frame (`CompactAcks`, type 0x09): a batch of acks that continue one
//! another within each stream, stored as a few bits per ack instead of 40 bytes.
//!
//! Why: a sequential run's acks are nearly all predictable. Within a stream, the next
//! record follows the last one (seq + 1, offset + its length) and usually has the same
//! size; only the two times carry information, and they are close to the previous
//! flush. So a frame names each stream once (a "lane": stream, first seq, first offset,
//! first size) and then, per ack, the lane, the size change and the two times as
//! deltas packed at the frame's bit widths, each field's width chosen so the frame is
//! smallest: the few values that need more bits (a preempted writer, a slow flush) keep
//! their high bits in an exception list instead of widening every ack. Nothing is
//! rounded: decoding gives back exactly the acks encoded (the write time is part of
//! every sector's stamp, and verify regenerates the bytes from it).
//!
//! Why a new frame type beside `Acks` and not a new `Acks` layout: old logs and old
//! peers stay readable, and the decoder yields the same `Msg::Acks` either way, so no
//! reader downstream knows which encoding a log used. The encoder
//! (`msg::encode_acks_compact_into`, which owns the plain frames; this module does not use
//! `msg`, so the two files import in one direction) falls back to plain `Acks` frames
//! wherever the compact form would not be smaller (random placement, a single ack).
//!
//! Payload layout (little endian; docs/protocol.md has it byte by byte):
//! ```text
//! first u64 | count u32 | exceptions u32 | lanes u8 | w_sectors u8 | w_write u8 |
//!   w_flush u8 | base_ns u64
//! lanes x (stream u16 | sectors u32 | seq u64 | offset u64)
//! bit stream, LSB first: per ack lane (ceil log2 lanes bits), d_sectors, d_write, d_flush
//! zero bits up to the next byte
//! exceptions x (ack u32 | field u8 | high bits u64)
//! ```

use crate::model::Ack;
use crate::record::{RecordId, SECTOR};
use crate::wire::frame::{self, FrameType};

/// Most acks a CompactAcks frame may hold: the same limit as an Acks frame's
/// (`msg::MAX_ACKS_PER_FRAME`, which `wire::msg` checks is equal; msg uses this module,
/// so this module does not use msg).
pub const MAX_ACKS_PER_FRAME: usize = 65_536;

/// Why a CompactAcks payload is malformed (`wire::msg` turns it into a DecodeError).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactError(pub String);

/// Returns a [`CompactError`].
macro_rules! malformed {
    ($($arg:tt)*) => {
        return Err(CompactError(format!("{}", format_args!($($arg)*))))
    };
}

/// Bytes before the lane table.
pub const COMPACT_HEADER_BYTES: usize = 28;
/// Bytes of one exception: u32 ack index, u8 field, u64 high bits.
pub const EXCEPTION_BYTES: usize = 13;
/// Flag in a width byte: the field's values are zigzag-encoded differences (else the
/// plain difference modulo 2^64).
pub const WIDTH_ZIGZAG: u8 = 0x80;
/// Bytes of one lane in the lane table.
pub const LANE_BYTES: usize = 22;
/// Most lanes (streams) one compact frame may name.
pub const MAX_LANES: usize = 64;
/// Most acks the encoder puts in one compact frame. Small enough that one slow flush
/// widens the bit fields of at most this many acks, large enough that the 70-odd bytes
/// of header and frame cost well under 0.1 byte per ack.
pub const ENCODER_ACKS_PER_FRAME: usize = 1024;

pub(crate) fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

pub(crate) fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bits needed to hold `v` (0 for 0).
pub(crate) fn bits(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

/// Bits of the lane index for a frame of `lanes` lanes.
pub(crate) fn lane_bits(lanes: usize) -> u8 {
    bits(lanes.saturating_sub(1) as u64)
}

/// One stream in a frame being decoded or planned: where its next ack must be.
#[derive(Clone, Copy)]
pub(crate) struct Lane {
    pub(crate) stream: u16,
    pub(crate) sectors: u32,
    /// None after seq u64::MAX: no ack can follow in this lane.
    pub(crate) next_seq: Option<u64>,
    pub(crate) next_offset: u64,
    /// Flush time of the lane's previous ack (the frame's base time before its first).
    pub(crate) prev_ns: u64,
}

impl Lane {
    /// The ack that follows in this lane after a size change of `ds` sectors (mod 2^64),
    /// a write `dw` ns after the lane's previous flush and a flush `df` ns after the
    /// write; `number` names it in errors. Refuses what no real record can be (a size
    /// past u32, a seq or an end past u64), so verify's arithmetic never overflows.
    pub(crate) fn follow(
        &mut self,
        ds: u64,
        dw: u64,
        df: u64,
        number: u64,
    ) -> Result<Ack, CompactError> {
        let Ok(sectors) = u32::try_from((self.sectors as u64).wrapping_add(ds)) else {
            malformed!("ack {number}'s size is out of range");
        };
        let (Some(seq), Some(len_bytes)) =
            (self.next_seq, (sectors as u64).checked_mul(SECTOR as u64))
        else {
            malformed!("ack {number}'s seq overflows");
        };
        let offset = self.next_offset;
        let Some(end) = offset.checked_add(len_bytes) else {
            malformed!("ack {number} ends past the largest byte offset");
        };
        let write_time_ns = self.prev_ns.wrapping_add(dw);
        let flushed_ns = write_time_ns.wrapping_add(df);
        self.sectors = sectors;
        self.next_seq = seq.checked_add(1);
        self.next_offset = end;
        self.prev_ns = flushed_ns;
        Ok(Ack {
            record: RecordId {
                stream: self.stream,
                seq,
                offset,
                sectors,
                write_time_ns,
            },
            flushed_ns,
        })
    }
}

/// The acks of a compact frame, as deltas, and the widths that hold them.
struct Plan {
    n: usize,
    base_ns: u64,
    lanes: Vec<(u16, u32, u64, u64)>,
    /// Per ack: lane, then the sector change, write delta and flush delta as stored
    /// (zigzag or not, as `widths` says), whole: the bits past the width are exceptions.
    fields: Vec<[u64; 4]>,
    /// Width bytes: bits stored per ack, | [`WIDTH_ZIGZAG`].
    widths: [u8; 3],
    exceptions: usize,
}

impl Plan {
    fn payload_bytes(&self) -> usize {
        payload_bytes(self.n, self.lanes.len(), self.widths, self.exceptions)
    }
}

/// Bits per ack of the bit stream.
fn bits_per_ack(lanes: usize, widths: [u8; 3]) -> usize {
    lane_bits(lanes) as usize
        + widths
            .iter()
            .map(|&w| (w & !WIDTH_ZIGZAG) as usize)
            .sum::<usize>()
}

/// The exact payload size of a frame of this shape.
fn payload_bytes(n: usize, lanes: usize, widths: [u8; 3], exceptions: usize) -> usize {
    COMPACT_HEADER_BYTES
        + LANE_BYTES * lanes
        + (n * bits_per_ack(lanes, widths)).div_ceil(8)
        + EXCEPTION_BYTES * exceptions
}

/// For the raw differences of each field (`fields[i][1..4]`): whether to zigzag them,
/// and the width that makes the frame smallest (an ack whose value needs more bits costs
/// an exception). Returns the width bytes and the number of exceptions. One pass over
/// the acks: the witness runs this for every ack it commits.
fn choose_widths(fields: &[[u64; 4]]) -> ([u8; 3], usize) {
    // hist[k][zz][b]: values of field k needing b bits, plain (zz = 0) or zigzag.
    let mut hist = [[[0usize; 65]; 2]; 3];
    for f in fields {
        for k in 0..3 {
            let v = f[k + 1];
            hist[k][0][bits(v) as usize] += 1;
            hist[k][1][bits(zigzag(v as i64)) as usize] += 1;
        }
    }
    let n = fields.len();
    let mut widths = [0u8; 3];
    let mut exceptions = 0;
    for k in 0..3 {
        let mut best = (0u8, usize::MAX, 0usize);
        for (zz, counts) in hist[k].iter().enumerate() {
            // Values needing more than w bits, for w = 0, 1, ...
            let mut above = n;
            for (w, &h) in counts.iter().enumerate() {
                above -= h;
                let cost = n * w + above * EXCEPTION_BYTES * 8;
                if cost < best.1 {
                    let flag = if zz == 1 { WIDTH_ZIGZAG } else { 0 };
                    best = (w as u8 | flag, cost, above);
                }
            }
        }
        widths[k] = best.0;
        exceptions += best.2;
    }
    (widths, exceptions)
}

/// The longest prefix of `acks` (at most [`ENCODER_ACKS_PER_FRAME`]) one compact frame
/// can hold: every ack continues its stream's previous one, in at most [`MAX_LANES`]
/// streams.
fn plan(acks: &[Ack]) -> Plan {
    let Lanes {
        base_ns,
        table,
        mut fields,
    } = plan_lanes(acks);
    let (widths, exceptions) = choose_widths(&fields);
    for (k, w) in widths.iter().enumerate() {
        if w & WIDTH_ZIGZAG != 0 {
            for f in &mut fields {
                f[k + 1] = zigzag(f[k + 1] as i64);
            }
        }
    }
    Plan {
        n: fields.len(),
        base_ns,
        lanes: table,
        fields,
        widths,
        exceptions,
    }
}

/// The acks at the start of a frame as one compact frame sees them (this module's
/// encoder and `wire::packed`'s): the lane table and, per ack, its lane and the raw
/// differences (size change, write after the lane's previous flush, flush after write;
/// each modulo 2^64).
pub(crate) struct Lanes {
    pub(crate) base_ns: u64,
    /// Per lane: stream, sectors, seq and offset of its first ack.
    pub(crate) table: Vec<(u16, u32, u64, u64)>,
    pub(crate) fields: Vec<[u64; 4]>,
}

/// The longest prefix of `acks` (at most [`ENCODER_ACKS_PER_FRAME`]) one compact frame
/// can hold: every ack continues its stream's previous one, in at most [`MAX_LANES`]
/// streams.
pub(crate) fn plan_lanes(acks: &[Ack]) -> Lanes {
    let base_ns = acks[0].record.write_time_ns;
    let mut lanes: Vec<Lane> = Vec::new();
    let mut fields = Vec::new();
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
        fields.push([
            li as u64,
            (r.sectors as u64).wrapping_sub(l.sectors as u64),
            r.write_time_ns.wrapping_sub(l.prev_ns),
            a.flushed_ns.wrapping_sub(r.write_time_ns),
        ]);
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
    Lanes {
        base_ns,
        table,
        fields,
    }
}

/// Appends little-endian bit fields to a byte vector.
pub(crate) struct BitWriter<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) acc: u128,
    pub(crate) nbits: u32,
}

impl BitWriter<'_> {
    pub(crate) fn put(&mut self, v: u64, w: u8) {
        debug_assert!(w == 64 || v >> w == 0);
        self.acc |= (v as u128) << self.nbits;
        self.nbits += w as u32;
        while self.nbits >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }
    pub(crate) fn finish(self) {
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
    out.extend_from_slice(&(p.exceptions as u32).to_le_bytes());
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
    let mut exceptions = Vec::with_capacity(p.exceptions);
    for (i, f) in p.fields.iter().enumerate() {
        w.put(f[0], wl);
        for k in 0..3 {
            let width = p.widths[k] & !WIDTH_ZIGZAG;
            let v = f[k + 1];
            if width == 64 || v >> width == 0 {
                w.put(v, width);
            } else {
                w.put(v & ((1u64 << width) - 1), width);
                exceptions.push((i as u32, k as u8, v >> width));
            }
        }
    }
    w.finish();
    debug_assert_eq!(exceptions.len(), p.exceptions);
    for (i, k, high) in exceptions {
        out.extend_from_slice(&i.to_le_bytes());
        out.push(k);
        out.extend_from_slice(&high.to_le_bytes());
    }
    frame::end_frame(out, start);
}

/// Random placement: the next ack of the same stream does not continue the first, so no
/// compact frame can start here; the encoders skip planning one (cheap in the witness).
pub(crate) fn cannot_start(acks: &[Ack]) -> bool {
    if let [a, b, ..] = acks {
        let (a, b) = (&a.record, &b.record);
        a.stream == b.stream
            && (Some(b.seq) != a.seq.checked_add(1)
                || Some(b.offset) != a.offset.checked_add(a.len_bytes()))
    } else {
        false
    }
}

/// Plans a compact frame at the start of `acks`. Returns how many acks it would hold
/// (at least 1) and whether it was written: only when smaller than
/// `plain_bytes_per_ack` bytes an ack. Acks it was not written for go out plain; the
/// caller (`msg::encode_acks_compact_into`) then continues after them.
pub fn encode_frame_if_smaller(
    out: &mut Vec<u8>,
    first: u64,
    acks: &[Ack],
    plain_bytes_per_ack: usize,
) -> (usize, bool) {
    if cannot_start(acks) {
        return (1, false);
    }
    let p = plan(acks);
    if p.n > 0 && p.payload_bytes() + frame::MIN_FRAME_BYTES < p.n * plain_bytes_per_ack {
        encode_plan(out, first, &p);
        return (p.n, true);
    }
    // An ack no compact frame can start with (its end overflows) goes out plain.
    (p.n.max(1), false)
}

/// Reads little-endian bit fields.
pub(crate) struct BitReader<'a> {
    pub(crate) p: &'a [u8],
    pub(crate) at: usize,
    pub(crate) acc: u128,
    pub(crate) nbits: u32,
}

impl BitReader<'_> {
    /// The next `w` bits; the caller checked the payload holds them all.
    pub(crate) fn get(&mut self, w: u8) -> u64 {
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

/// Decodes a `CompactAcks` payload, appending the acks to `into`; returns the first ack
/// number. Any payload that is not exactly what the encoder could have written for some
/// acks is refused (length, widths, lanes, padding, arithmetic past u64).
pub fn decode_compact_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, CompactError> {
    let start = into.len();
    decode_inner(p, into).map_err(|e| {
        into.truncate(start);
        CompactError(format!("CompactAcks: {}", e.0))
    })
}

fn decode_inner(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, CompactError> {
    if p.len() < COMPACT_HEADER_BYTES {
        malformed!(
            "payload of {} bytes is shorter than its {COMPACT_HEADER_BYTES}-byte header",
            p.len()
        );
    }
    let u64_at = |at: usize| crate::le::u64_at(p, at);
    let first = u64_at(0);
    let count = crate::le::u32_at(p, 8) as usize;
    let nexc = crate::le::u32_at(p, 12) as usize;
    let nlanes = p[16] as usize;
    let widths = [p[17], p[18], p[19]];
    let base_ns = u64_at(20);
    if count == 0 || count > MAX_ACKS_PER_FRAME {
        malformed!("{count} acks (1 to {MAX_ACKS_PER_FRAME} allowed)");
    }
    if nlanes == 0 || nlanes > MAX_LANES || nlanes > count {
        malformed!("{nlanes} lanes for {count} acks (1 to {MAX_LANES}, at most one per ack)");
    }
    if widths.iter().any(|&w| w & !WIDTH_ZIGZAG > 64) {
        malformed!("bit widths {widths:?} exceed 64");
    }
    if nexc > 3 * count {
        malformed!("{nexc} exceptions for {count} acks");
    }
    if first.checked_add(count as u64).is_none() {
        malformed!("numbering overflows (first {first}, count {count})");
    }
    let wl = lane_bits(nlanes);
    let per_ack = bits_per_ack(nlanes, widths);
    let table_end = COMPACT_HEADER_BYTES + nlanes * LANE_BYTES;
    let want = payload_bytes(count, nlanes, widths, nexc);
    if p.len() != want {
        malformed!(
            "{count} acks in {nlanes} lanes at {per_ack} bits each, {nexc} exceptions, \
             need {want} bytes, the payload is {}",
            p.len()
        );
    }
    let bits_end = want - nexc * EXCEPTION_BYTES;
    let mut exceptions = Vec::with_capacity(nexc);
    for e in p[bits_end..].chunks_exact(EXCEPTION_BYTES) {
        let i = crate::le::u32_at(e, 0) as usize;
        let k = e[4] as usize;
        let high = crate::le::u64_at(e, 5);
        let w = (widths.get(k).copied().unwrap_or(0) & !WIDTH_ZIGZAG) as u32;
        if i >= count || k > 2 {
            malformed!("exception for ack {i} field {k} is outside the frame");
        }
        // High bits above a width of w must fit in the 64 - w bits left (any do at 0).
        if high == 0 || w == 64 || (w > 0 && high >> (64 - w) != 0) {
            malformed!("exception for ack {i} field {k} does not fit above {w} bits");
        }
        if exceptions
            .last()
            .is_some_and(|&(pi, pk, _)| (pi, pk) >= (i, k))
        {
            malformed!("exceptions are not in ack and field order");
        }
        exceptions.push((i, k, high << w));
    }
    let mut exceptions = exceptions.into_iter().peekable();
    let mut lanes: Vec<Lane> = p[COMPACT_HEADER_BYTES..table_end]
        .chunks_exact(LANE_BYTES)
        .map(|e| Lane {
            stream: crate::le::u16_at(e, 0),
            sectors: crate::le::u32_at(e, 2),
            next_seq: Some(crate::le::u64_at(e, 6)),
            next_offset: crate::le::u64_at(e, 14),
            prev_ns: base_ns,
        })
        .collect();
    let mut used = [false; MAX_LANES];
    let mut bits = BitReader {
        p: &p[table_end..bits_end],
        at: 0,
        acc: 0,
        nbits: 0,
    };
    into.reserve(count);
    for k in 0..count {
        let li = bits.get(wl) as usize;
        let mut d = [0u64; 3];
        for (f, v) in d.iter_mut().enumerate() {
            let w = widths[f];
            let mut raw = bits.get(w & !WIDTH_ZIGZAG);
            if let Some((_, _, high)) = exceptions.next_if(|&(i, kf, _)| (i, kf) == (k, f)) {
                raw |= high;
            }
            *v = if w & WIDTH_ZIGZAG != 0 {
                unzigzag(raw) as u64
            } else {
                raw
            };
        }
        let [ds, dw, df] = d;
        let Some(l) = lanes.get_mut(li) else {
            malformed!("ack {k} names lane {li} of {nlanes}");
        };
        into.push(l.follow(ds, dw, df, first + k as u64)?);
        used[li] = true;
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
    if payload < COMPACT_HEADER_BYTES || p.len() < 20 {
        return false;
    }
    let count = crate::le::u32_at(p, 8) as usize;
    let nexc = crate::le::u32_at(p, 12) as usize;
    let nlanes = p[16] as usize;
    let widths = [p[17], p[18], p[19]];
    if count == 0 || count > MAX_ACKS_PER_FRAME || nlanes == 0 || nlanes > MAX_LANES {
        return false;
    }
    if widths.iter().any(|&w| w & !WIDTH_ZIGZAG > 64) || nexc > 3 * count {
        return false;
    }
    payload == payload_bytes(count, nlanes, widths, nexc)
}

#[cfg(test)]
mod tests;
