//! The durable ack log: one append-only file of frames per run, `<run id hex>.acklog`.
//!
//! ```text
//! FileHeader(magic "PPACKLOG", version) | Descriptor(JSON) | { Acks | Event }* [ LogEnd ]
//! ```
//!
//! Why frames with checksums and a torn-tail rule: the witness may be killed in the
//! middle of an append. Everything it reported durable was fdatasync'd before (in the
//! log, or in the witness journal that `journal::replay` copies back into the log before
//! any log is opened), so it lies in complete frames before any torn one; on open we keep
//! every complete frame and cut the rest, and never report an ack durable that is not in
//! such a frame. Why group commit: one sync per batch of frames instead of per ack is
//! what lets one witness keep up with writers producing >100k acks/s.
//!
//! Why a torn tail is only what has no valid frame after it (and at most
//! [`MAX_TORN_TAIL_BYTES`], one commit): a crash tears only the last append, while a bad
//! frame with valid frames after it is damage (a disk error, an edit), and the frames
//! after it hold acks the witness confirmed. Cutting there destroyed them, and reading
//! only up to it made verify judge a fraction of the run and say PASS. So every reader
//! resynchronises past damage, keeps every valid frame and names the damage
//! ([`DAMAGE_EVENT`] events); recovery refuses a damaged log and leaves it byte for byte.
//!
//! Why an end mark (LogEnd): a file cut at a frame boundary, spliced from two logs or
//! edited with fixed-up checksums looks like a good log. `plugpull fetch -o` ends its
//! file in a mark with the ack count and a BLAKE3 digest of everything before it (a MAC
//! with the witness key when given), and [`read_log_file_checked`] says whether the file
//! is whole. `verify --acks` reads either format with it.

use crate::model::{Ack, RunDescriptor, RunLog, WitnessEvent};
use crate::record::RunId;
use crate::wire::auth::Key;
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{self, LOG_VERSION, Msg};
use crate::witness::store::journal::{self, Journal};
use crate::witness::store::storage::{self, FileReader, FsStorage, Storage, StorageFile};
use anyhow::{Context, bail};
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// File name extension of ack logs in the witness directory.
pub const LOG_EXTENSION: &str = "acklog";
/// Acks per frame when the witness or fetch writes a whole run at once.
pub const FILE_ACKS_PER_FRAME: usize = 4096;
/// `WitnessEvent::kind` of the event that names damage found in a log or journal.
pub const DAMAGE_EVENT: &str = "log-damage";
/// Most bytes one commit appends to a log, and so the longest tail a crash can tear.
pub const MAX_TORN_TAIL_BYTES: u64 = 32 << 20;

/// Where the log of `run` lives in the witness directory.
pub fn log_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.{LOG_EXTENSION}", run.hex()))
}

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

/// Frame types an ack log file may hold. After a bad frame, only a valid frame of one
/// of these types proves the bad one was not the tail.
pub fn is_log_frame(t: FrameType) -> bool {
    matches!(
        t,
        FrameType::FileHeader
            | FrameType::Descriptor
            | FrameType::Acks
            | FrameType::Event
            | FrameType::LogEnd
    )
}

/// Reads frames from `r`, calling `each` for every valid one, until EOF. See
/// [`scan_frames_resync`]; frames after damage are passed on too.
pub fn scan_frames<R: Read>(
    r: R,
    mut each: impl FnMut(&frame::Frame<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<ScanEnd> {
    scan_frames_resync(r, is_log_frame, |f, _| each(f))
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
    mut each: impl FnMut(&frame::Frame<'_>, Option<&Damage>) -> anyhow::Result<()>,
) -> anyhow::Result<ScanEnd> {
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
                        each(&f, after.as_ref()).with_context(|| format!("frame at byte {at}"))?;
                        None
                    }
                    Decoded::Error(e) => Some(e.to_string()),
                    Decoded::NeedMore { .. } => Some(format!(
                        "torn frame: {} of {total} bytes present",
                        w.have().len()
                    )),
                }
            }
        };
        match bad {
            None => {
                let total = frame_total(w.have()).expect("checked above");
                w.advance(total);
                end.valid_len_bytes = w.offset;
                after = None;
            }
            Some(why) => {
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

/// The whole size of the frame at the start of `have` from its length prefix, or why
/// that prefix cannot start a frame.
fn frame_total(have: &[u8]) -> Result<usize, String> {
    if have.len() < frame::LEN_BYTES {
        return Err(format!(
            "torn frame: {} bytes of a length prefix",
            have.len()
        ));
    }
    match frame::decode(&have[..frame::LEN_BYTES]) {
        Decoded::NeedMore { need } => Ok(need),
        Decoded::Error(e) => Err(e.to_string()),
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
                && u32::from_le_bytes(p[8..12].try_into().unwrap()) as usize
                    == entries.unwrap_or(0) / msg::ACK_ENTRY_BYTES
        }
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
        // in debug builds the zeroing dominated tests/witness_crash.rs.
        let got = (&mut self.r).take(want as u64).read_to_end(&mut self.buf)?;
        self.eof = got < want;
        Ok(())
    }
}

/// Checks the order of frames in a log (header, descriptor, then contiguous acks and
/// events, and in `plugpull fetch` output an end mark) and hands out what they hold.
/// Shared by recovery, read_log_file and fetch. It also keeps the running digest and
/// the damage that [`LogChecker::note_damage`] reports, so a reader can tell whether
/// the log proved it is whole ([`LogChecker::wholeness`]).
#[derive(Default)]
pub struct LogChecker {
    pub descriptor: Option<RunDescriptor>,
    /// Acks read from frames that checked (what a fetch announces in FetchEnd).
    pub acks: u64,
    /// Number the next Acks frame must start at.
    next_ack: u64,
    frames: u64,
    /// Damage met so far, in file order.
    pub damage: Vec<LogDamage>,
    /// Set by `note_damage`, cleared by the next Acks frame: it may start past
    /// `next_ack` (the acks in between were lost to the damage).
    gap_allowed: bool,
    /// BLAKE3 of every frame before the end mark, and how many bytes that was.
    digest: blake3::Hasher,
    digested_bytes: u64,
    /// The end mark, and how many frames came after it (there should be none).
    mark: Option<EndMark>,
    frames_after_mark: u64,
    key: Option<Key>,
}

/// Damage in a log and what it cost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDamage {
    pub damage: Damage,
    /// Acks read before the damage.
    pub acks_before: u64,
    /// Acks the damaged bytes held, when an Acks frame after them tells.
    pub acks_lost: Option<u64>,
}

