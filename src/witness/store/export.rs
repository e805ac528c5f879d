//! The self-checking log file `plugpull fetch -o` writes: a run's log ending in an end
//! mark (LogEnd) with the ack count, the frame count and a BLAKE3 digest (a MAC with the
//! witness key when given) of everything before it.
//!
//! Why: a file cut at a frame boundary, spliced from two logs or edited with fixed-up
//! checksums looks like a good log. Only the end mark lets `verify --acks` say the file
//! is whole (module `checker` checks it). Layout in docs/protocol.md.

use crate::model::{Ack, FileName, RunDescriptor, RunLog, WitnessEvent};
use crate::userfile::TempFile;
use crate::wire::auth::Key;
use crate::wire::file_acks;
use crate::wire::frame::{self, FrameType};
use crate::wire::msg;
use crate::wire::msg::{LOG_VERSION, Msg};
use crate::witness::store::error::{Context, StoreError, StoreResult, invalid};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Acks per frame when the witness or fetch writes a whole run at once.
pub const FILE_ACKS_PER_FRAME: usize = 4096;

/// Magic at the start of a LogEnd payload.
pub const END_MARK_MAGIC: [u8; 8] = *b"PPLOGEND";
/// Bytes of a LogEnd payload before the optional MAC.
pub(crate) const END_MARK_BYTES: usize = 8 + 8 + 8 + 8 + 32 + 1;
/// LogEnd flag: a 32-byte MAC follows.
const END_MARK_KEYED: u8 = 1;

/// The last frame of a `plugpull fetch` output file (layout in docs/protocol.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EndMark {
    pub(crate) acks: u64,
    pub(crate) frames: u64,
    pub(crate) bytes: u64,
    pub(crate) digest: [u8; 32],
    pub(crate) mac: Option<[u8; 32]>,
    /// The payload bytes the MAC covers.
    pub(crate) signed: Vec<u8>,
}

