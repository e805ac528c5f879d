//! Reading the target back and judging every acknowledged record, sector by sector.
//!
//! A reader thread reads the span of the run in large aligned chunks, one chunk ahead of
//! the checker, so verify runs at the device's read bandwidth. Every sector's stamp is
//! decoded once; each acknowledged record covering it is judged against it.
//!
//! A sector is judged only for the latest acknowledged record covering it (see
//! [`visible_ranges`]): once a later record was acknowledged over a sector, the earlier
//! record's promise for that sector is void, whatever the drive holds there.

use super::classify::{SectorFinding, SectorTally, classify_sector};
use crate::device::{AlignedBuf, Device};
use crate::model::Ack;
use crate::record::{
    RunId, SECTOR, Stamp, StampError, content_matches, decode_stamp, expected_sector,
};
use crate::rng::RunKey;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, mpsc};
use std::time::Duration;

const CHUNK_BYTES: u64 = 2 << 20;
/// Chunks in circulation per reader.
const POOL: usize = 3;
const READERS: usize = 2;

/// What the scan found for each ack (same order as the input) and around them.
pub struct ScanResult {
    pub tallies: Vec<SectorTally>,
    /// (stream, seq) of this run's records found away from their home, and where.
    pub found_elsewhere: HashMap<(u16, u64), u64>,
    pub bytes_read: u64,
    /// Ranges that could not be read: (offset, len, reason).
    pub unreadable: Vec<(u64, u64, String)>,
    /// (offset, len) left unread because a read did not complete within the timeout.
    /// Unlike a failed read this says nothing about the data (see `verify::timed_out`).
    pub timed_out: Option<(u64, u64)>,
}

struct Chunk {
    offset: u64,
    /// Bytes of `buf` in use (the last chunk may be short).
    len: usize,
    buf: AlignedBuf,
    /// Ranges that failed to read: (offset, len, reason).
    bad: Vec<(u64, u64, String)>,
    /// Each sector's decoded stamp, and whether its content matches the stamp's CRC.
    stamps: Vec<Result<Stamp, StampError>>,
    content_ok: Vec<bool>,
}

/// Reads [start, end) of `dev` and judges every ack against it.
pub fn scan(dev: Arc<dyn Device>, run: RunId, acks: &[Ack], read_timeout: Duration) -> ScanResult {
    scan_with_progress(dev, run, acks, read_timeout, None, &|_, _| {})
}