/// One checked item of a log.
pub enum LogItem<'a> {
    Header,
    Descriptor(&'a RunDescriptor),
    Acks {
        first: u64,
        acks: &'a [Ack],
    },
    Event(WitnessEvent),
    /// The end mark of a `plugpull fetch` output file (checked by `wholeness`).
    EndMark,
}

impl LogChecker {
    /// A checker that also checks the MAC of a signed end mark with `key`.
    pub fn with_key(key: Option<&Key>) -> LogChecker {
        LogChecker {
            key: key.cloned(),
            ..LogChecker::default()
        }
    }

    /// Whether an end mark was read (a `plugpull fetch` output file).
    pub fn has_end_mark(&self) -> bool {
        self.mark.is_some()
    }

    /// Records that the bytes before the next frame were damaged.
    pub fn note_damage(&mut self, d: &Damage) {
        self.damage.push(LogDamage {
            damage: d.clone(),
            acks_before: self.acks,
            acks_lost: None,
        });
        self.gap_allowed = true;
    }

    /// Checks one frame. `scratch` is reused to decode ack batches without allocating.
    pub fn check<'s>(
        &'s mut self,
        f: &frame::Frame<'_>,
        scratch: &'s mut Vec<Ack>,
    ) -> anyhow::Result<LogItem<'s>> {
        self.frames += 1;
        if f.mac.is_some() {
            bail!(
                "ack log frame {} carries a MAC: log files hold checked frames without MACs \
                 (is this a capture of the wire?)",
                self.frames
            );
        }
        if self.frames <= 2 && !self.damage.is_empty() {
            bail!(
                "the log's header or run descriptor is damaged ({}): the file cannot say \
                 which run it belongs to",
                self.damage[0].damage
            );
        }
        if self.mark.is_some() {
            self.frames_after_mark += 1;
        } else if f.ty != FrameType::LogEnd {
            self.digest.update(f.raw);
            self.digested_bytes += f.raw.len() as u64;
        }
        match (self.frames, f.ty) {
            (1, FrameType::FileHeader) => match Msg::decode(f)? {
                Msg::FileHeader { version } if version == LOG_VERSION => Ok(LogItem::Header),
                Msg::FileHeader { version } => bail!(
                    "ack log format version {version} is not supported (this build reads \
                     version {LOG_VERSION}); use the plugpull version that wrote it"
                ),
                _ => unreachable!(),
            },
            (1, _) => bail!("not a plugpull ack log: the first frame is not a log header"),
            (2, FrameType::Descriptor) => match Msg::decode(f)? {
                Msg::Descriptor(d) => Ok(LogItem::Descriptor(self.descriptor.insert(d))),
                _ => unreachable!(),
            },
            (2, t) => bail!("ack log: second frame is {t:?}, expected the run descriptor"),
            (_, FrameType::Acks) => {
                scratch.clear();
                let first = msg::decode_acks_into(f.payload, scratch)?;
                self.check_numbering(first)?;
                self.acks += scratch.len() as u64;
                self.next_ack = first + scratch.len() as u64;
                Ok(LogItem::Acks {
                    first,
                    acks: scratch,
                })
            }
            (_, FrameType::Event) => match Msg::decode(f)? {
                Msg::Event(e) => Ok(LogItem::Event(e)),
                _ => unreachable!(),
            },
            (_, FrameType::LogEnd) => {
                let m = EndMark::decode(f.payload)?;
                if self.mark.is_none() {
                    self.mark = Some(m);
                }
                Ok(LogItem::EndMark)
            }
            (_, t) => bail!("ack log holds a {t:?} frame, which belongs only on the wire"),
        }
    }

    /// An Acks frame continues the numbering, or starts past it right after damage.
    fn check_numbering(&mut self, first: u64) -> anyhow::Result<()> {
        let gap_allowed = std::mem::take(&mut self.gap_allowed);
        if gap_allowed && first >= self.next_ack {
            if let Some(d) = self.damage.last_mut() {
                d.acks_lost = Some(first - self.next_ack);
            }
            return Ok(());
        }
        if first != self.next_ack {
            bail!(
                "ack log is inconsistent: a batch starts at ack {first} but {} acks \
                 precede it (the file was edited or damaged)",
                self.next_ack
            );
        }
        Ok(())
    }

    /// Whether the scanned log proved it holds every ack, nothing more and nothing less:
    /// only a `plugpull fetch` output file whose end mark matches can.
    pub fn wholeness(&self, end: &ScanEnd) -> Wholeness {
        let not = |how: String| Wholeness { whole: false, how };
        let Some(m) = &self.mark else {
            return not(
                "the log has no end mark, so nothing proves it whole: it may have been cut \
                 short (a witness's own log, or a file fetched by an older plugpull, has \
                 none either: fetch the run again with `plugpull fetch`)"
                    .into(),
            );
        };
        if !self.damage.is_empty() {
            return not("the log is damaged (see the damage)".into());
        }
        if self.frames_after_mark > 0 || end.tail_bytes > 0 {
            return not(format!(
                "{} frames and {} unreadable bytes follow the end mark: something was \
                 appended to the file",
                self.frames_after_mark, end.tail_bytes
            ));
        }
        let (frames_before, ours) = (self.frames - 1, *self.digest.finalize().as_bytes());
        if (m.acks, m.frames, m.bytes) != (self.acks, frames_before, self.digested_bytes) {
            return not(format!(
                "the end mark counts {} acks in {} frames and {} bytes, the file holds {} \
                 acks in {frames_before} frames and {} bytes: it was cut short, spliced or \
                 edited",
                m.acks, m.frames, m.bytes, self.acks, self.digested_bytes
            ));
        }
        if m.digest != ours {
            return not(
                "the digest in the end mark does not match the file: it was spliced or \
                 edited after it was fetched"
                    .into(),
            );
        }
        match (&m.mac, &self.key) {
            (Some(mac), Some(key)) if *mac == key.log_mark_mac(&m.signed) => Wholeness {
                whole: true,
                how: "the end mark is signed with the witness key and matches the file".into(),
            },
            (Some(_), Some(_)) => not(
                "the end mark's signature does not match: the file was forged, or it was \
                 fetched with a different --key-file"
                    .into(),
            ),
            (Some(_), None) => Wholeness {
                whole: true,
                how: "the end mark's digest matches the file (that catches damage and \
                      careless edits); its signature was not checked: pass --key-file to \
                      also rule out forgery"
                    .into(),
            },
            (None, Some(_)) => not(
                "the end mark is not signed although --key-file was given: fetch the run \
                 with --key-file to get a signed log"
                    .into(),
            ),
            (None, None) => Wholeness {
                whole: true,
                how: "the end mark's digest matches the file (that catches damage and \
                      careless edits, not forgery: anyone can recompute it; fetch and \
                      verify with --key-file for a signed mark)"
                    .into(),
            },
        }
    }

    /// Events naming the damage this scan met, for a reader's RunLog (kind
    /// [`DAMAGE_EVENT`]); `what` names the file.
    pub fn damage_events(&self, what: &str, end: &ScanEnd) -> Vec<WitnessEvent> {
        let mut out: Vec<WitnessEvent> = self
            .damage
            .iter()
            .map(|d| {
                let lost = match d.acks_lost {
                    Some(n) => format!("{n} acks lost with them"),
                    None => "how many acks were lost is unknown".into(),
                };
                damage_event(
                    d.acks_before,
                    format!("{what} is damaged: {}; {lost}", d.damage),
                )
            })
            .collect();
        if end.tail_bytes > MAX_TORN_TAIL_BYTES {
            out.push(damage_event(
                self.acks,
                format!(
                    "{what} is damaged: its last {} bytes, from byte {}, are unreadable ({}), \
                     more than one commit of the witness can leave torn",
                    end.tail_bytes,
                    end.valid_len_bytes,
                    end.tail.as_deref().unwrap_or("?")
                ),
            ));
        }
        out
    }
}

