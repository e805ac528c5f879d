//! Typed messages carried in frames, with fixed little-endian layouts.
//!
//! Why fixed binary layouts for acks and JSON for descriptors: acks are the hot path (a
//! writer on tmpfs produces >100k/s) and must cost a memcpy, while descriptors are
//! sent once per connection and must stay readable and extensible. Layouts are in
//! docs/protocol.md; a decoder rejects any payload whose length does not match exactly.

use crate::model::{Ack, FileName, RunDescriptor, RunSelector, WitnessEvent};
use crate::record::RunId;
use crate::wire::auth::NONCE_BYTES;
use crate::wire::compact;
use crate::wire::file_acks;
use crate::wire::frame::{self, FrameType};
use crate::wire::packed;

use crate::wire::entry::get_ack;
pub use crate::wire::entry::{ACK_ENTRY_BYTES, put_ack};
pub use crate::wire::version::{PROTOCOL_VERSION, VersionMismatch};
/// Bytes before the entries in an Acks payload: first ack number u64, count u32.
pub const ACKS_HEADER_BYTES: usize = 12;
/// Most acks one Acks frame may carry; keeps frames far below the frame size limit.
pub const MAX_ACKS_PER_FRAME: usize = 65_536;
/// Hello flag: the writer has connected before in this run and resends unconfirmed acks.
pub const HELLO_FLAG_RESUME: u16 = 1;
/// Magic of the log file header frame.
pub const LOG_MAGIC: [u8; 8] = *b"PPACKLOG";
/// Log file format version written. Version 3 logs hold PackedAcks frames (and Acks
/// frames where packing is not smaller); readers accept every version from
/// [`LOG_VERSION_PLAIN`] on.
pub const LOG_VERSION: u16 = 3;
/// Log format version 2: CompactAcks frames where smaller, else Acks. A log with this
/// header is appended to in the same format, so the plugpull that wrote it can still read
/// it.
pub const LOG_VERSION_COMPACT: u16 = 2;
/// The oldest log format version read: Acks frames only. A log with this header is
/// appended to in the same format, so the plugpull that wrote it can still read it.
pub const LOG_VERSION_PLAIN: u16 = 1;
/// How the witness's Error answer to a device-key Fetch it has no run for begins. The
/// frame carries only text, so the fetcher tells this answer from other refusals by it.
pub const NO_RUN_FOR_DEVICE: &str = "no run for device";
/// How the witness's Error answer to a Fetch begins when it is serving as many fetches as
/// it serves at once: the fetcher may try again in a moment (a fleet's drives verify at
/// the same time).
pub const FETCHES_BUSY: &str = "the witness is serving its most fetches";

const SELECT_RUN: u8 = 1;
const SELECT_DEVICE: u8 = 2;
/// Fetch selector: list every run the witness holds (`plugpull runs`).
const SELECT_ALL_RUNS: u8 = 3;
/// Fetch selector: store a verify's verdict on a run beside its log (`plugpull runs`
/// shows the latest); the rest of the payload is a [`VerdictMark`] as JSON.
const SELECT_RECORD_VERDICT: u8 = 4;

/// One run as `plugpull runs` lists it: the RunInfo payload (JSON, docs/protocol.md).
/// Only what the witness knows: it never sees a verify, so there is no verdict here.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunInfo {
    pub descriptor: RunDescriptor,
    /// Durable acks in the run's log (what a fetch would serve now).
    pub acks: u64,
    /// The flush time of the last durable ack, writer clock, ns since the epoch.
    pub last_flushed_ns: Option<u64>,
    /// Whether the log is damaged (a fetch would carry log-damage events).
    pub damaged: bool,
    /// The latest verdict a verify reported for this run, if any (absent from the JSON of
    /// witnesses older than the verdict selector, hence the default).
    #[serde(default)]
    pub verified: Option<VerdictMark>,
    /// When the witness first heard of the run (its first Hello), witness clock, ns since
    /// the epoch: runs are ordered by this, not by the writer's `started_at`. Absent from
    /// older witnesses' JSON.
    #[serde(default)]
    pub first_heard_ns: Option<u64>,
}

