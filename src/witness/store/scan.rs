//! Scanning a file of frames: the torn-tail rule and resynchronisation past damage.
//!
//! Why shared: ack logs, `plugpull fetch` output and witness journals are all files of
//! frames (module `wire::frame`), and all must tell a torn tail (a crash mid-append:
//! nothing valid after it, safe to ignore) from damage (bad bytes with valid frames after
//! them: the frames after hold confirmed acks and must be kept and named). One scanner
//! decides that for every kind of file; each kind says which frame types it may hold.

use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg;
use crate::witness::store::error::{Context, StoreResult};
use crate::witness::store::export::END_MARK_BYTES;
use std::io::{self, Read};
use std::ops::ControlFlow;

/// Most bytes one commit appends to a log, and so the longest tail a crash can tear.
pub const MAX_TORN_TAIL_BYTES: u64 = 32 << 20;

/// Unreadable bytes with a valid frame after them: damage, never a torn tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Offset in the file where the unreadable bytes start (where a frame should be).
    pub offset: u64,
    /// Unreadable bytes, up to the next valid frame.
    pub bytes: u64,
    /// What was wrong with the bytes at `offset`.
    pub why: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes unreadable at byte {} ({}), valid frames after them",
            self.bytes, self.offset, self.why
        )
    }
}

/// How a scan of frames ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanEnd {
    /// End of the last valid frame: nothing readable follows it.
    pub valid_len_bytes: u64,
    /// Bytes after the last valid frame: a torn tail, if short enough for the file kind.
    pub tail_bytes: u64,
    /// Why those bytes are not a frame, if there are any.
    pub tail: Option<String>,
    /// Unreadable ranges with valid frames after them, in file order.
    pub damage: Vec<Damage>,
}

/// Reads frames from `r`, calling `each` for every valid one, until EOF.
///
/// A bad frame (wrong checksum, impossible length, cut short) is not an error. The scan
/// looks for a valid frame of a type `accept`s at every later offset: if one is found,
/// the bytes in between are [`Damage`] (handed to `each` with the first frame after
/// it) and the scan goes on from there; if none is, they are the tail
/// ([`ScanEnd::tail`]), the expected result of a crash mid-append. An error from `each`
/// (a valid frame whose content makes no sense here) ends the scan with that error.
pub fn scan_frames_resync<R: Read>(
    r: R,
    accept: fn(FrameType) -> bool,
    mut each: impl FnMut(&frame::Frame<'_>, Option<&Damage>) -> StoreResult<()>,
) -> StoreResult<ScanEnd> {
    scan_frames_until(r, accept, |f, d| each(f, d).map(ControlFlow::Continue))
}

/// [`scan_frames_resync`], where `each` may also end the scan early by returning
/// `ControlFlow::Break` (a reader that found what it looked for). The scan then ends
/// after that frame, with the [`ScanEnd`] so far.
pub fn scan_frames_until<R: Read>(
    r: R,
    accept: fn(FrameType) -> bool,
    mut each: impl FnMut(&frame::Frame<'_>, Option<&Damage>) -> StoreResult<ControlFlow<()>>,
) -> StoreResult<ScanEnd> {
    let mut stop = false;
    let mut w = Window::new(r);
    let mut end = ScanEnd::default();
    let mut after: Option<Damage> = None;
    loop {
        w.fill(frame::LEN_BYTES)?;
        if w.have().is_empty() {
            return Ok(end);
        }
        let at = w.offset;
        let bad = match frame_total(w.have()) {
            Err(why) => Some(why),
            Ok(total) => {
                w.fill(total)?;
                match frame::decode(w.have()) {
                    Decoded::Frame(f) => {
                        let flow = each(&f, after.as_ref())
                            .with_context(|| format!("frame at byte {at}"))?;
                        stop = flow.is_break();
                        None
                    }
                    Decoded::Error(e) => Some(NotAFrame::Bad(e)),
                    Decoded::NeedMore { .. } => Some(NotAFrame::Torn {
                        present: w.have().len(),
                        total,
                    }),
                }
            }
        };
        match bad {
            None => {
                let total = frame_total(w.have()).expect("checked above");
                w.advance(total);
                end.valid_len_bytes = w.offset;
                after = None;
                if stop {
                    return Ok(end);
                }
            }
            Some(not) => {
                let why = not.to_string();
                if resync(&mut w, accept)? {
                    let d = Damage {
                        offset: at,
                        bytes: w.offset - at,
                        why,
                    };
                    end.damage.push(d.clone());
                    after = Some(d);
                } else {
                    end.tail_bytes = w.offset - end.valid_len_bytes;
                    end.tail = Some(why);
                    return Ok(end);
                }
            }
        }
    }
}

/// Why the bytes where a frame should start are not one. Its text becomes
/// [`Damage::why`] or [`ScanEnd::tail`]; a reader tells a torn tail by its "torn" start.
#[derive(Debug)]
enum NotAFrame {
    /// Fewer bytes than a length prefix, at the end of the input.
    TornPrefix {
        present: usize,
    },
    /// A frame of `total` bytes, of which only `present` are there.
    Torn {
        present: usize,
        total: usize,
    },
    Bad(frame::FrameError),
}

impl std::fmt::Display for NotAFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAFrame::TornPrefix { present } => {
                write!(f, "torn frame: {present} bytes of a length prefix")
            }
            NotAFrame::Torn { present, total } => {
                write!(f, "torn frame: {present} of {total} bytes present")
            }
            NotAFrame::Bad(e) => write!(f, "{e}"),
        }
    }
}

