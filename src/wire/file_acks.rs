//! The file ack frame (`FileAcks`, type 0x0A): acks of a tree run that name their file.
//!
//! Why a frame of its own: a tree run acknowledges whole files (docs/tree.md), and the
//! issue asks that the witness hold which name each acknowledged file must have, not only
//! its id. Each entry is the ordinary 40-byte ack entry (stream 0, seq = the file id in
//! the stamps, offset 0, the file's sectors, the times) followed by the final path and the
//! temporary name it was renamed from. Entries are numbered in the same sequence as the
//! run's other acks, so `Durable(n)`, resends after a reconnect and `--max-unconfirmed`
//! count them like any ack. An old log (tree acks in plain Acks frames) stays readable;
//! its names come from the plan.
//!
//! Payload layout (little endian; docs/protocol.md has it byte by byte):
//! ```text
//! first u64 | count u32 |
//! count x (ack entry, 40 bytes | path_len u16 | path | from_len u16 | from)
//! ```
//! `from_len` 0: the file was written under its final name. This module checks only the
//! shape (lengths, UTF-8, at most [`MAX_FILE_PATH_BYTES`]); which names a writer can send
//! is `witness::validate`'s rule.

use crate::model::{Ack, FileName};
use crate::wire::entry::{ACK_ENTRY_BYTES, get_ack, put_ack};
use crate::wire::frame::{self, FrameType};

/// Longest path (or temporary name) in a file entry, in bytes (Linux's PATH_MAX).
pub const MAX_FILE_PATH_BYTES: usize = 4096;
/// Most entries one FileAcks frame holds.
pub const MAX_FILE_ACKS_PER_FRAME: usize = 1024;
/// The encoder starts no new entry once a payload is this large, so a frame stays below
/// the smallest frame limit a witness may set (256 KiB, `listen --max-frame-bytes`) even
/// when its last entry has two names of [`MAX_FILE_PATH_BYTES`].
pub const FILE_ACKS_FRAME_BUDGET_BYTES: usize = 128 << 10;
/// Bytes before the entries: first ack number u64, count u32.
pub const FILE_ACKS_HEADER_BYTES: usize = 12;
/// Smallest entry: the ack entry and two empty names.
pub const MIN_FILE_ENTRY_BYTES: usize = ACK_ENTRY_BYTES + 4;

/// Appends one FileAcks frame holding the entries of `acks` from the front, numbered from
/// `first`, up to [`MAX_FILE_ACKS_PER_FRAME`] entries and the byte budget; returns how
/// many it took (at least one when `acks` is not empty).
pub fn encode_file_acks_into<'a>(
    out: &mut Vec<u8>,
    first: u64,
    acks: impl Iterator<Item = (&'a Ack, &'a FileName)>,
) -> usize {
    encode_limited(out, first, acks, FILE_ACKS_FRAME_BUDGET_BYTES)
}