/// A [`DAMAGE_EVENT`] with `detail`.
pub fn damage_event(acks_before: u64, detail: String) -> WitnessEvent {
    WitnessEvent {
        at_ns: crate::model::now_ns(),
        kind: DAMAGE_EVENT.into(),
        peer: String::new(),
        durable_acks: acks_before,
        last_ack_at_ns: None,
        detail,
    }
}

/// The details of the damage events of a run (empty when its log was whole).
pub fn damage_details(log: &RunLog) -> Vec<String> {
    log.events
        .iter()
        .filter(|e| e.kind == DAMAGE_EVENT)
        .map(|e| e.detail.clone())
        .collect()
}

/// Whether a log proved it is whole, and how (or why not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wholeness {
    pub whole: bool,
    pub how: String,
}

/// Magic at the start of a LogEnd payload.
pub const END_MARK_MAGIC: [u8; 8] = *b"PPLOGEND";
/// Bytes of a LogEnd payload before the optional MAC.
const END_MARK_BYTES: usize = 8 + 8 + 8 + 8 + 32 + 1;
/// LogEnd flag: a 32-byte MAC follows.
const END_MARK_KEYED: u8 = 1;

/// The last frame of a `plugpull fetch` output file (layout in docs/protocol.md).
#[derive(Clone, Debug, PartialEq, Eq)]
struct EndMark {
    acks: u64,
    frames: u64,
    bytes: u64,
    digest: [u8; 32],
    mac: Option<[u8; 32]>,
    /// The payload bytes the MAC covers.
    signed: Vec<u8>,
}

impl EndMark {
    fn decode(p: &[u8]) -> anyhow::Result<EndMark> {
        if p.len() < END_MARK_BYTES || p[..8] != END_MARK_MAGIC {
            bail!("the log's end mark is malformed (magic or length)");
        }
        let u64_at = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
        let keyed = p[END_MARK_BYTES - 1] & END_MARK_KEYED != 0;
        let want = END_MARK_BYTES + if keyed { 32 } else { 0 };
        if p.len() != want {
            bail!("the log's end mark is {} bytes, expected {want}", p.len());
        }
        Ok(EndMark {
            acks: u64_at(8),
            frames: u64_at(16),
            bytes: u64_at(24),
            digest: p[32..64].try_into().unwrap(),
            mac: keyed.then(|| p[END_MARK_BYTES..].try_into().unwrap()),
            signed: p[..END_MARK_BYTES].to_vec(),
        })
    }
}

/// Appends the end mark of a file holding `acks` acks in `frames` frames of `bytes`
/// bytes with BLAKE3 `digest`, signed with `key` if given.
fn encode_end_mark(
    out: &mut Vec<u8>,
    acks: u64,
    frames: u64,
    bytes: u64,
    digest: &[u8; 32],
    key: Option<&Key>,
) {
    let mut p = Vec::with_capacity(END_MARK_BYTES + 32);
    p.extend_from_slice(&END_MARK_MAGIC);
    p.extend_from_slice(&acks.to_le_bytes());
    p.extend_from_slice(&frames.to_le_bytes());
    p.extend_from_slice(&bytes.to_le_bytes());
    p.extend_from_slice(digest);
    p.push(if key.is_some() { END_MARK_KEYED } else { 0 });
    if let Some(k) = key {
        let mac = k.log_mark_mac(&p);
        p.extend_from_slice(&mac);
    }
    frame::encode_into(out, FrameType::LogEnd, &p);
}

/// Reads a whole log (a witness log or `plugpull fetch` output) without modifying it.
/// A torn tail is tolerated: the complete frames before it are returned. Damage (bad
/// bytes with valid frames after them) is tolerated too: every valid frame is read, and
/// the damage is named in [`DAMAGE_EVENT`] events of the returned log.
///
/// A log inside a witness directory is read together with the directory's journal
/// (module `journal`): after the witness's machine lost power, acks it confirmed may sit
/// only in the journal until `plugpull listen` starts again and replays it.
pub fn read_log_file(path: &Path) -> anyhow::Result<RunLog> {
    read_log_file_from(&FsStorage, path)
}

/// [`read_log_file`] on `storage`.
pub fn read_log_file_from(storage: &dyn Storage, path: &Path) -> anyhow::Result<RunLog> {
    let mut logs = read_log_files_from(storage, &[path])?;
    Ok(logs.pop().expect("one log per path"))
}

