//! The packed ack frame (`PackedAcks`, type 0x0B): the successor of `CompactAcks` (0x09)
//! that the witness writes to its own log (format 3) and to `fetch -o` files.
//!
//! Why another frame: the witness encodes each group commit on its own (a frame that is
//! already durable cannot grow), and a commit holds only what arrived during one journal
//! fdatasync, ~90 acks at ~90 000 acks/s. A CompactAcks frame spends 59 fixed bytes on
//! that (frame 9, header 28, one lane 22: ~0.6 B/ack) and stores each time difference
//! from zero, so the witness's own log measured 4.37 B/ack against the 4 B/ack it must stay under. This
//! frame keeps CompactAcks' model (lanes of acks that continue one another, the two
//! times as deltas at per-frame bit widths, outliers patched from an exception list) and
//! changes only how it is stored:
//! - the header and lane numbers are LEB128 varints (a 4 KiB record's size is one byte,
//!   not four; a seq below 2^28 four bytes, not eight);
//! - each field has a frame of reference, its smallest value, subtracted before packing:
//!   a flush never takes less than the drive's fastest flush, so those bits were paid
//!   on every ack for nothing;
//! - an exception costs two varints (gap to the previous exception's ack, times 3, plus
//!   the field; the high bits), about 2-3 bytes instead of 13, so the width can cover
//!   fewer acks and the rest are patched.
//!
//! Every frame stands alone, as CompactAcks frames do: nothing carries from one frame to
//! the next, so the durability rule, torn-tail detection and resynchronisation after
//! damage (module `witness::store::scan`) work on it unchanged. Lossless: decoding gives
//! back exactly the acks encoded.
//!
//! Payload layout (docs/protocol.md has it byte by byte; v = LEB128 varint):
//! ```text
//! first v | count v | exceptions v | lanes u8 | base_ns u64 LE
//! 3 x (width u8 | reference v)        sizes, write deltas, flush deltas
//! lanes x (stream v | sectors v | seq v | offset v)
//! bit stream, LSB first: per ack lane (ceil log2 lanes bits), then each field's
//!   stored value minus its reference, low `width` bits; zero bits up to the next byte
//! exceptions x (gap * 3 + field v | high bits v)
//! ```

use crate::model::Ack;
use crate::wire::compact::{
    self, BitReader, BitWriter, CompactError, Lane, Lanes, MAX_ACKS_PER_FRAME, MAX_LANES,
    WIDTH_ZIGZAG, bits, lane_bits, unzigzag, zigzag,
};
use crate::wire::frame::{self, FrameType};

/// Returns a [`CompactError`].
macro_rules! malformed {
    ($($arg:tt)*) => {
        return Err(CompactError(format!("PackedAcks: {}", format_args!($($arg)*))))
    };
}

/// Most bytes of a LEB128 varint of a u64.
const MAX_VARINT_BYTES: usize = 10;
/// Bits the encoder assumes an exception's first varint (gap and field) takes when it
/// chooses widths: one byte while exceptions are less than 43 acks apart.
const EXCEPTION_INDEX_BITS: usize = 8;

/// Appends `v` as an LEB128 varint (7 bits a byte, low first, high bit = more follow).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes [`put_varint`] writes for `v`.
fn varint_bytes(v: u64) -> usize {
    (bits(v).max(1) as usize).div_ceil(7)
}

/// Reads a payload front to back; every read checks the bytes are there.
struct Cursor<'a> {
    p: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A canonical varint: at most 10 bytes, no value past u64, no trailing zero byte
    /// (so one value has one encoding and a flipped bit cannot go unnoticed as padding).
    fn varint(&mut self, what: &str) -> Result<u64, CompactError> {
        let mut v = 0u64;
        for i in 0..MAX_VARINT_BYTES {
            let Some(&b) = self.p.get(self.at) else {
                malformed!("the payload ends inside {what}");
            };
            self.at += 1;
            if i == MAX_VARINT_BYTES - 1 && b > 1 {
                malformed!("{what} is past u64");
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    malformed!("{what} is not in its shortest form");
                }
                return Ok(v);
            }
        }
        malformed!("{what} is longer than {MAX_VARINT_BYTES} bytes")
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], CompactError> {
        let Some(b) = self.p.get(self.at..self.at + n) else {
            malformed!("the payload ends inside {what}");
        };
        self.at += n;
        Ok(b)
    }
}