/// `scan`, calling `progress(bytes_done, bytes_total)` after every chunk (for a progress
/// bar). `also`: a byte range to read as well as the records' span (the run's whole
/// region, so a misdirected copy that landed outside the span is found), clamped to
/// the device.
pub fn scan_with_progress(
    dev: Arc<dyn Device>,
    run: RunId,
    acks: &[Ack],
    read_timeout: Duration,
    also: Option<(u64, u64)>,
    progress: &dyn Fn(u64, u64),
) -> ScanResult {
    let key = RunKey::new(run);
    let mut tallies = vec![SectorTally::default(); acks.len()];
    let mut found_elsewhere = HashMap::new();
    let mut unreadable = vec![];
    if acks.is_empty() {
        return ScanResult {
            tallies,
            found_elsewhere,
            bytes_read: 0,
            unreadable,
            timed_out: None,
        };
    }
    let block = dev.logical_block_bytes().max(512) as u64;
    let rec_start = acks.iter().map(|a| a.record.offset).min().unwrap() / block * block;
    let rec_end = acks
        .iter()
        .map(|a| a.record.end())
        .max()
        .unwrap()
        .div_ceil(block)
        * block;
    let dev_end = dev.size_bytes() / block * block;
    let (start, end) = match also {
        Some((s, e)) => (
            rec_start.min(s / block * block),
            rec_end.max((e.div_ceil(block) * block).min(dev_end)),
        ),
        None => (rec_start, rec_end),
    };
    let readable_end = end.min(dev_end);
    if readable_end < end {
        unreadable.push((
            readable_end,
            end - readable_end,
            "beyond the end of the device".to_string(),
        ));
    }
    let visible = visible_ranges(acks);
    let mut order: Vec<usize> = (0..acks.len()).collect();
    order.sort_by_key(|&i| acks[i].record.offset);
    let mut next = 0usize;
    let mut active: Vec<usize> = vec![];
    let mut bytes_read = 0;
    let mut timed_out = None;

    {
        // Stages: READERS readers take alternate chunks, so a read is always in flight
        // while the other's completion is handled (on a 2-vCPU VM a lone reader's
        // completions wait for a CPU the workers use); a decoder decodes stamps and
        // checks content CRCs (most of the CPU work) in file order; this thread judges.
        // Each reader owns a fixed pool of chunks that come back to it after judging, so
        // nothing is allocated per chunk. The pools must be per reader: with one shared
        // pool a reader running ahead could hold every chunk while the decoder waits for
        // the other reader's next one, a deadlock that the read timeout then reported as
        // unreadable sectors.
        let (to_judge, from_decoder) = mpsc::sync_channel::<Chunk>(POOL);
        let mut from_readers = vec![];
        let mut give_backs = vec![];
        for k in 0..READERS as u64 {
            let (to_decoder, from_reader) = mpsc::sync_channel::<Chunk>(POOL);
            let (give_back, recycled) = mpsc::channel::<Chunk>();
            for _ in 0..POOL {
                // No chunk is longer than the span: a small run (a test's few sectors)
                // does not allocate and zero 12 MiB of buffers on every verify.
                let n = CHUNK_BYTES.min(readable_end.saturating_sub(start)) as usize;
                let c = Chunk {
                    offset: 0,
                    len: 0,
                    buf: AlignedBuf::new(n),
                    bad: vec![],
                    stamps: Vec::with_capacity(n / SECTOR),
                    content_ok: Vec::with_capacity(n / SECTOR),
                };
                give_back.send(c).expect("fresh channel");
            }
            from_readers.push(from_reader);
            give_backs.push(give_back);
            let reader_dev = dev.clone();
            // Not scoped threads: if a read hangs we must be able to walk away from it.
            std::thread::spawn(move || {
                let dev = &*reader_dev;
                let mut at = start + k * CHUNK_BYTES;
                while at < readable_end {
                    let len = CHUNK_BYTES.min(readable_end - at);
                    let Ok(mut c) = recycled.recv() else { return };
                    c.offset = at;
                    c.len = len as usize;
                    c.bad = read_chunk(dev, &mut c.buf[..c.len], at, block);
                    if to_decoder.send(c).is_err() {
                        return;
                    }
                    at += READERS as u64 * CHUNK_BYTES;
                }
            });
        }
        std::thread::spawn(move || {
            // Chunks come back in file order: reader k holds chunks k, k+READERS, ...
            for turn in 0.. {
                let Ok(mut c) = from_readers[turn % READERS].recv() else {
                    return;
                };
                c.stamps.clear();
                c.stamps
                    .extend(c.buf[..c.len].chunks_exact(SECTOR).map(decode_stamp));
                c.content_ok.clear();
                let ok = c.buf[..c.len]
                    .chunks_exact(SECTOR)
                    .zip(&c.stamps)
                    .map(|(sec, st)| st.as_ref().is_ok_and(|s| content_matches(sec, s)));
                c.content_ok.extend(ok);
                if to_judge.send(c).is_err() {
                    return;
                }
            }
        });
        let mut at = start;
        while at < end {
            let chunk = if at < readable_end {
                let got = from_decoder.recv_timeout(read_timeout);
                match got {
                    Ok(c) => Some(c),
                    Err(_) => {
                        // A hung read: mark the rest unreadable and stop waiting. The reader
                        // thread is abandoned (it exits with the process).
                        timed_out = Some((at, readable_end - at));
                        unreadable.push((
                            at,
                            readable_end - at,
                            format!("read did not complete within {read_timeout:?}"),
                        ));
                        None
                    }
                }
            } else {
                None
            };
            let (c_off, c_len) = match &chunk {
                Some(c) => (c.offset, c.len as u64),
                None => (at, end - at),
            };
            let c_end = c_off + c_len;
            if let Some(c) = &chunk {
                bytes_read += c_len;
                unreadable.extend(c.bad.iter().cloned());
                for (k, st) in c.stamps.iter().enumerate() {
                    if let Ok(st) = st {
                        let here = c_off + (k * SECTOR) as u64;
                        if st.run == run && st.home() != here {
                            // Where the record's first sector would be, given this one.
                            let landed = here.saturating_sub(st.index as u64 * SECTOR as u64);
                            found_elsewhere
                                .entry((st.record.stream, st.record.seq))
                                .or_insert(landed);
                        }
                    }
                }
            }
            while next < order.len() && acks[order[next]].record.offset < c_end {
                active.push(order[next]);
                next += 1;
            }
            for &i in &active {
                let rec = &acks[i].record;
                let lo = rec.offset.max(c_off);
                let hi = rec.end().min(c_end);
                let mut p = lo;
                while p < hi {
                    let index = ((p - rec.offset) / SECTOR as u64) as u32;
                    let finding = match &chunk {
                        _ if !covers(&visible[i], p) => SectorFinding::Superseded,
                        Some(c) if !in_bad(&c.bad, p) => {
                            let k = ((p - c_off) / SECTOR as u64) as usize;
                            let found = &c.buf[k * SECTOR..(k + 1) * SECTOR];
                            classify_sector(
                                found,
                                &c.stamps[k],
                                c.content_ok[k],
                                run,
                                rec,
                                index,
                                || {
                                    let mut e = [0u8; SECTOR];
                                    expected_sector(&mut e, &key, run, rec, index);
                                    e
                                },
                            )
                        }
                        _ => SectorFinding::Unreadable,
                    };
                    tallies[i].add(finding);
                    p += SECTOR as u64;
                }
            }
            active.retain(|&i| acks[i].record.end() > c_end);
            at = c_end;
            progress(at - start, end - start);
            match chunk {
                Some(c) => {
                    // Back to the reader that owns it (reader k reads chunks k, k+READERS...).
                    let owner = ((c.offset - start) / CHUNK_BYTES) as usize % READERS;
                    let _ = give_backs[owner].send(c);
                }
                None => {
                    // Past the device end or after a hung read: the loop above judged
                    // every remaining sector of every record unreadable (c_end == end).
                    break;
                }
            }
        }
        drop(from_decoder);
    }
    ScanResult {
        tallies,
        found_elsewhere,
        bytes_read,
        unreadable,
        timed_out,
    }
}