/// What a verify tells the witness after judging a run: shown by `plugpull runs`. It is a
/// note for people, never evidence: verify judges from the acks and the drive alone.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerdictMark {
    /// The run judged, as 32 hex digits.
    pub run_id: String,
    /// PASS, FAIL or INCONCLUSIVE.
    pub verdict: String,
    /// Acknowledged records in a failure class.
    pub failing: u64,
    /// The target verify read, as named on its command line.
    pub target: String,
    /// When the verdict was reached, RFC 3339 (verify's clock).
    pub verified_at: String,
}

/// Every message of the protocol and the log. See docs/protocol.md for direction.
#[derive(Clone, Debug, PartialEq)]
pub enum Msg {
    FileHeader {
        version: u16,
    },
    Descriptor(RunDescriptor),
    Event(WitnessEvent),
    Hello {
        version: u16,
        resume: bool,
        descriptor: RunDescriptor,
    },
    /// Client to a keyed witness, first frame: protocol version and the client's nonce.
    Auth {
        version: u16,
        nonce: [u8; NONCE_BYTES],
    },
    /// Keyed witness to client: the witness's nonce.
    Challenge {
        nonce: [u8; NONCE_BYTES],
    },
    Welcome {
        version: u16,
        durable_acks: u64,
    },
    Acks {
        first: u64,
        acks: Vec<Ack>,
    },
    /// Acks of a tree run with the name of each file, one name per ack
    /// (`wire::file_acks`); numbered in the same sequence as Acks.
    FileAcks {
        first: u64,
        acks: Vec<Ack>,
        names: Vec<FileName>,
    },
    Durable {
        durable_acks: u64,
    },
    Heartbeat,
    Bye {
        reason: String,
    },
    Error {
        message: String,
    },
    Fetch(RunSelector),
    FetchRun(RunDescriptor),
    FetchEnd {
        acks: u64,
    },
    /// A Fetch with the list selector: every run the witness holds.
    ListRuns,
    RunInfo(Box<RunInfo>),
    /// A Fetch with the verdict selector: store this verdict beside the run's log.
    RecordVerdict(Box<VerdictMark>),
}

/// Appends one Acks frame numbering `acks` from `first`. Allocation-free when `out` has
/// capacity: this is what the sender calls for every batch.
pub fn encode_acks_into<'a>(
    out: &mut Vec<u8>,
    first: u64,
    acks: impl ExactSizeIterator<Item = &'a Ack>,
) {
    let n = acks.len();
    assert!(n <= MAX_ACKS_PER_FRAME, "ack batch of {n} is too large");
    let start = frame::begin_frame(out, FrameType::Acks);
    out.reserve(ACKS_HEADER_BYTES + n * ACK_ENTRY_BYTES + frame::CRC_BYTES);
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&(n as u32).to_le_bytes());
    for a in acks {
        put_ack(out, a);
    }
    frame::end_frame(out, start);
}

const _: () = assert!(compact::MAX_ACKS_PER_FRAME == MAX_ACKS_PER_FRAME);

/// Appends frames holding `acks`, numbered from `first`: CompactAcks frames for every
/// stretch where that is smaller (module `wire::compact`), plain Acks frames for the
/// rest. Decoding the frames yields exactly `acks`, in order. What the witness writes to
/// its logs and to `fetch -o` files.
pub fn encode_acks_compact_into(out: &mut Vec<u8>, first: u64, acks: &[Ack]) {
    encode_acks_with(out, first, acks, compact::encode_frame_if_smaller)
}