/// How one field is stored in a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Coding {
    zigzag: bool,
    /// Subtracted from every (transformed) value before packing: the smallest.
    reference: u64,
    width: u8,
    /// Values that need more than `width` bits.
    exceptions: usize,
}

impl Coding {
    fn transform(&self, raw: u64) -> u64 {
        if self.zigzag { zigzag(raw as i64) } else { raw }
    }
}

/// The coding that stores `raw` (one field of every ack) in the fewest bits: plain or
/// zigzag, minus the smallest value, at the width where one more bit for every ack would
/// cost more than the exceptions it saves. One pass over the acks per choice of zigzag.
fn choose(raw: &[u64]) -> Coding {
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
        // Only the few widths that occur: summing over all 65 for every candidate width
        // was the witness's biggest cost per Acks frame (`perf`, 2026-12-01).
        let mut used = [(0usize, 0usize); 65];
        let mut n_used = 0;
        for (b, &h) in hist.iter().enumerate().take(top + 1) {
            if h > 0 {
                used[n_used] = (b, h);
                n_used += 1;
            }
        }
        for w in 0..=top {
            let mut cost = fixed + n * w;
            let mut exceptions = 0;
            for &(b, h) in used[..n_used].iter().filter(|&&(b, _)| b > w) {
                cost += h * (EXCEPTION_INDEX_BITS + 8 * (b - w).div_ceil(7));
                exceptions += h;
            }
            if cost < best.0 {
                best = (
                    cost,
                    Coding {
                        zigzag: zz,
                        reference,
                        width: w as u8,
                        exceptions,
                    },
                );
            }
        }
    }
    best.1
}

/// Plans a packed frame at the start of `acks` and writes it to `out` if it is smaller
/// than `plain_bytes_per_ack` bytes an ack. Returns how many acks it would hold (one at
/// least) and whether it was written; the caller (`msg::encode_acks_packed_into`) writes
/// the acks it was not written for as plain frames. Same contract as
/// `compact::encode_frame_if_smaller`.
pub fn encode_frame_if_smaller(
    out: &mut Vec<u8>,
    first: u64,
    acks: &[Ack],
    plain_bytes_per_ack: usize,
) -> (usize, bool) {
    if compact::cannot_start(acks) {
        return (1, false);
    }
    let Lanes {
        base_ns,
        table,
        fields,
    } = compact::plan_lanes(acks);
    let n = fields.len();
    if n < 2 {
        // An ack no frame can start with (its end overflows) goes out plain, and so does
        // a lone ack: in a frame of its own it would split the plain frame around it.
        return (1, false);
    }
    let column = |k: usize| fields.iter().map(|f| f[k + 1]).collect::<Vec<u64>>();
    let codings = [choose(&column(0)), choose(&column(1)), choose(&column(2))];
    let before = out.len();
    let start = frame::begin_frame(out, FrameType::PackedAcks);
    put_varint(out, first);
    put_varint(out, n as u64);
    put_varint(out, codings.iter().map(|c| c.exceptions as u64).sum());
    out.push(table.len() as u8);
    out.extend_from_slice(&base_ns.to_le_bytes());
    for c in &codings {
        out.push(c.width | if c.zigzag { WIDTH_ZIGZAG } else { 0 });
        put_varint(out, c.reference);
    }
    for &(stream, sectors, seq, offset) in &table {
        put_varint(out, stream as u64);
        put_varint(out, sectors as u64);
        put_varint(out, seq);
        put_varint(out, offset);
    }
    let wl = lane_bits(table.len());
    let mut exceptions = Vec::new();
    let mut w = BitWriter {
        out,
        acc: 0,
        nbits: 0,
    };
    for (i, f) in fields.iter().enumerate() {
        w.put(f[0], wl);
        for (k, c) in codings.iter().enumerate() {
            let v = c.transform(f[k + 1]) - c.reference;
            if c.width == 64 || v >> c.width == 0 {
                w.put(v, c.width);
            } else {
                w.put(v & ((1u64 << c.width) - 1), c.width);
                exceptions.push((i, k, v >> c.width));
            }
        }
    }
    w.finish();
    let mut prev = 0;
    for (i, k, high) in exceptions {
        put_varint(out, ((i - prev) * 3 + k) as u64);
        put_varint(out, high);
        prev = i;
    }
    frame::end_frame(out, start);
    if out.len() - before < n * plain_bytes_per_ack {
        (n, true)
    } else {
        out.truncate(before);
        (n, false)
    }
}