/// [`read_log_file`], also saying whether the file proved it is whole (its end mark,
/// checked with `key` when given).
pub fn read_log_file_checked(
    path: &Path,
    key: Option<&Key>,
) -> anyhow::Result<(RunLog, Wholeness)> {
    let mut logs = read_log_files_checked(&FsStorage, &[path], key)?;
    Ok(logs.pop().expect("one log per path"))
}

/// [`read_log_file`] for several logs, reading each witness directory's journal once.
pub fn read_log_files(paths: &[&Path]) -> anyhow::Result<Vec<RunLog>> {
    read_log_files_from(&FsStorage, paths)
}

/// [`read_log_files`] on `storage`.
pub fn read_log_files_from(storage: &dyn Storage, paths: &[&Path]) -> anyhow::Result<Vec<RunLog>> {
    Ok(read_log_files_checked(storage, paths, None)?
        .into_iter()
        .map(|(l, _)| l)
        .collect())
}

fn read_log_files_checked(
    storage: &dyn Storage,
    paths: &[&Path],
    key: Option<&Key>,
) -> anyhow::Result<Vec<(RunLog, Wholeness)>> {
    // Logs named by their run inside a directory with a journal: read whole, overlaid.
    let keys: Vec<Option<(PathBuf, RunId)>> =
        paths.iter().map(|p| in_journaled_dir(storage, p)).collect();
    let mut whole: HashMap<PathBuf, HashMap<RunId, Vec<u8>>> = HashMap::new();
    for (path, key) in paths.iter().zip(&keys) {
        if let Some((dir, run)) = key {
            let bytes = storage::read_all(storage, path)
                .with_context(|| format!("reading ack log {}", path.display()))?;
            whole.entry(dir.clone()).or_default().insert(*run, bytes);
        }
    }
    let mut journal_damage: HashMap<PathBuf, Vec<String>> = HashMap::new();
    for (dir, logs) in &mut whole {
        journal_damage.insert(dir.clone(), journal::overlay(storage, dir, logs)?);
    }
    paths
        .iter()
        .zip(&keys)
        .map(|(path, dir_run)| {
            let (mut log, wholeness) = match dir_run {
                Some((dir, run)) => read_log_bytes(path, &whole[dir][run][..], key)?,
                None => {
                    let f = storage
                        .open_read(path)
                        .with_context(|| format!("opening ack log {}", path.display()))?;
                    let r = FileReader::new(&*f);
                    read_log_bytes(path, io::BufReader::with_capacity(256 << 10, r), key)?
                }
            };
            if let Some((dir, _)) = dir_run {
                for d in &journal_damage[dir] {
                    log.events.push(damage_event(
                        0,
                        format!("{d}; acks of this run that only the journal held may be missing"),
                    ));
                }
            }
            Ok((log, wholeness))
        })
        .collect()
}

/// The directory and run of a log named `<run id>.acklog` in a directory with a journal.
fn in_journaled_dir(storage: &dyn Storage, path: &Path) -> Option<(PathBuf, RunId)> {
    let run = RunId::parse(path.file_stem()?.to_str()?)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    journal::has_journal(storage, dir).then(|| (dir.to_path_buf(), run))
}

fn read_log_bytes(
    path: &Path,
    r: impl Read,
    key: Option<&Key>,
) -> anyhow::Result<(RunLog, Wholeness)> {
    let mut checker = LogChecker::with_key(key);
    let mut scratch = Vec::new();
    let mut acks = Vec::new();
    let mut events = Vec::new();
    let end = scan_frames_resync(r, is_log_frame, |fr, damage| {
        if let Some(d) = damage {
            checker.note_damage(d);
        }
        match checker.check(fr, &mut scratch)? {
            LogItem::Acks { acks: a, .. } => acks.extend_from_slice(a),
            LogItem::Event(e) => events.push(e),
            LogItem::Header | LogItem::Descriptor(_) | LogItem::EndMark => {}
        }
        Ok(())
    })
    .with_context(|| format!("reading ack log {}", path.display()))?;
    let Some(descriptor) = checker.descriptor.clone() else {
        bail!(
            "{} holds no complete run descriptor: not a plugpull ack log, or the witness \
             was killed while creating it",
            path.display()
        );
    };
    events.extend(checker.damage_events(&format!("ack log {}", path.display()), &end));
    let wholeness = checker.wholeness(&end);
    Ok((
        RunLog {
            descriptor,
            acks,
            events,
        },
        wholeness,
    ))
}

/// Writes `log` as a log file (what `plugpull fetch -o` produces) and fsyncs it. Written
/// to a temporary name and renamed, so a crash never leaves a half file under `path`.
/// It ends in an unsigned end mark; see [`write_log_file_keyed`].
pub fn write_log_file(path: &Path, log: &RunLog) -> anyhow::Result<()> {
    write_log_file_keyed(path, log, None)
}

/// [`write_log_file`] with an end mark signed with `key` when given: the ack count,
/// the frame count, the byte count and the BLAKE3 digest of every byte before it.
pub fn write_log_file_keyed(path: &Path, log: &RunLog, key: Option<&Key>) -> anyhow::Result<()> {
    let tmp = path.with_extension("acklog.tmp");
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut out = DigestingWriter {
        f: &mut f,
        digest: blake3::Hasher::new(),
        bytes: 0,
        frames: 0,
    };
    let mut buf = Vec::with_capacity(1 << 20);
    Msg::FileHeader {
        version: LOG_VERSION,
    }
    .encode_into(&mut buf);
    Msg::Descriptor(log.descriptor.clone()).encode_into(&mut buf);
    out.frames += 2;
    let mut first = 0u64;
    for chunk in log.acks.chunks(FILE_ACKS_PER_FRAME) {
        msg::encode_acks_into(&mut buf, first, chunk.iter());
        out.frames += 1;
        first += chunk.len() as u64;
        if buf.len() >= 1 << 20 {
            out.write(&buf)
                .with_context(|| format!("writing {}", tmp.display()))?;
            buf.clear();
        }
    }
    for e in &log.events {
        Msg::Event(e.clone()).encode_into(&mut buf);
        out.frames += 1;
    }
    out.write(&buf)
        .with_context(|| format!("writing {}", tmp.display()))?;
    buf.clear();
    let digest = *out.digest.finalize().as_bytes();
    let (frames, bytes) = (out.frames, out.bytes);
    encode_end_mark(&mut buf, first, frames, bytes, &digest, key);
    f.write_all(&buf)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Writes whole frames to a file, keeping the digest and counts the end mark needs.
struct DigestingWriter<'a> {
    f: &'a mut File,
    digest: blake3::Hasher,
    bytes: u64,
    frames: u64,
}