/// [`encode_file_acks_into`] with the byte budget `budget_bytes` (`usize::MAX`: re-encode
/// a decoded frame whole, as `Msg::encode` does).
pub fn encode_limited<'a>(
    out: &mut Vec<u8>,
    first: u64,
    acks: impl Iterator<Item = (&'a Ack, &'a FileName)>,
    budget_bytes: usize,
) -> usize {
    let start = frame::begin_frame(out, FrameType::FileAcks);
    let payload = out.len();
    out.extend_from_slice(&first.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let mut n = 0usize;
    for (a, name) in acks {
        if n == MAX_FILE_ACKS_PER_FRAME || out.len() - payload >= budget_bytes {
            break;
        }
        put_ack(out, a);
        put_name(out, &name.path);
        put_name(out, name.renamed_from.as_deref().unwrap_or(""));
        n += 1;
    }
    out[payload + 8..payload + 12].copy_from_slice(&(n as u32).to_le_bytes());
    frame::end_frame(out, start);
    n
}

fn put_name(out: &mut Vec<u8>, name: &str) {
    assert!(
        name.len() <= MAX_FILE_PATH_BYTES,
        "a file name of {} bytes is longer than a file entry holds",
        name.len()
    );
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
}

/// Why a FileAcks payload is malformed.
#[derive(Debug)]
pub struct Malformed(pub String);

/// Decodes a FileAcks payload, appending its acks to `acks` and their names to `names`
/// (one per ack); returns the first ack number. On error both are as they were.
pub fn decode_file_acks_into(
    p: &[u8],
    acks: &mut Vec<Ack>,
    names: &mut Vec<FileName>,
) -> Result<u64, Malformed> {
    let (acks_at, names_at) = (acks.len(), names.len());
    let r = decode(p, acks, names);
    if r.is_err() {
        acks.truncate(acks_at);
        names.truncate(names_at);
    }
    r
}

fn decode(p: &[u8], acks: &mut Vec<Ack>, names: &mut Vec<FileName>) -> Result<u64, Malformed> {
    let bad = |m: String| Err(Malformed(m));
    if p.len() < FILE_ACKS_HEADER_BYTES {
        return bad(format!(
            "FileAcks payload of {} bytes is shorter than its 12-byte header",
            p.len()
        ));
    }
    let first = crate::le::u64_at(p, 0);
    let count = crate::le::u32_at(p, 8) as usize;
    if count > MAX_FILE_ACKS_PER_FRAME {
        return bad(format!(
            "FileAcks payload says {count} entries, more than {MAX_FILE_ACKS_PER_FRAME}"
        ));
    }
    if first.checked_add(count as u64).is_none() {
        return bad(format!(
            "FileAcks numbering overflows (first {first}, count {count})"
        ));
    }
    let mut at = FILE_ACKS_HEADER_BYTES;
    for i in 0..count {
        let Some(e) = p.get(at..at + ACK_ENTRY_BYTES) else {
            return bad(format!("FileAcks entry {i} of {count} is cut short"));
        };
        let a = get_ack(e);
        // No real file ends past u64::MAX; a forged one must not overflow verify later.
        if a.record.offset.checked_add(a.record.len_bytes()).is_none() {
            return bad(format!(
                "file ack {} ends past the largest byte offset",
                first + i as u64
            ));
        }
        at += ACK_ENTRY_BYTES;
        let path = get_name(p, &mut at, i, "path")?;
        let from = get_name(p, &mut at, i, "temporary name")?;
        acks.push(a);
        names.push(FileName {
            path,
            renamed_from: (!from.is_empty()).then_some(from),
        });
    }
    if at != p.len() {
        return bad(format!(
            "FileAcks payload has {} bytes after its {count} entries",
            p.len() - at
        ));
    }
    Ok(first)
}

fn get_name(p: &[u8], at: &mut usize, i: usize, what: &str) -> Result<String, Malformed> {
    let cut = || Malformed(format!("FileAcks entry {i}: its {what} is cut short"));
    let len = p.get(*at..*at + 2).ok_or_else(cut)?;
    let len = crate::le::u16_at(len, 0) as usize;
    if len > MAX_FILE_PATH_BYTES {
        return Err(Malformed(format!(
            "FileAcks entry {i}: its {what} is {len} bytes, more than {MAX_FILE_PATH_BYTES}"
        )));
    }
    let bytes = p.get(*at + 2..*at + 2 + len).ok_or_else(cut)?;
    *at += 2 + len;
    String::from_utf8(bytes.to_vec())
        .map_err(|_| Malformed(format!("FileAcks entry {i}: its {what} is not UTF-8")))
}

/// Whether a FileAcks frame with `len` (type + payload) bytes whose payload starts with
/// `p` has the shape every such frame plugpull writes has (for resynchronising past
/// damage, module `witness::store::scan`).
pub fn plausible(len: usize, p: &[u8]) -> bool {
    let payload = len - 1;
    if p.len() < FILE_ACKS_HEADER_BYTES {
        return false;
    }
    let count = crate::le::u32_at(p, 8) as usize;
    (1..=MAX_FILE_ACKS_PER_FRAME).contains(&count)
        && payload >= FILE_ACKS_HEADER_BYTES + count * MIN_FILE_ENTRY_BYTES
}

#[cfg(test)]
mod tests;
