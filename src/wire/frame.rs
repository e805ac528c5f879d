//! The one frame codec used on the wire and in the ack log.
//!
//! ```text
//! u32 LE len | u8 type | payload (len - 1 bytes) | u32 LE CRC-32 over len bytes, type, payload
//! ```
//!
//! Why one codec for both: the witness can check a frame once and the log, the wire and
//! `plugpull fetch -o` output all share the same torn-tail and corruption rules. Why the
//! length is covered by the checksum: a flipped length bit must not make the decoder skip
//! into the middle of the next frame and resynchronise on garbage.
//!
//! Authentication: the high bit of the type byte, [`FLAG_MAC`], marks a frame whose last
//! [`MAC_BYTES`] payload bytes are a keyed MAC. This module only splits the MAC off
//! ([`Frame::mac`]); checking it needs the connection's session and lives in
//! `crate::wire::auth`. The CRC still covers the whole frame, so damage is told apart from
//! forgery: a bad CRC is damage, a good CRC with a bad MAC is a wrong key or an attack.

use std::fmt;

/// Largest `len` (type + payload) accepted. Checked before anything is allocated, so a
/// forged length cannot make the witness reserve gigabytes.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// Bytes of the length prefix.
pub const LEN_BYTES: usize = 4;
/// Bytes of the trailing checksum.
pub const CRC_BYTES: usize = 4;
/// Smallest whole frame: length, type, no payload, checksum.
pub const MIN_FRAME_BYTES: usize = LEN_BYTES + 1 + CRC_BYTES;
/// Type-byte flag of frames that carry a keyed MAC at the end of the payload.
pub const FLAG_MAC: u8 = 0x80;
/// Bytes of the MAC of a [`FLAG_MAC`] frame (a truncated keyed BLAKE3 hash).
pub const MAC_BYTES: usize = 16;

/// Every frame type. Numbers are part of the wire and log format (docs/protocol.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    /// First frame of a log file: magic and log format version.
    FileHeader = 0x01,
    /// Second frame of a log file: the run descriptor as JSON.
    Descriptor = 0x02,
    /// Something the witness observed (WitnessEvent as JSON); log and fetch stream.
    Event = 0x03,
    /// First frame of a witness journal file: magic, version, generation.
    JournalHeader = 0x04,
    /// A copy of bytes appended to a run's log, in the witness journal.
    JournalWrite = 0x05,
    /// Last frame of a `plugpull fetch` output file: ack count, frame count, byte count
    /// and a running digest of everything before it, optionally signed (module
    /// `witness::store::export`).
    LogEnd = 0x06,
    /// Acks that continue one another within each stream, as bit-packed deltas; in the
    /// log and in fetch replies (module `wire::compact`). Decodes to the same
    /// `Msg::Acks` as an Acks frame.
    CompactAcks = 0x09,
    /// Acks of a tree run that name their file (path, temporary name); writer to
    /// witness, in the log and in fetch replies (module `wire::file_acks`).
    FileAcks = 0x0A,
    /// The successor of CompactAcks with varint headers, a frame of reference per field
    /// and cheap exceptions (module `wire::packed`); what log format 3 and `fetch -o`
    /// files hold. Decodes to the same `Msg::Acks` as an Acks frame.
    PackedAcks = 0x0B,
    Hello = 0x10,
    /// Writer or fetcher to a keyed witness: the client's handshake nonce.
    Auth = 0x17,
    /// Keyed witness to client: the witness's handshake nonce.
    Challenge = 0x18,
    Welcome = 0x11,
    /// A batch of acks; on the wire (writer to witness), in the log and in fetch replies.
    Acks = 0x12,
    Durable = 0x13,
    Heartbeat = 0x14,
    Bye = 0x15,
    Error = 0x16,
    Fetch = 0x20,
    FetchRun = 0x21,
    FetchEnd = 0x22,
    /// Witness to fetcher, answering a Fetch that lists runs: one run's summary.
    RunInfo = 0x23,
}

impl FrameType {
    pub fn from_u8(b: u8) -> Option<FrameType> {
        use FrameType::*;
        Some(match b {
            0x01 => FileHeader,
            0x02 => Descriptor,
            0x03 => Event,
            0x04 => JournalHeader,
            0x05 => JournalWrite,
            0x06 => LogEnd,
            0x09 => CompactAcks,
            0x0A => FileAcks,
            0x0B => PackedAcks,
            0x10 => Hello,
            0x17 => Auth,
            0x18 => Challenge,
            0x11 => Welcome,
            0x12 => Acks,
            0x13 => Durable,
            0x14 => Heartbeat,
            0x15 => Bye,
            0x16 => Error,
            0x20 => Fetch,
            0x21 => FetchRun,
            0x22 => FetchEnd,
            0x23 => RunInfo,
            _ => return None,
        })
    }
}

