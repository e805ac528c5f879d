//! Work files: the acks of one part of the region (and the failed records of one part)
//! spilled to disk while verify judges another part, and read back in ack order.
//!
//! Why a codec of its own and not the witness log's: a part's acks are a subsequence of
//! the run (every ack number is kept, to put failures back in ack order), and the file
//! lives for one verify only, so it needs no version, no key and no end mark; it needs to
//! be small (a 1 G-ack run spills every ack once) and to catch a bad disk. Each ack is
//! stored as LEB128 varints of its differences from the ack before it in the file
//! (number, offset, stream, seq, size, both times: 8 to 14 bytes for a ring's acks), in
//! blocks of at most [`BLOCK_BYTES`] with their length and CRC-32:
//! ```text
//! block: payload_len u32 LE | crc32(payload) u32 LE | payload
//! payload: per ack  d_idx | zigzag(d_offset) | stream | zigzag(d_seq) | sectors |
//!          zigzag(d_write_ns) | flushed_ns - write_ns (zigzag), then for a failure file
//!          the tally: a mask of its nonzero counts (bit 0 intact, then superseded old
//!          blank foreign corrupt misplaced unreadable, bit 8 corrupt_bits) and those
//! ```
//! The files are unlinked as soon as they are made (`TempFile`): nothing is left behind
//! when verify ends, however it ends.

use crate::le::u32_at;
use crate::model::Ack;
use crate::record::RecordId;
use crate::verify::classify::SectorTally;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A block's payload is written once it reaches this many bytes.
pub const BLOCK_BYTES: usize = 16 << 10;

/// A file in the work directory with no name: removed by the kernel when closed, even
/// if verify is killed.
pub struct TempFile {
    file: File,
}

impl TempFile {
    /// A new unnamed file in `dir`: `O_TMPFILE` where the file system has it, else a
    /// named file unlinked at once.
    pub fn new_in(dir: &Path) -> io::Result<TempFile> {
        let tmp = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(dir);
        let file = match tmp {
            Ok(f) => f,
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    || e.kind() == io::ErrorKind::NotFound =>
            {
                return Err(e);
            }
            Err(_) => named_then_unlinked(dir)?,
        };
        Ok(TempFile { file })
    }
}