/// [`encode_acks_compact_into`] with PackedAcks frames (module `wire::packed`) instead of
/// CompactAcks: what the witness writes to logs of format 3 ([`LOG_VERSION`]) and to
/// `fetch -o` files.
pub fn encode_acks_packed_into(out: &mut Vec<u8>, first: u64, acks: &[Ack]) {
    encode_acks_with(out, first, acks, packed::encode_frame_if_smaller)
}

/// One frame encoder of a compact kind: (out, first, acks, plain bytes per ack) to (acks
/// planned, written).
type FrameEncoder = fn(&mut Vec<u8>, u64, &[Ack], usize) -> (usize, bool);

fn encode_acks_with(out: &mut Vec<u8>, first: u64, acks: &[Ack], encode_frame: FrameEncoder) {
    let flush_plain = |out: &mut Vec<u8>, from: usize, to: usize| {
        let mut at = from;
        for chunk in acks[from..to].chunks(MAX_ACKS_PER_FRAME) {
            encode_acks_into(out, first + at as u64, chunk.iter());
            at += chunk.len();
        }
    };
    let (mut plain_from, mut i) = (0, 0);
    // A compact frame goes after the plain acks before it: built aside, then appended.
    let mut frame_buf = Vec::new();
    while i < acks.len() {
        frame_buf.clear();
        let (n, written) = encode_frame(
            &mut frame_buf,
            first + i as u64,
            &acks[i..],
            ACK_ENTRY_BYTES,
        );
        if written {
            flush_plain(out, plain_from, i);
            out.extend_from_slice(&frame_buf);
            plain_from = i + n;
        }
        i += n;
    }
    flush_plain(out, plain_from, acks.len());
}

/// Decodes a PackedAcks payload, appending the acks to `into`; returns the first ack
/// number.
pub fn decode_packed_acks_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, DecodeError> {
    packed::decode_packed_into(p, into).map_err(|e| DecodeError::Malformed(e.0))
}

/// Decodes a CompactAcks payload, appending the acks to `into`; returns the first ack
/// number.
pub fn decode_compact_acks_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, DecodeError> {
    compact::decode_compact_into(p, into).map_err(|e| DecodeError::Malformed(e.0))
}

/// Decodes a FileAcks payload, appending the acks to `acks` and one name per ack to
/// `names`; returns the first ack number.
pub fn decode_file_acks_into(
    p: &[u8],
    acks: &mut Vec<Ack>,
    names: &mut Vec<FileName>,
) -> Result<u64, DecodeError> {
    file_acks::decode_file_acks_into(p, acks, names).map_err(|e| DecodeError::Malformed(e.0))
}

/// Returns a [`DecodeError::Malformed`] with a formatted message.
macro_rules! malformed {
    ($($arg:tt)*) => {
        return Err(DecodeError::Malformed(format!($($arg)*)))
    };
}

/// Why a frame's payload is not the message its type says.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A Hello from another protocol version (the server answers with its own).
    #[error(transparent)]
    Version(VersionMismatch),
    #[error("{0}")]
    Malformed(String),
    #[error("{what}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

impl DecodeError {
    /// The message with its cause, "what: why" (as a log line or an Error frame shows it).
    pub fn detail(&self) -> String {
        match self {
            DecodeError::Json { what, source } => format!("{what}: {source}"),
            other => other.to_string(),
        }
    }
}