/// Why bytes are not a valid frame. Each variant's message says what was wrong, because
/// these end up in the witness log and in the writer's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The length prefix exceeds [`MAX_FRAME_BYTES`].
    Oversized {
        len: u64,
        max: u64,
    },
    /// The length prefix is 0: not even a type byte.
    Empty,
    BadChecksum {
        stored: u32,
        computed: u32,
    },
    UnknownType(u8),
    /// The [`FLAG_MAC`] bit is set but the payload is shorter than a MAC.
    MacTooShort(u8),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Oversized { len, max } => write!(
                f,
                "frame length {len} exceeds the maximum of {max} bytes \
                 (not a plugpull peer, or a corrupt stream)"
            ),
            FrameError::Empty => write!(f, "frame length 0 (a frame needs at least a type byte)"),
            FrameError::BadChecksum { stored, computed } => write!(
                f,
                "frame checksum mismatch (stored {stored:08x}, computed {computed:08x}): \
                 the bytes were damaged"
            ),
            FrameError::UnknownType(t) => write!(
                f,
                "unknown frame type 0x{t:02x} (is the peer a different plugpull version?)"
            ),
            FrameError::MacTooShort(t) => write!(
                f,
                "frame type 0x{t:02x} is flagged as carrying a {MAC_BYTES}-byte MAC but is \
                 shorter than that"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// One complete, checked frame borrowed from the input buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub ty: FrameType,
    /// The payload without the MAC.
    pub payload: &'a [u8],
    /// The MAC, when the type byte has [`FLAG_MAC`].
    pub mac: Option<&'a [u8; MAC_BYTES]>,
    /// The bytes the MAC covers (with the session's direction and counter): length,
    /// type byte and payload, everything before the MAC.
    pub authenticated: &'a [u8],
    /// Bytes of input this frame occupied, prefix and checksum included.
    pub len_bytes: usize,
    /// Those bytes: the whole frame as it was in the input (what a log digest covers).
    pub raw: &'a [u8],
}

/// Result of trying to decode one frame at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// The buffer holds a prefix of a possibly valid frame; `need` is the whole frame size
    /// when known (the length prefix has arrived), else 0.
    NeedMore {
        need: usize,
    },
    Frame(Frame<'a>),
    Error(FrameError),
}

/// Decodes the frame at the start of `buf` without copying. The length is validated as
/// soon as its 4 bytes are present, before the caller buffers the rest.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    decode_limited(buf, MAX_FRAME_BYTES)
}

/// [`decode`] with a lower length limit (the witness's `--max-frame-bytes`); `max_len`
/// above [`MAX_FRAME_BYTES`] is clamped to it.
pub fn decode_limited(buf: &[u8], max_len: usize) -> Decoded<'_> {
    let max_len = max_len.min(MAX_FRAME_BYTES);
    if buf.len() < LEN_BYTES {
        return Decoded::NeedMore { need: 0 };
    }
    let len = crate::le::u32_at(buf, 0) as usize;
    if len > max_len {
        return Decoded::Error(FrameError::Oversized {
            len: len as u64,
            max: max_len as u64,
        });
    }
    if len == 0 {
        return Decoded::Error(FrameError::Empty);
    }
    let total = LEN_BYTES + len + CRC_BYTES;
    if buf.len() < total {
        return Decoded::NeedMore { need: total };
    }
    let body_end = LEN_BYTES + len;
    let stored = crate::le::u32_at(buf, body_end);
    let computed = crc32fast::hash(&buf[..body_end]);
    // Checksum first: an unknown type in a damaged frame is damage, not a version skew.
    if stored != computed {
        return Decoded::Error(FrameError::BadChecksum { stored, computed });
    }
    let tb = buf[LEN_BYTES];
    let (mac, payload_end) = if tb & FLAG_MAC != 0 {
        if len - 1 < MAC_BYTES {
            return Decoded::Error(FrameError::MacTooShort(tb));
        }
        let at = body_end - MAC_BYTES;
        (Some(buf[at..body_end].try_into().unwrap()), at)
    } else {
        (None, body_end)
    };
    match FrameType::from_u8(tb & !FLAG_MAC) {
        Some(ty) => Decoded::Frame(Frame {
            ty,
            payload: &buf[LEN_BYTES + 1..payload_end],
            mac,
            authenticated: &buf[..payload_end],
            len_bytes: total,
            raw: &buf[..total],
        }),
        None => Decoded::Error(FrameError::UnknownType(tb)),
    }
}

/// Starts a frame in `out`; write the payload straight into `out`, then call
/// [`end_frame`] with the returned start. This lets hot paths (ack batches) encode without
/// an intermediate payload buffer.
pub fn begin_frame(out: &mut Vec<u8>, ty: FrameType) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0u8; LEN_BYTES]);
    out.push(ty as u8);
    start
}