/// Decodes a `PackedAcks` payload, appending the acks to `into`; returns the first ack
/// number. Any payload that is not exactly what the encoder could have written for some
/// acks is refused (varints not in shortest form, widths, lanes, padding, exceptions out
/// of order or not needed, bytes left over, arithmetic past u64).
pub fn decode_packed_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, CompactError> {
    let start = into.len();
    decode_inner(p, into).inspect_err(|_| into.truncate(start))
}

/// The header fields before the lane table.
struct Header {
    first: u64,
    count: usize,
    exceptions: usize,
    lanes: usize,
}

/// Reads and checks the header; shared with [`plausible`].
fn header(c: &mut Cursor) -> Result<Header, CompactError> {
    let first = c.varint("the first ack number")?;
    let count = c.varint("the ack count")?;
    let exceptions = c.varint("the exception count")?;
    let lanes = c.bytes(1, "the lane count")?[0] as usize;
    if count == 0 || count > MAX_ACKS_PER_FRAME as u64 {
        malformed!("{count} acks (1 to {MAX_ACKS_PER_FRAME} allowed)");
    }
    let count = count as usize;
    if lanes == 0 || lanes > MAX_LANES || lanes > count {
        malformed!("{lanes} lanes for {count} acks (1 to {MAX_LANES}, at most one per ack)");
    }
    if exceptions > 3 * count as u64 {
        malformed!("{exceptions} exceptions for {count} acks");
    }
    if first.checked_add(count as u64).is_none() {
        malformed!("numbering overflows (first {first}, count {count})");
    }
    Ok(Header {
        first,
        count,
        exceptions: exceptions as usize,
        lanes,
    })
}