/// Decodes an Acks payload, appending the acks to `into`; returns the first ack number.
pub fn decode_acks_into(p: &[u8], into: &mut Vec<Ack>) -> Result<u64, DecodeError> {
    if p.len() < ACKS_HEADER_BYTES {
        malformed!(
            "Acks payload of {} bytes is shorter than its 12-byte header",
            p.len()
        );
    }
    let first = crate::le::u64_at(p, 0);
    let count = crate::le::u32_at(p, 8) as usize;
    let want = ACKS_HEADER_BYTES + count * ACK_ENTRY_BYTES;
    if p.len() != want {
        malformed!(
            "Acks payload says {count} acks ({want} bytes) but is {} bytes",
            p.len()
        );
    }
    if first.checked_add(count as u64).is_none() {
        malformed!("Acks numbering overflows (first {first}, count {count})");
    }
    into.reserve(count);
    let start = into.len();
    into.extend(
        p[ACKS_HEADER_BYTES..]
            .chunks_exact(ACK_ENTRY_BYTES)
            .map(get_ack),
    );
    // No real record ends past u64::MAX; a forged one must not overflow verify's
    // arithmetic (offset + length) later.
    if let Some(i) = into[start..]
        .iter()
        .position(|a| a.record.offset.checked_add(a.record.len_bytes()).is_none())
    {
        into.truncate(start);
        malformed!(
            "ack {} of the batch ends past the largest byte offset",
            first + i as u64
        );
    }
    Ok(first)
}

fn u16_le(p: &[u8], what: &str) -> Result<u16, DecodeError> {
    if p.len() < 2 {
        malformed!("{what} payload too short");
    }
    Ok(crate::le::u16_at(p, 0))
}

fn u64_exact(p: &[u8], what: &str) -> Result<u64, DecodeError> {
    if p.len() != 8 {
        malformed!("{what} payload must be 8 bytes, got {}", p.len());
    }
    Ok(crate::le::u64_at(p, 0))
}

fn utf8(p: &[u8], what: &str) -> Result<String, DecodeError> {
    String::from_utf8(p.to_vec())
        .map_err(|_| DecodeError::Malformed(format!("{what} text is not UTF-8")))
}

fn descriptor(p: &[u8], what: &str) -> Result<RunDescriptor, DecodeError> {
    serde_json::from_slice(p).map_err(|source| DecodeError::Json {
        what: format!("{what}: invalid run descriptor JSON"),
        source,
    })
}

impl Msg {
    pub fn frame_type(&self) -> FrameType {
        match self {
            Msg::FileHeader { .. } => FrameType::FileHeader,
            Msg::Descriptor(_) => FrameType::Descriptor,
            Msg::Event(_) => FrameType::Event,
            Msg::Hello { .. } => FrameType::Hello,
            Msg::Auth { .. } => FrameType::Auth,
            Msg::Challenge { .. } => FrameType::Challenge,
            Msg::Welcome { .. } => FrameType::Welcome,
            Msg::Acks { .. } => FrameType::Acks,
            Msg::FileAcks { .. } => FrameType::FileAcks,
            Msg::Durable { .. } => FrameType::Durable,
            Msg::Heartbeat => FrameType::Heartbeat,
            Msg::Bye { .. } => FrameType::Bye,
            Msg::Error { .. } => FrameType::Error,
            Msg::Fetch(_) | Msg::ListRuns | Msg::RecordVerdict(_) => FrameType::Fetch,
            Msg::RunInfo(_) => FrameType::RunInfo,
            Msg::FetchRun(_) => FrameType::FetchRun,
            Msg::FetchEnd { .. } => FrameType::FetchEnd,
        }
    }