/// Fills in the length of the frame begun at `start` and appends its checksum.
///
/// Panics if the payload exceeds [`MAX_FRAME_BYTES`]: callers split batches well below
/// it, so reaching it is a bug, and emitting it would only make the peer drop us.
pub fn end_frame(out: &mut Vec<u8>, start: usize) {
    let len = out.len() - start - LEN_BYTES;
    assert!(
        len <= MAX_FRAME_BYTES,
        "frame of {len} bytes exceeds MAX_FRAME_BYTES"
    );
    out[start..start + LEN_BYTES].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Appends one whole frame to `out`.
pub fn encode_into(out: &mut Vec<u8>, ty: FrameType, payload: &[u8]) {
    let start = begin_frame(out, ty);
    out.extend_from_slice(payload);
    end_frame(out, start);
}

/// One whole frame as a new buffer.
pub fn encode(ty: FrameType, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(MIN_FRAME_BYTES + payload.len());
    encode_into(&mut v, ty, payload);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_exact_layout() {
        let f = encode(FrameType::Bye, b"done");
        assert_eq!(f.len(), MIN_FRAME_BYTES + 4);
        assert_eq!(&f[..4], &5u32.to_le_bytes());
        assert_eq!(f[4], 0x15);
        assert_eq!(&f[5..9], b"done");
        assert_eq!(&f[9..], &crc32fast::hash(&f[..9]).to_le_bytes());
        match decode(&f) {
            Decoded::Frame(fr) => {
                assert_eq!(fr.ty, FrameType::Bye);
                assert_eq!(fr.payload, b"done");
                assert_eq!(fr.len_bytes, f.len());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_prefix_needs_more_and_trailing_bytes_are_left() {
        let mut f = encode(FrameType::Heartbeat, &[]);
        for n in 0..f.len() {
            assert!(matches!(decode(&f[..n]), Decoded::NeedMore { .. }), "{n}");
        }
        f.extend_from_slice(b"xyz");
        match decode(&f) {
            Decoded::Frame(fr) => assert_eq!(fr.len_bytes, MIN_FRAME_BYTES),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_type_round_trips() {
        for b in 0..=255u8 {
            if let Some(t) = FrameType::from_u8(b) {
                assert_eq!(t as u8, b);
                let f = encode(t, &[b; 3]);
                assert!(matches!(decode(&f), Decoded::Frame(fr) if fr.ty == t));
            }
        }
    }

    #[test]
    fn rejects_oversized_before_the_body_arrives() {
        let len = (MAX_FRAME_BYTES as u32 + 1).to_le_bytes();
        assert_eq!(
            decode(&len),
            Decoded::Error(FrameError::Oversized {
                len: MAX_FRAME_BYTES as u64 + 1,
                max: MAX_FRAME_BYTES as u64,
            })
        );
        assert_eq!(decode(&[0, 0, 0, 0]), Decoded::Error(FrameError::Empty));
    }

    #[test]
    fn rejects_any_single_bit_flip() {
        let f = encode(FrameType::Durable, &7u64.to_le_bytes());
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                match decode(&g) {
                    Decoded::Frame(fr) => panic!("flip {byte}.{bit} accepted: {fr:?}"),
                    Decoded::Error(_) | Decoded::NeedMore { .. } => {}
                }
            }
        }
    }

    #[test]
    fn rejects_unknown_type_and_mac_flag() {
        let mut f = Vec::new();
        let s = begin_frame(&mut f, FrameType::Bye);
        f[s + LEN_BYTES] = 0x7f;
        end_frame(&mut f, s);
        assert_eq!(decode(&f), Decoded::Error(FrameError::UnknownType(0x7f)));

        let mut f = Vec::new();
        let s = begin_frame(&mut f, FrameType::Acks);
        f[s + LEN_BYTES] |= FLAG_MAC;
        end_frame(&mut f, s);
        assert_eq!(decode(&f), Decoded::Error(FrameError::MacTooShort(0x92)));

        let mut f = Vec::new();
        let s = begin_frame(&mut f, FrameType::Acks);
        f[s + LEN_BYTES] |= FLAG_MAC;
        f.extend_from_slice(b"pay");
        f.extend_from_slice(&[7; MAC_BYTES]);
        end_frame(&mut f, s);
        match decode(&f) {
            Decoded::Frame(fr) => {
                assert_eq!(fr.ty, FrameType::Acks);
                assert_eq!(fr.payload, b"pay");
                assert_eq!(fr.mac, Some(&[7; MAC_BYTES]));
                assert_eq!(fr.authenticated, &f[..f.len() - MAC_BYTES - CRC_BYTES]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn limit_is_applied_before_the_body() {
        let f = encode(FrameType::Bye, &[0; 100]);
        assert!(matches!(
            decode_limited(&f[..4], 50),
            Decoded::Error(FrameError::Oversized { len: 101, max: 50 })
        ));
        assert!(matches!(decode_limited(&f, 101), Decoded::Frame(_)));
    }
}