impl DigestingWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.digest.update(b);
        self.bytes += b.len() as u64;
        self.f.write_all(b)
    }
}

pub(crate) fn sync_dir(storage: &dyn Storage, dir: &Path) -> anyhow::Result<()> {
    storage
        .sync_dir(dir)
        .with_context(|| format!("fsync of directory {}", dir.display()))
}

/// What opening an existing log found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes cut from the end (a torn or damaged tail).
    pub truncated_bytes: u64,
    /// Why the tail was cut.
    pub reason: Option<String>,
}

/// An open, appendable log of one run.
///
/// Appends go to a buffer; [`AckLog::commit`] writes the buffer and makes it durable with
/// ONE fdatasync: of the log itself, or, in the witness, of the journal shared by every
/// run ([`AckLog::with_journal`]). Only after `commit` returns are the appended acks
/// durable.
pub struct AckLog {
    file: Box<dyn StorageFile>,
    journal: Option<Arc<Journal>>,
    path: PathBuf,
    descriptor: RunDescriptor,
    appended_acks: u64,
    durable_acks: u64,
    durable_len_bytes: u64,
    pending: Vec<u8>,
    /// Set when a write or fdatasync failed: the file's state past `durable_len_bytes`
    /// is unknown, so nothing more may be reported durable from this handle.
    poisoned: Option<String>,
}

impl AckLog {
    /// Creates a new log with header and descriptor, durable (file and directory entry)
    /// before it returns. Fails if the file exists.
    pub fn create(
        storage: &dyn Storage,
        dir: &Path,
        desc: &RunDescriptor,
    ) -> anyhow::Result<AckLog> {
        let path = log_path(dir, desc.run_id);
        let file = storage
            .create_new(&path)
            .with_context(|| format!("creating ack log {}", path.display()))?;
        let mut log = AckLog {
            file,
            journal: None,
            path,
            descriptor: desc.clone(),
            appended_acks: 0,
            durable_acks: 0,
            durable_len_bytes: 0,
            pending: Vec::new(),
            poisoned: None,
        };
        Msg::FileHeader {
            version: LOG_VERSION,
        }
        .encode_into(&mut log.pending);
        Msg::Descriptor(desc.clone()).encode_into(&mut log.pending);
        log.commit()?;
        sync_dir(storage, dir)?;
        Ok(log)
    }

    /// Opens an existing log for appending: scans it, truncates a torn tail (keeping
    /// every complete frame before it) and makes the truncation durable.
    ///
    /// A torn tail is only what follows the last valid frame, and at most
    /// [`MAX_TORN_TAIL_BYTES`]. Anything else is damage: bad bytes with a valid frame
    /// after them, or an unreadable tail longer than any commit. Then this refuses with
    /// the file exactly as it was, because the frames after the damage hold acks the
    /// witness confirmed.
    pub fn open(storage: &dyn Storage, path: &Path) -> anyhow::Result<(AckLog, Recovery)> {
        let file = storage
            .open(path)
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let file_len = file
            .size()
            .with_context(|| format!("opening ack log {}", path.display()))?;
        let mut checker = LogChecker::default();
        let mut scratch = Vec::new();
        let reader = FileReader::new(&*file);
        let end = scan_frames_resync(
            io::BufReader::with_capacity(256 << 10, reader),
            is_log_frame,
            |fr, damage| {
                if let Some(d) = damage {
                    checker.note_damage(d);
                }
                checker.check(fr, &mut scratch).map(|_| ())
            },
        )
        .with_context(|| format!("recovering ack log {}", path.display()))?;
        let Some(descriptor) = checker.descriptor.clone() else {
            bail!(
                "{} holds no complete run descriptor ({} bytes): the witness was killed \
                 while creating it, or it is not an ack log",
                path.display(),
                file_len
            );
        };
        if let Some(why) = not_recoverable(&checker, &end) {
            bail!(
                "ack log {} {why}. The witness leaves it exactly as it is and accepts no \
                 more acks for run {}. Its acks stay readable: `plugpull verify TARGET \
                 --acks {}` (or through this witness) reports them and names the damage. \
                 Keep a copy of the file; move it out of the witness directory to silence \
                 this",
                path.display(),
                descriptor.run_id,
                path.display()
            );
        }
        let mut rec = Recovery::default();
        if end.valid_len_bytes < file_len {
            rec.truncated_bytes = file_len - end.valid_len_bytes;
            rec.reason = end.tail.clone();
            file.set_len(end.valid_len_bytes)
                .and_then(|()| file.sync_all())
                .with_context(|| format!("truncating the torn tail of {}", path.display()))?;
        }
        Ok((
            AckLog {
                file,
                journal: None,
                path: path.to_path_buf(),
                descriptor,
                appended_acks: checker.acks,
                durable_acks: checker.acks,
                durable_len_bytes: end.valid_len_bytes,
                pending: Vec::new(),
                poisoned: None,
            },
            rec,
        ))
    }

    /// Opens the log of `desc`'s run, or creates it. A log left without a complete
    /// descriptor by a crash during creation held no durable ack and is rewritten.
    pub fn open_or_create(
        storage: &dyn Storage,
        dir: &Path,
        desc: &RunDescriptor,
    ) -> anyhow::Result<(AckLog, Option<Recovery>)> {
        let path = log_path(dir, desc.run_id);
        match storage.exists(&path) {
            Ok(false) => Ok((AckLog::create(storage, dir, desc)?, None)),
            Err(e) => Err(e).with_context(|| format!("inspecting {}", path.display())),
            Ok(true) => {
                if let Some(why) = creation_torn(storage, &path)? {
                    storage
                        .remove(&path)
                        .with_context(|| format!("removing {}", path.display()))?;
                    let log = AckLog::create(storage, dir, desc)?;
                    return Ok((
                        log,
                        Some(Recovery {
                            truncated_bytes: 0,
                            reason: Some(why),
                        }),
                    ));
                }
                let (log, rec) = AckLog::open(storage, &path)?;
                if log.descriptor != *desc {
                    bail!(
                        "run {} is already logged with a different run descriptor; a \
                         writer must not reuse another run's id",
                        desc.run_id
                    );
                }
                Ok((log, Some(rec)))
            }
        }
    }