    /// Appends this message as one frame to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        if let Msg::Acks { first, acks } = self {
            encode_acks_into(out, *first, acks.iter());
            return;
        }
        if let Msg::FileAcks { first, acks, names } = self {
            assert_eq!(acks.len(), names.len(), "one name per file ack");
            let n = file_acks::encode_limited(out, *first, acks.iter().zip(names), usize::MAX);
            assert_eq!(
                n,
                acks.len(),
                "file ack batch of {} is too large",
                acks.len()
            );
            return;
        }
        let start = frame::begin_frame(out, self.frame_type());
        match self {
            Msg::FileHeader { version } => {
                out.extend_from_slice(&LOG_MAGIC);
                out.extend_from_slice(&version.to_le_bytes());
            }
            Msg::Descriptor(d) | Msg::FetchRun(d) => {
                serde_json::to_writer(&mut *out, d).expect("descriptor serialises")
            }
            Msg::Event(e) => serde_json::to_writer(&mut *out, e).expect("event serialises"),
            Msg::Hello {
                version,
                resume,
                descriptor,
            } => {
                out.extend_from_slice(&version.to_le_bytes());
                let flags = if *resume { HELLO_FLAG_RESUME } else { 0 };
                out.extend_from_slice(&flags.to_le_bytes());
                serde_json::to_writer(&mut *out, descriptor).expect("descriptor serialises");
            }
            Msg::Auth { version, nonce } => {
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(nonce);
            }
            Msg::Challenge { nonce } => out.extend_from_slice(nonce),
            Msg::Welcome {
                version,
                durable_acks,
            } => {
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&durable_acks.to_le_bytes());
            }
            Msg::Durable { durable_acks } => out.extend_from_slice(&durable_acks.to_le_bytes()),
            Msg::FetchEnd { acks } => out.extend_from_slice(&acks.to_le_bytes()),
            Msg::Heartbeat => {}
            Msg::Bye { reason } => out.extend_from_slice(reason.as_bytes()),
            Msg::Error { message } => out.extend_from_slice(message.as_bytes()),
            Msg::Fetch(RunSelector::Run(id)) => {
                out.push(SELECT_RUN);
                out.extend_from_slice(&id.0);
            }
            Msg::Fetch(RunSelector::LatestForDevice(key)) => {
                out.push(SELECT_DEVICE);
                out.extend_from_slice(key.as_bytes());
            }
            Msg::ListRuns => out.push(SELECT_ALL_RUNS),
            Msg::RecordVerdict(m) => {
                out.push(SELECT_RECORD_VERDICT);
                serde_json::to_writer(&mut *out, m).expect("verdict mark serialises")
            }
            Msg::RunInfo(i) => serde_json::to_writer(&mut *out, i).expect("run info serialises"),
            Msg::Acks { .. } | Msg::FileAcks { .. } => unreachable!("handled above"),
        }
        frame::end_frame(out, start);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode_into(&mut v);
        v
    }

    /// Decodes the payload of a checked frame.
    pub fn decode(f: &frame::Frame<'_>) -> Result<Msg, DecodeError> {
        let p = f.payload;
        Ok(match f.ty {
            FrameType::FileHeader => {
                if p.len() != 10 || p[0..8] != LOG_MAGIC {
                    malformed!("not a plugpull ack log header (magic missing)");
                }
                Msg::FileHeader {
                    version: crate::le::u16_at(p, 8),
                }
            }
            FrameType::Descriptor => Msg::Descriptor(descriptor(p, "Descriptor")?),
            FrameType::FetchRun => Msg::FetchRun(descriptor(p, "FetchRun")?),
            FrameType::Event => {
                Msg::Event(
                    serde_json::from_slice(p).map_err(|source| DecodeError::Json {
                        what: "Event: invalid witness event JSON".into(),
                        source,
                    })?,
                )
            }
            FrameType::Hello => decode_hello(p)?,
            FrameType::Auth => {
                if p.len() != 2 + NONCE_BYTES {
                    malformed!(
                        "Auth payload must be {} bytes, got {}",
                        2 + NONCE_BYTES,
                        p.len()
                    );
                }
                Msg::Auth {
                    version: crate::le::u16_at(p, 0),
                    nonce: p[2..].try_into().unwrap(),
                }
            }
            FrameType::Challenge => Msg::Challenge {
                nonce: p.try_into().map_err(|_| {
                    DecodeError::Malformed(format!(
                        "Challenge payload must be {NONCE_BYTES} bytes, got {}",
                        p.len()
                    ))
                })?,
            },
            FrameType::Welcome => {
                if p.len() != 10 {
                    malformed!("Welcome payload must be 10 bytes, got {}", p.len());
                }
                Msg::Welcome {
                    version: crate::le::u16_at(p, 0),
                    durable_acks: crate::le::u64_at(p, 2),
                }
            }
            FrameType::Acks => {
                let mut acks = Vec::new();
                let first = decode_acks_into(p, &mut acks)?;
                Msg::Acks { first, acks }
            }
            FrameType::CompactAcks => {
                let mut acks = Vec::new();
                let first = decode_compact_acks_into(p, &mut acks)?;
                Msg::Acks { first, acks }
            }
            FrameType::FileAcks => {
                let (mut acks, mut names) = (Vec::new(), Vec::new());
                let first = decode_file_acks_into(p, &mut acks, &mut names)?;
                Msg::FileAcks { first, acks, names }
            }
            FrameType::PackedAcks => {
                let mut acks = Vec::new();
                let first = decode_packed_acks_into(p, &mut acks)?;
                Msg::Acks { first, acks }
            }
            FrameType::Durable => Msg::Durable {
                durable_acks: u64_exact(p, "Durable")?,
            },
            FrameType::FetchEnd => Msg::FetchEnd {
                acks: u64_exact(p, "FetchEnd")?,
            },
            FrameType::Heartbeat => {
                if !p.is_empty() {
                    malformed!("Heartbeat payload must be empty, got {} bytes", p.len());
                }
                Msg::Heartbeat
            }
            FrameType::Bye => Msg::Bye {
                reason: utf8(p, "Bye")?,
            },
            FrameType::Error => Msg::Error {
                message: utf8(p, "Error")?,
            },
            FrameType::Fetch => decode_fetch(p)?,
            FrameType::RunInfo => {
                Msg::RunInfo(Box::new(serde_json::from_slice(p).map_err(|source| {
                    DecodeError::Json {
                        what: "RunInfo: invalid run info JSON".into(),
                        source,
                    }
                })?))
            }
            FrameType::JournalHeader | FrameType::JournalWrite => {
                malformed!("a {:?} frame belongs only in the witness journal", f.ty)
            }
            FrameType::LogEnd => malformed!("a LogEnd frame belongs only at the end of a log file"),
        })
    }
}