impl EndMark {
    pub(crate) fn decode(p: &[u8]) -> StoreResult<EndMark> {
        if p.len() < END_MARK_BYTES || p[..8] != END_MARK_MAGIC {
            invalid!("the log's end mark is malformed (magic or length)");
        }
        let u64_at = |at: usize| crate::le::u64_at(p, at);
        let keyed = p[END_MARK_BYTES - 1] & END_MARK_KEYED != 0;
        let want = END_MARK_BYTES + if keyed { 32 } else { 0 };
        if p.len() != want {
            invalid!("the log's end mark is {} bytes, expected {want}", p.len());
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

/// Writes `log` as a log file (what `plugpull fetch -o` produces) and fsyncs it. Written
/// to a temporary file beside `path` ([`TempFile`]) and renamed, so a crash never leaves
/// a half file under `path`.
/// It ends in an unsigned end mark; see [`write_log_file_keyed`].
pub fn write_log_file(path: &Path, log: &RunLog) -> StoreResult<()> {
    write_log_file_keyed(path, log, None)
}

/// [`write_log_file`] with an end mark signed with `key` when given: the ack count,
/// the frame count, the byte count and the BLAKE3 digest of every byte before it.
pub fn write_log_file_keyed(path: &Path, log: &RunLog, key: Option<&Key>) -> StoreResult<()> {
    let mut acks = log.acks.iter().copied();
    write_log_file_named(
        path,
        &log.descriptor,
        &mut acks,
        &log.files,
        &log.events,
        key,
    )
}

/// [`write_log_file_keyed`] from acks produced on the fly: a log of 100 M synthetic acks
/// (examples/synthacks.rs, for verify at scale) is written without holding them all.
pub fn write_log_file_from(
    path: &Path,
    descriptor: &RunDescriptor,
    acks: &mut dyn Iterator<Item = Ack>,
    events: &[WitnessEvent],
    key: Option<&Key>,
) -> StoreResult<()> {
    write_log_file_named(path, descriptor, acks, &BTreeMap::new(), events, key)
}

/// [`write_log_file_from`] where the acks at the indexes of `files` are file acks:
/// they go into FileAcks frames with their names.
fn write_log_file_named(
    path: &Path,
    descriptor: &RunDescriptor,
    acks: &mut dyn Iterator<Item = Ack>,
    files: &BTreeMap<usize, FileName>,
    events: &[WitnessEvent],
    key: Option<&Key>,
) -> StoreResult<()> {
    let mut w = LogFileWriter::create(path, descriptor)?;
    w.files = files.clone();
    let mut chunk = Vec::with_capacity(FILE_ACKS_PER_FRAME);
    loop {
        chunk.clear();
        chunk.extend((&mut *acks).take(FILE_ACKS_PER_FRAME));
        if chunk.is_empty() {
            break;
        }
        w.push(&chunk)?;
    }
    w.finish(events, key)
}

/// A log file like [`write_log_file_keyed`]'s, written as the acks arrive: what `verify
/// --witness` streams a fetch reply into, so a run of any length is judged in memory
/// that does not grow with it (module `verify::scale` reads the file twice). The same
/// bytes as [`write_log_file_keyed`] for the same acks: frames of
/// [`FILE_ACKS_PER_FRAME`] acks, events after the acks, the end mark.
pub struct LogFileWriter {
    path: std::path::PathBuf,
    tmp: TempFile,
    out: DigestingWriter,
    buf: Vec<u8>,
    /// Acks not yet encoded: fewer than [`FILE_ACKS_PER_FRAME`].
    chunk: Vec<Ack>,
    acks: u64,
    /// File names of acks not yet encoded, by ack number: they go into FileAcks frames.
    files: BTreeMap<usize, FileName>,
}

impl LogFileWriter {
    /// Starts the file (a [`TempFile`] beside `path`) with header and descriptor.
    pub fn create(path: &Path, descriptor: &RunDescriptor) -> StoreResult<LogFileWriter> {
        LogFileWriter::create_via(path, None, descriptor)
    }

    /// [`LogFileWriter::create`] written first to `part` if given (a name the caller
    /// made and removes itself where no `Drop` runs, as a Ctrl-C handler does), else to
    /// a random name beside `path`.
    pub fn create_via(
        path: &Path,
        part: Option<&Path>,
        descriptor: &RunDescriptor,
    ) -> StoreResult<LogFileWriter> {
        let (tmp, f) = match part {
            None => temp_beside(path)?,
            Some(part) => TempFile::at(part, 0o600)
                .map_err(|e| StoreError::Invalid(crate::exit::error_chain(&e)))?,
        };
        let mut buf = Vec::with_capacity(1 << 20);
        Msg::FileHeader {
            version: LOG_VERSION,
        }
        .encode_into(&mut buf);
        Msg::Descriptor(descriptor.clone()).encode_into(&mut buf);
        Ok(LogFileWriter {
            path: path.to_path_buf(),
            tmp,
            out: DigestingWriter {
                f,
                digest: blake3::Hasher::new(),
                bytes: 0,
                frames: 2,
            },
            buf,
            chunk: Vec::with_capacity(FILE_ACKS_PER_FRAME),
            acks: 0,
            files: BTreeMap::new(),
        })
    }

    /// Appends acks (numbered on from the last: a fetch's gaps are not kept, as in
    /// [`write_log_file_keyed`] of the fetched run).
    pub fn push(&mut self, mut acks: &[Ack]) -> StoreResult<()> {
        while !acks.is_empty() {
            let take = (FILE_ACKS_PER_FRAME - self.chunk.len()).min(acks.len());
            self.chunk.extend_from_slice(&acks[..take]);
            acks = &acks[take..];
            if self.chunk.len() == FILE_ACKS_PER_FRAME {
                self.encode_chunk()?;
            }
        }
        Ok(())
    }

    /// [`LogFileWriter::push`] of acks that name their files (`names[i]` is `acks[i]`'s;
    /// `names` empty: plain acks).
    pub fn push_named(&mut self, acks: &[Ack], names: &[FileName]) -> StoreResult<()> {
        let at = self.acks() as usize;
        self.files.extend((at..).zip(names.iter().cloned()));
        self.push(acks)
    }

    fn encode_chunk(&mut self) -> StoreResult<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let before = self.buf.len();
        encode_chunk(&mut self.buf, self.acks, &self.chunk, &self.files);
        self.out.frames += count_frames(&self.buf[before..]);
        self.acks += self.chunk.len() as u64;
        self.chunk.clear();
        // Names of encoded acks are not needed again.
        self.files = self.files.split_off(&(self.acks as usize));
        if self.buf.len() >= 1 << 20 {
            self.write_buf()?;
        }
        Ok(())
    }

    fn write_buf(&mut self) -> StoreResult<()> {
        self.out
            .write(&self.buf)
            .with_context(|| format!("writing {}", self.tmp.path().display()))?;
        self.buf.clear();
        Ok(())
    }

    /// Acks pushed so far.
    pub fn acks(&self) -> u64 {
        self.acks + self.chunk.len() as u64
    }

    /// Ends the file with `events` and the end mark (signed with `key` if given), fsyncs
    /// it and renames it to its name.
    pub fn finish(mut self, events: &[WitnessEvent], key: Option<&Key>) -> StoreResult<()> {
        self.encode_chunk()?;
        for e in events {
            Msg::Event(e.clone()).encode_into(&mut self.buf);
            self.out.frames += 1;
        }
        self.write_buf()?;
        let digest = *self.out.digest.finalize().as_bytes();
        let (frames, bytes) = (self.out.frames, self.out.bytes);
        encode_end_mark(&mut self.buf, self.acks, frames, bytes, &digest, key);
        let f = &mut self.out.f;
        f.write_all(&self.buf)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("writing {}", self.tmp.path().display()))?;
        self.tmp
            .rename_to(&self.path)
            .map_err(|e| StoreError::Invalid(crate::exit::error_chain(&e)))
    }
}

/// The temporary file (`userfile::TempFile`, mode 0600) a log file is written to before
/// it is renamed to its name: `fetch -o NAME` runs in directories others can write.
fn temp_beside(path: &Path) -> StoreResult<(TempFile, File)> {
    TempFile::beside(path, 0o600).map_err(|e| StoreError::Invalid(crate::exit::error_chain(&e)))
}

/// Appends the frames of `chunk`, acks numbered from `first`: FileAcks frames for the
/// stretches that `files` names (keyed by ack number), PackedAcks for the rest.
fn encode_chunk(out: &mut Vec<u8>, first: u64, chunk: &[Ack], files: &BTreeMap<usize, FileName>) {
    let base = first as usize;
    let named = |i: usize| files.get(&(base + i));
    let mut i = 0;
    while i < chunk.len() {
        if named(i).is_some() {
            let names = (i..chunk.len()).map_while(named);
            i += file_acks::encode_file_acks_into(
                out,
                first + i as u64,
                chunk[i..].iter().zip(names),
            );
        } else {
            let j = (i..chunk.len())
                .find(|&j| named(j).is_some())
                .unwrap_or(chunk.len());
            msg::encode_acks_packed_into(out, first + i as u64, &chunk[i..j]);
            i = j;
        }
    }
}

/// How many whole frames `b` holds (the encoder's output, so every length is sound).
fn count_frames(mut b: &[u8]) -> u64 {
    let mut n = 0;
    while b.len() >= frame::LEN_BYTES {
        let len = crate::le::u32_at(b, 0) as usize;
        b = &b[(frame::LEN_BYTES + len + frame::CRC_BYTES).min(b.len())..];
        n += 1;
    }
    n
}

/// Writes whole frames to a file, keeping the digest and counts the end mark needs.
struct DigestingWriter {
    f: File,
    digest: blake3::Hasher,
    bytes: u64,
    frames: u64,
}

impl DigestingWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.digest.update(b);
        self.bytes += b.len() as u64;
        self.f.write_all(b)
    }
}