    /// From now on, commits are made durable by `journal` instead of the log's own
    /// fdatasync.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> AckLog {
        self.journal = Some(journal);
        self
    }

    pub fn descriptor(&self) -> &RunDescriptor {
        &self.descriptor
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Acks appended so far, durable or not.
    pub fn appended_acks(&self) -> u64 {
        self.appended_acks
    }
    /// Acks fdatasync'd: the number the witness may report.
    pub fn durable_acks(&self) -> u64 {
        self.durable_acks
    }
    /// Length of the fdatasync'd prefix of the file.
    pub fn durable_len_bytes(&self) -> u64 {
        self.durable_len_bytes
    }

    /// Appends the acks of a batch numbered from `first` that the log does not have yet
    /// (a writer resends after a reconnect); returns how many were new. A batch that
    /// starts past the end of the log would leave a hole and is refused.
    pub fn append_acks(&mut self, first: u64, acks: &[Ack]) -> anyhow::Result<u64> {
        if first > self.appended_acks {
            bail!(
                "acks {first}.. would leave a gap: the witness has {} acks of this run; \
                 a writer must resend from the Welcome's durable count",
                self.appended_acks
            );
        }
        let skip = (self.appended_acks - first) as usize;
        if skip >= acks.len() {
            return Ok(0);
        }
        let new = &acks[skip..];
        for chunk in new.chunks(msg::MAX_ACKS_PER_FRAME) {
            msg::encode_acks_into(&mut self.pending, self.appended_acks, chunk.iter());
            self.appended_acks += chunk.len() as u64;
        }
        Ok(new.len() as u64)
    }

    pub fn append_event(&mut self, e: &WitnessEvent) {
        Msg::Event(e.clone()).encode_into(&mut self.pending);
    }

    /// Writes everything appended and fdatasyncs once; returns the durable ack count.
    /// Nothing appended is durable unless this returned Ok.
    pub fn commit(&mut self) -> anyhow::Result<u64> {
        if let Some(why) = &self.poisoned {
            bail!("ack log {} failed earlier: {why}", self.path.display());
        }
        if self.pending.is_empty() {
            return Ok(self.durable_acks);
        }
        let start = self.durable_len_bytes;
        let res = self
            .file
            .write_at(&self.pending, start)
            .map_err(anyhow::Error::from)
            .and_then(|()| match &self.journal {
                // The log write above comes first: a checkpoint relies on it.
                Some(j) => j.commit(self.descriptor.run_id, start, &self.pending),
                None => self.file.sync_data().map_err(Into::into),
            });
        if let Err(e) = res {
            let why = format!("{e:#}");
            self.poisoned = Some(why.clone());
            // Best effort: cut what may be a partial frame; recovery on the next open
            // would do the same.
            let _ = self.file.set_len(self.durable_len_bytes);
            bail!(
                "writing ack log {}: {why} (check free space and the disk of the witness \
                 directory)",
                self.path.display()
            );
        }
        self.durable_len_bytes += self.pending.len() as u64;
        self.pending.clear();
        if self.pending.capacity() > 8 << 20 {
            self.pending.shrink_to(1 << 20);
        }
        self.durable_acks = self.appended_acks;
        Ok(self.durable_acks)
    }
}

/// Why a scanned log must not be opened for appending (and its tail not cut), if so.
fn not_recoverable(checker: &LogChecker, end: &ScanEnd) -> Option<String> {
    if let Some(d) = checker.damage.first() {
        return Some(format!(
            "is damaged: {}; so this is not a torn tail{}",
            d.damage,
            match d.acks_lost {
                Some(n) => format!(" ({n} acks lost with the damaged bytes)"),
                None => String::new(),
            }
        ));
    }
    if end.tail_bytes > MAX_TORN_TAIL_BYTES {
        return Some(format!(
            "is damaged: its last {} bytes, from byte {}, are unreadable ({}), more than \
             the {MAX_TORN_TAIL_BYTES} bytes one commit can leave torn",
            end.tail_bytes,
            end.valid_len_bytes,
            end.tail.as_deref().unwrap_or("?")
        ));
    }
    if checker.mark.is_some() {
        return Some(
            "ends in an end mark: it is `plugpull fetch` output, not a log this witness \
             appends to"
                .into(),
        );
    }
    None
}

/// If `path` is a log whose creation was interrupted (a prefix of header + descriptor,
/// nothing else), says why; such a file never held an ack.
fn creation_torn(storage: &dyn Storage, path: &Path) -> anyhow::Result<Option<String>> {
    let f = storage
        .open_read(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut frames = 0;
    let mut header_ok = true;
    let end = scan_frames(io::BufReader::new(FileReader::new(&*f)), |fr| {
        frames += 1;
        if frames == 1 && fr.ty != FrameType::FileHeader {
            header_ok = false;
        }
        Ok(())
    })?;
    let torn = end.damage.is_empty() && end.tail.as_deref().is_none_or(|t| t.starts_with("torn"));
    if frames < 2 && header_ok && torn {
        return Ok(Some(format!(
            "log creation was interrupted ({} frames, {})",
            frames,
            end.tail.as_deref().unwrap_or("empty")
        )));
    }
    Ok(None)
}

/// Reads the descriptor of a log without reading its acks (for the witness's index).
pub fn read_descriptor(storage: &dyn Storage, path: &Path) -> anyhow::Result<RunDescriptor> {
    let f = storage.open_read(path)?;
    let mut checker = LogChecker::default();
    let mut scratch = Vec::new();
    // Stop after the second frame by returning a sentinel error.
    let r = scan_frames(io::BufReader::new(FileReader::new(&*f)), |fr| {
        checker.check(fr, &mut scratch)?;
        if checker.descriptor.is_some() {
            bail!(StopScan);
        }
        Ok(())
    });
    match (r, checker.descriptor) {
        (_, Some(d)) => Ok(d),
        (Err(e), None) => Err(e),
        (Ok(_), None) => bail!("{} holds no complete run descriptor", path.display()),
    }
}

#[derive(Debug)]
struct StopScan;
impl std::fmt::Display for StopScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("scan stopped")
    }
}
impl std::error::Error for StopScan {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::msg::tests::{ack, sample_descriptor};