/// A Hello payload: version, flags, then (same version only) the run descriptor.
fn decode_hello(p: &[u8]) -> Result<Msg, DecodeError> {
    if p.len() < 4 {
        malformed!("Hello payload of {} bytes is too short", p.len());
    }
    let version = u16_le(p, "Hello")?;
    let flags = crate::le::u16_at(p, 2);
    Ok(Msg::Hello {
        version,
        resume: flags & HELLO_FLAG_RESUME != 0,
        // Leave the descriptor to the caller when the version differs: a
        // newer writer's descriptor may not parse, and the version error is
        // the one the user needs to see.
        descriptor: if version == PROTOCOL_VERSION {
            descriptor(&p[4..], "Hello")?
        } else {
            return Err(DecodeError::Version(VersionMismatch(version)));
        },
    })
}

/// A Fetch payload: a run id, a device key, or the list selector.
fn decode_fetch(p: &[u8]) -> Result<Msg, DecodeError> {
    Ok(match p.first() {
        Some(&SELECT_RUN) if p.len() == 17 => {
            Msg::Fetch(RunSelector::Run(RunId(p[1..17].try_into().unwrap())))
        }
        Some(&SELECT_DEVICE) => Msg::Fetch(RunSelector::LatestForDevice(utf8(&p[1..], "Fetch")?)),
        Some(&SELECT_ALL_RUNS) if p.len() == 1 => Msg::ListRuns,
        Some(&SELECT_RECORD_VERDICT) => Msg::RecordVerdict(Box::new(
            serde_json::from_slice(&p[1..]).map_err(|source| DecodeError::Json {
                what: "Fetch: invalid verdict mark JSON".into(),
                source,
            })?,
        )),
        _ => malformed!("Fetch payload has an unknown selector or wrong length"),
    })
}

#[cfg(test)]
pub(crate) mod tests;