/// For each ack (same order), the byte ranges of its record that no later acknowledged
/// record covers, sorted. "Later" is (stream, seq) order: a stream's records are
/// acknowledged in seq order, and streams own disjoint shares of the region.
pub fn visible_ranges(acks: &[Ack]) -> Vec<Vec<(u64, u64)>> {
    let mut order: Vec<usize> = (0..acks.len()).collect();
    order.sort_by_key(|&i| (acks[i].record.stream, acks[i].record.seq));
    // Non-overlapping painted intervals: start -> (end, ack index). Later paint wins.
    let mut paint: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for i in order {
        let (s, e) = (acks[i].record.offset, acks[i].record.end());
        if s >= e {
            continue;
        }
        // An interval starting before `s` that reaches into [s, e): keep its head (and
        // its tail past `e`).
        if let Some((&ps, &(pe, pi))) = paint.range(..s).next_back()
            && pe > s
        {
            paint.insert(ps, (s, pi));
            if pe > e {
                paint.insert(e, (pe, pi));
            }
        }
        let inside: Vec<u64> = paint.range(s..e).map(|(&k, _)| k).collect();
        for k in inside {
            let (pe, pi) = paint.remove(&k).expect("key just listed");
            if pe > e {
                paint.insert(e, (pe, pi));
            }
        }
        paint.insert(s, (e, i));
    }
    let mut out = vec![Vec::new(); acks.len()];
    for (s, (e, i)) in paint {
        match out[i].last_mut() {
            Some((_, pe)) if *pe == s => *pe = e,
            _ => out[i].push((s, e)),
        }
    }
    out
}

fn covers(ranges: &[(u64, u64)], p: u64) -> bool {
    ranges.iter().any(|&(s, e)| s <= p && p < e)
}

fn in_bad(bad: &[(u64, u64, String)], p: u64) -> bool {
    bad.iter().any(|(o, l, _)| p >= *o && p < o + l)
}

/// Reads one chunk; on error, narrows down to the failing blocks so one bad sector does
/// not hide a whole chunk.
fn read_chunk(
    dev: &dyn Device,
    buf: &mut [u8],
    offset: u64,
    block: u64,
) -> Vec<(u64, u64, String)> {
    if dev.read_at(buf, offset).is_ok() {
        return vec![];
    }
    let mut bad = vec![];
    let piece = (64 * 1024).max(block) as usize;
    for (k, part) in buf.chunks_mut(piece).enumerate() {
        let po = offset + (k * piece) as u64;
        if dev.read_at(part, po).is_ok() {
            continue;
        }
        for (j, b) in part.chunks_mut(block as usize).enumerate() {
            let bo = po + j as u64 * block;
            if let Err(e) = dev.read_at(b, bo) {
                // The buffer is recycled: leave nothing of an earlier chunk in it to be
                // mistaken for data found here.
                b.fill(0);
                match bad.last_mut() {
                    Some((o, l, r)) if *o + *l == bo && *r == e.to_string() => *l += block,
                    _ => bad.push((bo, block, e.to_string())),
                }
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordId;

    fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
        Ack {
            record: RecordId {
                stream,
                seq,
                offset,
                sectors,
                write_time_ns: seq,
            },
            flushed_ns: seq,
        }
    }

    #[test]
    fn later_acks_hide_earlier_sectors() {
        let acks = [
            ack(0, 1, 0, 8),    // [0, 4096)
            ack(0, 3, 1024, 2), // [1024, 2048) later: hides part of seq 1
            ack(0, 2, 4096, 8), // untouched
            ack(0, 4, 0, 8),    // hides all of seq 1 and seq 3
            ack(0, 5, 6144, 8), // hides the tail of seq 2
        ];
        let v = visible_ranges(&acks);
        assert_eq!(v[0], vec![]);
        assert_eq!(v[1], vec![]);
        assert_eq!(v[2], vec![(4096, 6144)]);
        assert_eq!(v[3], vec![(0, 4096)]);
        assert_eq!(v[4], vec![(6144, 10240)]);
        // Acks arrive in any order; the result does not depend on it.
        let mut rev = acks;
        rev.reverse();
        let mut w = visible_ranges(&rev);
        w.reverse();
        assert_eq!(v, w);
    }

    #[test]
    fn a_later_record_inside_splits_an_earlier_one() {
        let v = visible_ranges(&[ack(0, 1, 0, 8), ack(0, 2, 1024, 2)]);
        assert_eq!(v[0], vec![(0, 1024), (2048, 4096)]);
        assert_eq!(v[1], vec![(1024, 2048)]);
    }
}