    fn event(kind: &str) -> WitnessEvent {
        WitnessEvent {
            at_ns: 1,
            kind: kind.into(),
            peer: "p".into(),
            durable_acks: 0,
            last_ack_at_ns: None,
            detail: String::new(),
        }
    }

    #[test]
    fn append_commit_reopen_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(1);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        let acks: Vec<Ack> = (0..10).map(ack).collect();
        assert_eq!(log.append_acks(0, &acks[..6]).unwrap(), 6);
        log.append_event(&event("connect"));
        assert_eq!(log.durable_acks(), 0, "not durable before commit");
        assert_eq!(log.commit().unwrap(), 6);
        // A resend overlapping what is there adds only the new part.
        assert_eq!(log.append_acks(4, &acks[4..]).unwrap(), 4);
        assert!(log.append_acks(11, &acks[..1]).is_err(), "gap refused");
        assert_eq!(log.commit().unwrap(), 10);
        drop(log);

        let (log, rec) = AckLog::open(&FsStorage, &log_path(dir.path(), d.run_id)).unwrap();
        assert_eq!(rec, Recovery::default());
        assert_eq!(log.durable_acks(), 10);
        let r = read_log_file(&log_path(dir.path(), d.run_id)).unwrap();
        assert_eq!(r.descriptor, d);
        assert_eq!(r.acks, acks);
        assert_eq!(r.events, vec![event("connect")]);
        assert_eq!(read_descriptor(&FsStorage, log.path()).unwrap(), d);
    }

    #[test]
    fn torn_tail_truncated_at_every_cut() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(2);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        let acks: Vec<Ack> = (0..30).map(ack).collect();
        let mut ends = vec![log.durable_len_bytes()];
        for c in acks.chunks(10) {
            let first = log.appended_acks();
            log.append_acks(first, c).unwrap();
            log.commit().unwrap();
            ends.push(log.durable_len_bytes());
        }
        let path = log.path().to_path_buf();
        drop(log);
        let full = std::fs::read(&path).unwrap();
        for cut in ends[0] as usize..full.len() {
            std::fs::write(&path, &full[..cut]).unwrap();
            let complete = ends.iter().rposition(|&e| e as usize <= cut).unwrap();
            let keep = ends[complete];
            // read-only reading tolerates the tail and leaves the file alone
            assert_eq!(read_log_file(&path).unwrap().acks.len(), complete * 10);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), cut as u64);
            let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
            assert_eq!(log.durable_acks(), complete as u64 * 10, "cut {cut}");
            assert_eq!(rec.truncated_bytes, cut as u64 - keep);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
        }
    }

    #[test]
    fn garbage_tail_and_bit_flip_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(3);
        let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
        log.append_acks(0, &[ack(0), ack(1)]).unwrap();
        log.commit().unwrap();
        let keep = log.durable_len_bytes();
        log.append_acks(2, &[ack(2)]).unwrap();
        log.commit().unwrap();
        let path = log.path().to_path_buf();
        drop(log);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0x40;
        bytes.extend_from_slice(b"garbage garbage");
        std::fs::write(&path, &bytes).unwrap();
        let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
        assert_eq!(log.durable_acks(), 2);
        assert!(rec.reason.unwrap().contains("checksum"));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
    }

    /// A log of `commits` commits of 10 acks each (one Acks frame per commit); returns
    /// its path and the end of every frame from the descriptor on.
    fn log_of_commits(dir: &Path, seed: u8, commits: u64) -> (PathBuf, Vec<u64>) {
        let mut log = AckLog::create(&FsStorage, dir, &sample_descriptor(seed)).unwrap();
        let mut ends = vec![log.durable_len_bytes()];
        for c in 0..commits {
            let acks: Vec<Ack> = (c * 10..c * 10 + 10).map(ack).collect();
            log.append_acks(c * 10, &acks).unwrap();
            log.commit().unwrap();
            ends.push(log.durable_len_bytes());
        }
        (log.path().to_path_buf(), ends)
    }

    /// Issue 11, defect 1: one bad frame with valid frames after it is corruption, not a
    /// torn tail. Opening refuses and leaves the file byte for byte; reading keeps every
    /// valid frame and names the damage. At every byte of every frame but the last.
    #[test]
    fn corruption_followed_by_valid_frames_is_never_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let (path, ends) = log_of_commits(dir.path(), 7, 4);
        let full = std::fs::read(&path).unwrap();
        for pos in ends[0]..ends[3] {
            let mut bytes = full.clone();
            bytes[pos as usize] ^= 1 << (pos % 8);
            std::fs::write(&path, &bytes).unwrap();
            let e = AckLog::open(&FsStorage, &path)
                .err()
                .map(|e| format!("{e:#}"));
            assert!(
                e.as_deref().is_some_and(|e| e.contains("damaged")),
                "{pos}: {e:?}"
            );
            assert!(
                std::fs::read(&path).unwrap() == bytes,
                "flip at {pos} changed the file"
            );
            let r = read_log_file(&path).unwrap();
            let damage: Vec<_> = r.events.iter().filter(|e| e.kind == DAMAGE_EVENT).collect();
            assert_eq!(damage.len(), 1, "flip at {pos}: {:?}", r.events);
            let frame = ends.iter().rposition(|&e| e <= pos).unwrap();
            assert!(
                damage[0]
                    .detail
                    .contains(&format!("at byte {}", ends[frame])),
                "flip at {pos}: {}",
                damage[0].detail
            );
            assert_eq!(
                r.acks.len(),
                30,
                "flip at {pos}: the other frames' acks are read"
            );
        }
    }

    /// A tail with nothing valid after it is torn only up to what one commit can append;
    /// more is damage, kept for someone to look at.
    #[test]
    fn unreadable_tail_longer_than_one_commit_is_not_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = log_of_commits(dir.path(), 8, 2);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.resize(bytes.len() + MAX_TORN_TAIL_BYTES as usize + 1, 0xab);
        std::fs::write(&path, &bytes).unwrap();
        assert!(AckLog::open(&FsStorage, &path).is_err());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
    }

    #[test]
    fn interrupted_creation_is_rewritten_but_foreign_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = sample_descriptor(4);
        let path = log_path(dir.path(), d.run_id);
        let mut header = Vec::new();
        Msg::FileHeader {
            version: LOG_VERSION,
        }
        .encode_into(&mut header);
        let mut desc_frame = Vec::new();
        Msg::Descriptor(d.clone()).encode_into(&mut desc_frame);
        header.extend_from_slice(&desc_frame[..desc_frame.len() - 5]);
        std::fs::write(&path, &header).unwrap();
        let (log, rec) = AckLog::open_or_create(&FsStorage, dir.path(), &d).unwrap();
        assert!(rec.unwrap().reason.unwrap().contains("interrupted"));
        assert_eq!(log.durable_acks(), 0);
        drop(log);

        let other = sample_descriptor(5);
        let p2 = log_path(dir.path(), other.run_id);
        std::fs::write(&p2, b"this is somebody's file, not a log").unwrap();
        assert!(AckLog::open_or_create(&FsStorage, dir.path(), &other).is_err());
        assert_eq!(
            std::fs::read(&p2).unwrap(),
            b"this is somebody's file, not a log"
        );
        // Same run id, different descriptor: refused, file unchanged.
        let before = std::fs::read(&path).unwrap();
        let mut forged = d.clone();
        forged.host = "evil".into();
        assert!(AckLog::open_or_create(&FsStorage, dir.path(), &forged).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    fn run_log(seed: u8, acks: u64) -> RunLog {
        RunLog {
            descriptor: sample_descriptor(seed),
            acks: (0..acks).map(ack).collect(),
            events: vec![event("bye")],
        }
    }

    fn key(secret: &str) -> Key {
        Key::from_secret(secret.as_bytes()).unwrap()
    }

    /// Ends of every frame of a file, in order.
    fn frame_ends(bytes: &[u8]) -> Vec<usize> {
        let mut ends = vec![];
        let mut at = 0;
        while let Decoded::Frame(f) = frame::decode(&bytes[at..]) {
            at += f.len_bytes;
            ends.push(at);
        }
        ends
    }

    /// Issue 11, defect 1: `verify --acks` trusted its file, so one cut where a frame
    /// ends passed. Every such cut is now "not whole"; only the full file is.
    #[test]
    fn log_cut_short_at_frame_boundary_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.acklog");
        write_log_file(&p, &run_log(9, 3 * FILE_ACKS_PER_FRAME as u64 + 5)).unwrap();
        let full = std::fs::read(&p).unwrap();
        let ends = frame_ends(&full);
        assert_eq!(*ends.last().unwrap(), full.len());
        let (_, w) = read_log_file_checked(&p, None).unwrap();
        assert!(w.whole, "{w:?}");
        for &cut in &ends[1..ends.len() - 1] {
            std::fs::write(&p, &full[..cut]).unwrap();
            let (_, w) = read_log_file_checked(&p, None).unwrap();
            assert!(!w.whole, "cut at {cut}: {w:?}");
        }
    }

    /// Any one flipped bit of a fetched log: an error (header, descriptor) or "not
    /// whole", never whole.
    #[test]
    fn every_bit_flip_in_a_fetched_log_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.acklog");
        write_log_file(&p, &run_log(10, 12)).unwrap();
        let full = std::fs::read(&p).unwrap();
        for pos in 0..full.len() {
            let mut b = full.clone();
            b[pos] ^= 1 << (pos % 8);
            std::fs::write(&p, &b).unwrap();
            if let Ok((_, w)) = read_log_file_checked(&p, None) {
                assert!(!w.whole, "flip at {pos}: {w:?}");
            }
        }
    }

    /// A forger who edits the acks and writes a fresh unkeyed mark passes the digest;
    /// only a signed mark checked with the key catches that.
    #[test]
    fn forged_log_is_detected_only_with_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.acklog");
        let (good, other) = (
            key("the witness key, 32 bytes long.."),
            key("another key entirely, also long"),
        );
        let log = run_log(11, 100);
        write_log_file_keyed(&p, &log, Some(&good)).unwrap();
        assert!(read_log_file_checked(&p, Some(&good)).unwrap().1.whole);
        let (_, w) = read_log_file_checked(&p, None).unwrap();
        assert!(w.whole && w.how.contains("not checked"), "{w:?}");
        assert!(!read_log_file_checked(&p, Some(&other)).unwrap().1.whole);
        // Forged: one ack dropped, a new mark computed without the key.
        let mut forged = log.clone();
        forged.acks.pop();
        write_log_file(&p, &forged).unwrap();
        assert!(
            read_log_file_checked(&p, None).unwrap().1.whole,
            "the digest alone cannot tell"
        );
        let (_, w) = read_log_file_checked(&p, Some(&good)).unwrap();
        assert!(!w.whole && w.how.contains("not signed"), "{w:?}");
        // Forged with a mark signed by a key that is not the witness's.
        write_log_file_keyed(&p, &forged, Some(&other)).unwrap();
        let (_, w) = read_log_file_checked(&p, Some(&good)).unwrap();
        assert!(!w.whole && w.how.contains("signature"), "{w:?}");
    }

    /// A fetched file dropped into a witness directory is not appended to.
    #[test]
    fn witness_refuses_to_append_to_a_fetched_file() {
        let dir = tempfile::tempdir().unwrap();
        let rl = run_log(12, 10);
        let p = log_path(dir.path(), rl.descriptor.run_id);
        write_log_file(&p, &rl).unwrap();
        let before = std::fs::read(&p).unwrap();
        let e = format!("{:#}", AckLog::open(&FsStorage, &p).err().expect("refused"));
        assert!(e.contains("end mark"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), before);
    }

    #[test]
    fn write_log_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let rl = RunLog {
            descriptor: sample_descriptor(6),
            acks: (0..10_000).map(ack).collect(),
            events: vec![event("bye")],
        };
        let p = dir.path().join("out.acklog");
        write_log_file(&p, &rl).unwrap();
        let back = read_log_file(&p).unwrap();
        assert_eq!(back.acks, rl.acks);
        assert_eq!(back.events, rl.events);
        assert_eq!(back.descriptor, rl.descriptor);
    }
}