fn named_then_unlinked(dir: &Path) -> io::Result<File> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf = dir.join(format!(".plugpull-verify-{}-{n}.tmp", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// The ack (and tally) before, which the next one is stored as a difference from.
#[derive(Default, Clone, Copy)]
struct Prev {
    idx: u64,
    offset: u64,
    seq: u64,
    write_ns: u64,
}

/// Appends acks, numbered in the run, to a work file.
pub struct Writer {
    file: TempFile,
    block: Vec<u8>,
    prev: Prev,
    bytes: u64,
    /// Acks written.
    pub count: u64,
    segment_start: u64,
    segment_count: u64,
}

impl Writer {
    pub fn new(file: TempFile) -> Writer {
        Writer {
            file,
            block: Vec::with_capacity(BLOCK_BYTES + 128),
            prev: Prev::default(),
            bytes: 0,
            count: 0,
            segment_start: 0,
            segment_count: 0,
        }
    }

    /// Appends ack number `idx` (greater than the last one's), with its tally for a
    /// failure file.
    pub fn push(&mut self, idx: u64, a: &Ack, tally: Option<&SectorTally>) -> io::Result<()> {
        debug_assert!(self.count == self.segment_count || idx > self.prev.idx);
        let r = &a.record;
        let b = &mut self.block;
        put(b, idx - self.prev.idx);
        put(b, zigzag(r.offset.wrapping_sub(self.prev.offset)));
        put(b, r.stream as u64);
        put(b, zigzag(r.seq.wrapping_sub(self.prev.seq)));
        put(b, r.sectors as u64);
        put(b, zigzag(r.write_time_ns.wrapping_sub(self.prev.write_ns)));
        put(b, zigzag(a.flushed_ns.wrapping_sub(r.write_time_ns)));
        if let Some(t) = tally {
            // A mask of the counts that are not zero, then those: a lost record's tally
            // is two bytes.
            let n = counts(t);
            let mask = n
                .iter()
                .enumerate()
                .fold(0u64, |m, (i, &v)| m | ((v != 0) as u64) << i);
            put(b, mask);
            n.iter().filter(|&&v| v != 0).for_each(|&v| put(b, v));
        }
        self.prev = Prev {
            idx,
            offset: r.offset,
            seq: r.seq,
            write_ns: r.write_time_ns,
        };
        self.count += 1;
        if self.block.len() >= BLOCK_BYTES {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(self.block.len() as u32).to_le_bytes());
        head[4..].copy_from_slice(&crc32fast::hash(&self.block).to_le_bytes());
        self.file.file.write_all(&head)?;
        self.file.file.write_all(&self.block)?;
        self.bytes += 8 + self.block.len() as u64;
        self.block.clear();
        Ok(())
    }

    /// Bytes on disk so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Ends a segment: the acks pushed since the last one can be read back
    /// ([`Segment::reader`]) while the file goes on growing; the next ack starts anew
    /// (no difference from this segment's last).
    pub fn end_segment(&mut self) -> io::Result<Segment> {
        self.flush_block()?;
        let s = Segment {
            start: self.segment_start,
            count: self.count - self.segment_count,
        };
        self.segment_start = self.bytes;
        self.segment_count = self.count;
        self.prev = Prev::default();
        Ok(s)
    }

    /// The file, written out, to read back: every ack pushed since the last segment.
    pub fn finish(mut self) -> io::Result<(Arc<File>, Segment)> {
        let s = self.end_segment()?;
        Ok((Arc::new(self.file.file), s))
    }
}

/// Where a run of acks lies in a work file, to read them back.
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    start: u64,
    count: u64,
}

impl Segment {
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Reads this segment of `file`; `tallies`: written with tallies (a failure file).
    pub fn reader(&self, file: &Arc<File>, tallies: bool) -> Reader {
        Reader {
            file: file.clone(),
            pos: self.start,
            block: vec![],
            at: 0,
            prev: Prev::default(),
            tallies,
            left: self.count,
        }
    }
}

/// Reads a segment of a work file back, ack by ack (positioned reads: several readers
/// share one file).
pub struct Reader {
    file: Arc<File>,
    pos: u64,
    block: Vec<u8>,
    at: usize,
    prev: Prev,
    tallies: bool,
    left: u64,
}

/// One ack read back: its number in the run, the ack, and its tally in a failure file.
pub type Entry = (u64, Ack, SectorTally);

impl Reader {
    /// The next ack, None after the last. A file that does not read back as written (a
    /// failing disk) is an error, never a wrong ack.
    pub fn next_entry(&mut self) -> io::Result<Option<Entry>> {
        if self.left == 0 {
            return Ok(None);
        }
        if self.at == self.block.len() {
            self.read_block()?;
        }
        let mut c = Cursor {
            p: &self.block,
            at: self.at,
        };
        let p = self.prev;
        let idx = p.idx + c.get()?;
        let offset = p.offset.wrapping_add(unzigzag(c.get()?));
        let stream = u16::try_from(c.get()?).map_err(|_| bad("a stream past u16"))?;
        let seq = p.seq.wrapping_add(unzigzag(c.get()?));
        let sectors = u32::try_from(c.get()?).map_err(|_| bad("a size past u32"))?;
        let write_time_ns = p.write_ns.wrapping_add(unzigzag(c.get()?));
        let flushed_ns = write_time_ns.wrapping_add(unzigzag(c.get()?));
        let mut t = SectorTally::default();
        if self.tallies {
            let mask = c.get()?;
            if mask >> 9 != 0 {
                return Err(bad("a tally of unknown counts"));
            }
            let mut n = [0u64; 9];
            for (i, v) in n.iter_mut().enumerate() {
                if mask >> i & 1 == 1 {
                    *v = c.get()?;
                }
            }
            let sectors = |v: u64| u32::try_from(v).map_err(|_| bad("a tally past u32"));
            t = SectorTally {
                intact: sectors(n[0])?,
                superseded: sectors(n[1])?,
                old: sectors(n[2])?,
                blank: sectors(n[3])?,
                foreign: sectors(n[4])?,
                corrupt: sectors(n[5])?,
                misplaced: sectors(n[6])?,
                unreadable: sectors(n[7])?,
                corrupt_bits: n[8],
            };
        }
        self.at = c.at;
        self.prev = Prev {
            idx,
            offset,
            seq,
            write_ns: write_time_ns,
        };
        self.left -= 1;
        let record = RecordId {
            stream,
            seq,
            offset,
            sectors,
            write_time_ns,
        };
        Ok(Some((idx, Ack { record, flushed_ns }, t)))
    }

    fn read_block(&mut self) -> io::Result<()> {
        let mut head = [0u8; 8];
        self.file.read_exact_at(&mut head, self.pos)?;
        let len = u32_at(&head, 0) as usize;
        let crc = u32_at(&head, 4);
        if len == 0 || len > 2 * BLOCK_BYTES {
            return Err(bad("a block of an impossible length"));
        }
        self.block.resize(len, 0);
        self.file.read_exact_at(&mut self.block, self.pos + 8)?;
        self.pos += 8 + len as u64;
        if crc32fast::hash(&self.block) != crc {
            return Err(bad("a block whose CRC does not match"));
        }
        self.at = 0;
        Ok(())
    }
}

/// A tally's counts in the order the file stores them.
fn counts(t: &SectorTally) -> [u64; 9] {
    [
        t.intact as u64,
        t.superseded as u64,
        t.old as u64,
        t.blank as u64,
        t.foreign as u64,
        t.corrupt as u64,
        t.misplaced as u64,
        t.unreadable as u64,
        t.corrupt_bits,
    ]
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "verify's work file did not read back as written ({what}): the work directory's disk is failing; choose another with --work-dir"
        ),
    )
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: u64) -> u64 {
    let v = v as i64;
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> u64 {
    ((v >> 1) as i64 ^ -((v & 1) as i64)) as u64
}

struct Cursor<'a> {
    p: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn get(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.p.get(self.at) else {
                return Err(bad("an ack cut at the end of its block"));
            };
            self.at += 1;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("a number longer than 10 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(i: u64, x: u64) -> Ack {
        Ack {
            record: RecordId {
                stream: (x % 5) as u16,
                seq: x.wrapping_mul(7) % 1000,
                offset: (x % 977) * 512,
                sectors: (x % 9) as u32 + 1,
                write_time_ns: 1_700_000_000_000_000_000 + x * 13 - (i % 3) * 1000,
            },
            flushed_ns: 1_700_000_000_000_000_000 + x * 13 + (x % 11) * 100_000,
        }
    }

    /// Acks (with and without tallies) read back exactly as written, in order, across
    /// block boundaries, with differences of either sign.
    #[test]
    fn acks_read_back_as_written() {
        let dir = std::env::temp_dir();
        for tallies in [false, true] {
            let mut w = Writer::new(TempFile::new_in(&dir).unwrap());
            let mut want = vec![];
            let mut x = 1u64;
            for i in 0..20_000u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407)
                    >> 1;
                let idx = i * 3 + x % 3;
                let a = ack(i, x >> 20);
                let t = SectorTally {
                    intact: (x % 7) as u32,
                    blank: (x % 5 * 1000) as u32,
                    unreadable: (x % 3) as u32,
                    corrupt_bits: x % 1000,
                    misplaced: u32::MAX * (x % 13 == 0) as u32,
                    ..Default::default()
                };
                w.push(idx, &a, tallies.then_some(&t)).unwrap();
                want.push((idx, a, if tallies { t } else { SectorTally::default() }));
            }
            assert!(w.bytes() > 0);
            let (f, seg) = w.finish().unwrap();
            let mut r = seg.reader(&f, tallies);
            let mut got = vec![];
            while let Some(e) = r.next_entry().unwrap() {
                got.push(e);
            }
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert_eq!((g.0, g.1), (w.0, w.1));
                assert_eq!(format!("{:?}", g.2), format!("{:?}", w.2));
            }
        }
    }

    /// A flipped bit on disk is an error, never a different ack.
    #[test]
    fn a_flipped_bit_is_an_error() {
        let dir = std::env::temp_dir();
        let mut w = Writer::new(TempFile::new_in(&dir).unwrap());
        for i in 0..100 {
            w.push(i, &ack(i, i), None).unwrap();
        }
        let (f, seg) = w.finish().unwrap();
        let mut r = seg.reader(&f, false);
        let mut b = [0u8; 1];
        f.read_exact_at(&mut b, 20).unwrap();
        f.write_all_at(&[b[0] ^ 4], 20).unwrap();
        let e = r.next_entry().unwrap_err();
        assert!(e.to_string().contains("CRC"), "{e}");
    }

    /// Segments of one file read back apart, each from its own start.
    #[test]
    fn segments_read_back_apart() {
        let mut w = Writer::new(TempFile::new_in(&std::env::temp_dir()).unwrap());
        let mut segs = vec![];
        for s in 0..3u64 {
            for i in 0..(5000 * s + 1) {
                w.push(i * 2 + s, &ack(i, i + s), None).unwrap();
            }
            segs.push(w.end_segment().unwrap());
        }
        let (f, last) = w.finish().unwrap();
        assert_eq!(last.count(), 0);
        for (s, seg) in segs.iter().enumerate() {
            let mut r = seg.reader(&f, false);
            let mut n = 0;
            while let Some((idx, a, _)) = r.next_entry().unwrap() {
                assert_eq!((idx, a), (n * 2 + s as u64, ack(n, n + s as u64)));
                n += 1;
            }
            assert_eq!(n, 5000 * s as u64 + 1);
        }
    }

    /// The files have no name in the work directory.
    #[test]
    fn work_files_leave_nothing_behind() {
        let dir = std::env::temp_dir().join(format!("pp-wf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = TempFile::new_in(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        drop(f);
        std::fs::remove_dir(&dir).unwrap();
    }
}