/// The whole size of the frame at the start of `have` from its length prefix, or why
/// that prefix cannot start a frame.
fn frame_total(have: &[u8]) -> Result<usize, NotAFrame> {
    if have.len() < frame::LEN_BYTES {
        return Err(NotAFrame::TornPrefix {
            present: have.len(),
        });
    }
    match frame::decode(&have[..frame::LEN_BYTES]) {
        Decoded::NeedMore { need } => Ok(need),
        Decoded::Error(e) => Err(NotAFrame::Bad(e)),
        Decoded::Frame(_) => unreachable!("a length prefix alone is never a frame"),
    }
}

/// Moves `w` past a bad frame to the next offset holding a valid frame of an accepted
/// type; returns false (with `w` at EOF) if there is none.
fn resync<R: Read>(w: &mut Window<R>, accept: fn(FrameType) -> bool) -> io::Result<bool> {
    let type_ok: [bool; 256] = std::array::from_fn(|b| {
        b as u8 & frame::FLAG_MAC == 0 && FrameType::from_u8(b as u8).is_some_and(accept)
    });
    w.advance(1);
    loop {
        w.fill(frame::MIN_FRAME_BYTES)?;
        let h = w.have();
        if h.len() < frame::MIN_FRAME_BYTES {
            let n = h.len();
            w.advance(n);
            return Ok(false);
        }
        // A frame can start only where its type byte is one this file may hold: skip to
        // the next such offset in one go (megabytes of damage stay cheap to cross).
        let next = h[frame::LEN_BYTES..]
            .iter()
            .position(|&b| type_ok[b as usize]);
        match next {
            None => {
                let n = h.len() - frame::LEN_BYTES;
                w.advance(n);
            }
            Some(i) => {
                w.advance(i);
                if valid_frame_at(w)? {
                    return Ok(true);
                }
                w.advance(1);
            }
        }
    }
}

/// Payload bytes [`plausible`] looks at.
const PLAUSIBLE_PREFIX_BYTES: usize = 24;

/// Whether a valid frame starts at `w`'s position (its type byte already accepted).
/// Checks the length and the payload's shape before any checksum, so candidates inside
/// damaged ack data cost little.
fn valid_frame_at<R: Read>(w: &mut Window<R>) -> io::Result<bool> {
    let Ok(total) = frame_total(w.have()) else {
        return Ok(false);
    };
    let head = frame::LEN_BYTES + 1;
    w.fill(total.min(head + PLAUSIBLE_PREFIX_BYTES))?;
    let h = w.have();
    let ty = FrameType::from_u8(h[frame::LEN_BYTES]).expect("accepted type");
    let len = total - frame::LEN_BYTES - frame::CRC_BYTES;
    let prefix = &h[head.min(h.len())..h.len().min(total - frame::CRC_BYTES)];
    if !plausible(ty, len, prefix) {
        return Ok(false);
    }
    w.fill(total)?;
    Ok(matches!(frame::decode(w.have()), Decoded::Frame(_)))
}

/// Whether a frame of type `ty` with `len` (type + payload) bytes whose payload starts
/// with `p` has the shape every such frame plugpull writes has.
fn plausible(ty: FrameType, len: usize, p: &[u8]) -> bool {
    let payload = len - 1;
    match ty {
        FrameType::FileHeader => payload == 10,
        FrameType::JournalHeader => payload == 18,
        FrameType::Descriptor | FrameType::Event => p.first() == Some(&b'{'),
        FrameType::LogEnd => payload == END_MARK_BYTES || payload == END_MARK_BYTES + 32,
        FrameType::Acks => {
            let entries = payload.checked_sub(msg::ACKS_HEADER_BYTES);
            entries.is_some_and(|e| e % msg::ACK_ENTRY_BYTES == 0)
                && p.len() >= msg::ACKS_HEADER_BYTES
                && crate::le::u32_at(p, 8) as usize == entries.unwrap_or(0) / msg::ACK_ENTRY_BYTES
        }
        FrameType::CompactAcks => crate::wire::compact::plausible(len, p),
        FrameType::FileAcks => crate::wire::file_acks::plausible(len, p),
        FrameType::PackedAcks => crate::wire::packed::plausible(len, p),
        // Run id, then a log offset below 2^48: its top two bytes are zero.
        FrameType::JournalWrite => payload >= 24 && p.len() >= 24 && p[22..24] == [0, 0],
        _ => true,
    }
}

/// A read-ahead buffer over `r` that knows the input offset of its first byte.
struct Window<R> {
    r: R,
    buf: Vec<u8>,
    start: usize,
    eof: bool,
    /// Input offset of `buf[start]`.
    offset: u64,
}

impl<R: Read> Window<R> {
    fn new(r: R) -> Window<R> {
        Window {
            r,
            buf: Vec::with_capacity(64 << 10),
            start: 0,
            eof: false,
            offset: 0,
        }
    }

    fn have(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn advance(&mut self, n: usize) {
        self.start += n;
        self.offset += n as u64;
    }

    /// Buffers at least `n` bytes from the current position, fewer only at EOF.
    fn fill(&mut self, n: usize) -> io::Result<()> {
        let have = self.buf.len() - self.start;
        if have >= n || self.eof {
            return Ok(());
        }
        self.buf.drain(..self.start);
        self.start = 0;
        // At least double what is buffered, so the copies above stay linear overall.
        let want = (n - have).max(have).max(64 << 10);
        // read_to_end (which retries EINTR) grows the buffer as bytes arrive instead of
        // zeroing `want` bytes first: most files scanned are far smaller than 64 KiB, and
        // in debug builds the zeroing dominated tests/integration/witness_crash.rs.
        let got = (&mut self.r).take(want as u64).read_to_end(&mut self.buf)?;
        self.eof = got < want;
        Ok(())
    }
}