fn decode_inner(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, CompactError> {
    let mut c = Cursor { p, at: 0 };
    let h = header(&mut c)?;
    let base_ns = crate::le::u64_at(c.bytes(8, "the base time")?, 0);
    let mut codings = [Coding {
        zigzag: false,
        reference: 0,
        width: 0,
        exceptions: 0,
    }; 3];
    for (k, coding) in codings.iter_mut().enumerate() {
        let w = c.bytes(1, "a field width")?[0];
        let width = w & !WIDTH_ZIGZAG;
        if width > 64 {
            malformed!("field {k}'s width {width} exceeds 64");
        }
        *coding = Coding {
            zigzag: w & WIDTH_ZIGZAG != 0,
            reference: c.varint("a field reference")?,
            width,
            exceptions: 0,
        };
    }
    let mut lanes = Vec::with_capacity(h.lanes);
    for _ in 0..h.lanes {
        let stream = c.varint("a lane's stream")?;
        let sectors = c.varint("a lane's size")?;
        let (Ok(stream), Ok(sectors)) = (u16::try_from(stream), u32::try_from(sectors)) else {
            malformed!("a lane's stream {stream} or size {sectors} is out of range");
        };
        lanes.push(Lane {
            stream,
            sectors,
            next_seq: Some(c.varint("a lane's seq")?),
            next_offset: c.varint("a lane's offset")?,
            prev_ns: base_ns,
        });
    }
    let wl = lane_bits(h.lanes);
    let per_ack = wl as usize + codings.iter().map(|c| c.width as usize).sum::<usize>();
    let bit_bytes = (h.count * per_ack).div_ceil(8);
    let bit_stream = c.bytes(bit_bytes, "the bit stream")?;
    let mut exceptions = Vec::with_capacity(h.exceptions);
    let mut prev: Option<(usize, usize)> = None;
    for _ in 0..h.exceptions {
        let at = c.varint("an exception's place")?;
        let high = c.varint("an exception's high bits")?;
        let (gap, k) = ((at / 3) as usize, (at % 3) as usize);
        let i = prev.map_or(0, |(pi, _)| pi).saturating_add(gap);
        if i >= h.count {
            malformed!("an exception for ack {i} is outside the frame");
        }
        if prev.is_some_and(|pk| pk >= (i, k)) {
            malformed!("exceptions are not in ack and field order");
        }
        let w = codings[k].width as u32;
        // Needed (high bits not zero) and fitting above the width.
        if high == 0 || w == 64 || (w > 0 && high >> (64 - w) != 0) {
            malformed!("exception for ack {i} field {k} does not fit above {w} bits");
        }
        exceptions.push((i, k, high << w));
        prev = Some((i, k));
    }
    if c.at != p.len() {
        malformed!("{} bytes after the last exception", p.len() - c.at);
    }
    let mut exceptions = exceptions.into_iter().peekable();
    let mut used = [false; MAX_LANES];
    let mut bits = BitReader {
        p: bit_stream,
        at: 0,
        acc: 0,
        nbits: 0,
    };
    into.reserve(h.count);
    for k in 0..h.count {
        let li = bits.get(wl) as usize;
        let mut d = [0u64; 3];
        for (f, v) in d.iter_mut().enumerate() {
            let cf = &codings[f];
            let mut stored = bits.get(cf.width);
            if let Some((_, _, high)) = exceptions.next_if(|&(i, kf, _)| (i, kf) == (k, f)) {
                stored |= high;
            }
            let Some(t) = stored.checked_add(cf.reference) else {
                malformed!("ack {k} field {f} overflows its reference");
            };
            *v = if cf.zigzag { unzigzag(t) as u64 } else { t };
        }
        let Some(l) = lanes.get_mut(li) else {
            malformed!("ack {k} names lane {li} of {}", h.lanes);
        };
        into.push(l.follow(d[0], d[1], d[2], h.first + k as u64)?);
        used[li] = true;
    }
    if !used[..h.lanes].iter().all(|&u| u) {
        malformed!("a lane holds no ack");
    }
    if bits.acc != 0 || bits.at != bits.p.len() {
        malformed!("the padding after the last ack is not zero");
    }
    Ok(h.first)
}

/// Whether a `PackedAcks` frame of `len` (type + payload) bytes whose payload starts
/// with `p` can be one the encoder writes, judged from its header: for module `scan`'s
/// resynchronisation, before it checks the CRC. A prefix too short to hold the header
/// is not refused: the CRC decides.
pub fn plausible(len: usize, p: &[u8]) -> bool {
    let payload = len - 1;
    let mut c = Cursor { p, at: 0 };
    match header(&mut c) {
        // Smallest payload with this header: base time, 3 widths and references, a
        // 4-byte lane each, the bit stream's lane bits.
        Ok(h) => {
            payload >= c.at + 8 + 6 + 4 * h.lanes + (h.count * lane_bits(h.lanes) as usize) / 8
        }
        Err(e) => e.0.contains("ends inside"),
    }
}

#[cfg(test)]
mod tests;
