//! Which acknowledged records a replayed state must hold. Why from the log's data and
//! not from the acks' timestamps: the writer acks a record only after the flush (or FUA
//! write) that covers its write returned, so at a durable point exactly the records whose
//! every sector was written and then made durable by that point can have been acked.
//! The log's write data carries each sector's stamp (`crate::record`), which names the
//! record (stream, seq) it belongs to, whatever stream wrote it and however the kernel
//! split or merged the writes.

use super::format::Entry;
use crate::model::Ack;
use crate::record::{RunId, SECTOR, decode_stamp};

/// One logged write or discard, kept for choosing the writes a drop state leaves out.
#[derive(Clone, Debug)]
pub struct WriteInfo {
    pub entry: u64,
    pub offset: u64,
    pub len: u64,
    pub discard: bool,
    pub fua: bool,
    /// The flush entry of this log entry itself (data after a preflush).
    pub flush: bool,
    /// Witness ack indexes of the records whose sectors this write holds.
    pub acks: Vec<usize>,
    /// The durable point (index into the points) from which this write is durable.
    pub durable_at: Option<usize>,
}

/// Follows the log entry by entry: which acks become ackable at each durable point.
/// Why compact: it holds one entry per witness ack for the whole replay, so each is a
/// few bytes (an index into the witness's acks, a sector count), never a copy of the ack.
pub struct Tracker<'a> {
    run: RunId,
    acks: &'a [Ack],
    /// Indexes into `acks` sorted by (stream, seq): finds a stamp's record.
    by_key: Vec<u32>,
    /// Per ack: how many of its sectors the log made durable so far.
    durable: Vec<u32>,
    /// (ack index, sectors) written since the last flush, not yet durable.
    pending: Vec<(u32, u32)>,
    /// Indexes into `writes` not yet durable.
    pending_writes: Vec<usize>,
    /// Every logged write and discard, kept only when asked for (drop states need them).
    pub writes: Option<Vec<WriteInfo>>,
    /// Acks whose sectors are all durable, not yet handed out by `take_ackable`.
    ready: Vec<usize>,
    /// Sectors stamped by the run that belong to no ack (written but never acked).
    pub unacked_sectors: u64,
    /// Judged in parts: the byte range [start, end) of this part. Writes elsewhere hold
    /// none of its acks' sectors, and a stamp is counted unacked only at a home in it,
    /// so the parts' counts add up to the whole run's.
    pub part: Option<(u64, u64)>,
}

impl<'a> Tracker<'a> {
    /// A tracker of `acks` (at most `u32::MAX` of them); `keep_writes` keeps a
    /// [`WriteInfo`] per logged write.
    pub fn new(run: RunId, acks: &'a [Ack], keep_writes: bool) -> Tracker<'a> {
        assert!(
            u32::try_from(acks.len()).is_ok(),
            "replay tracks at most u32::MAX acks (loading that many takes some 170 GB first)"
        );
        let mut by_key: Vec<u32> = (0..acks.len() as u32).collect();
        by_key.sort_unstable_by_key(|&i| key(&acks[i as usize]));
        Tracker {
            run,
            acks,
            by_key,
            durable: vec![0; acks.len()],
            pending: vec![],
            pending_writes: vec![],
            writes: keep_writes.then(Vec::new),
            ready: vec![],
            unacked_sectors: 0,
            part: None,
        }
    }

    /// The index of the ack of record (stream, seq), if the witness holds one.
    fn find(&self, stream: u16, seq: u64) -> Option<usize> {
        let at = self
            .by_key
            .binary_search_by_key(&(stream, seq), |&i| key(&self.acks[i as usize]))
            .ok()?;
        Some(self.by_key[at] as usize)
    }

    /// Notes one entry, before it is a durable point (if it is one): a flush first makes
    /// everything logged before it durable, then its data (if any) is written, durable at
    /// once only with FUA.
    pub fn note(&mut self, e: &Entry, point: usize) {
        if e.is_flush() {
            for (i, n) in std::mem::take(&mut self.pending) {
                self.make_durable(i as usize, n);
            }
            let pending_writes = std::mem::take(&mut self.pending_writes);
            if let Some(writes) = self.writes.as_mut() {
                for w in pending_writes {
                    writes[w].durable_at = Some(point);
                }
            }
        }
        if !(e.is_write() || e.is_discard()) {
            return;
        }
        let mut held: Vec<(usize, u32)> = vec![];
        let (part_start, part_end) = self.part.unwrap_or((0, u64::MAX));
        let touches = e.offset < part_end && e.offset.saturating_add(e.len) > part_start;
        if e.is_write() && touches {
            for (k, sector) in e.data.chunks_exact(SECTOR).enumerate() {
                let Ok(st) = decode_stamp(sector) else {
                    continue;
                };
                let home = e.offset + (k * SECTOR) as u64;
                if st.run != self.run || st.home() != home || home < part_start || home >= part_end
                {
                    continue;
                }
                match self.find(st.record.stream, st.record.seq) {
                    Some(i) if self.acks[i].record == st.record => match held.last_mut() {
                        Some((j, n)) if *j == i => *n += 1,
                        _ => held.push((i, 1)),
                    },
                    _ => self.unacked_sectors += 1,
                }
            }
        }
        let durable_now = e.is_fua() && e.is_write();
        if let Some(writes) = self.writes.as_mut() {
            if !durable_now {
                self.pending_writes.push(writes.len());
            }
            writes.push(WriteInfo {
                entry: e.index,
                offset: e.offset,
                len: e.len,
                discard: e.is_discard(),
                fua: e.is_fua(),
                flush: e.is_flush(),
                acks: held.iter().map(|&(i, _)| i).collect(),
                durable_at: durable_now.then_some(point),
            });
        }
        for (i, n) in held {
            if durable_now {
                self.make_durable(i, n);
            } else {
                self.pending.push((i as u32, n));
            }
        }
    }

    fn make_durable(&mut self, i: usize, n: u32) {
        let sectors = self.acks[i].record.sectors;
        let before = self.durable[i];
        self.durable[i] = before.saturating_add(n);
        if before < sectors && self.durable[i] >= sectors {
            self.ready.push(i);
        }
    }

    /// The acks that became ackable since the last call, in the order they did.
    pub fn take_ackable(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.ready)
    }

    /// Acks the log never made durable in full (the log missed their writes or flush):
    /// how many, and the first.
    pub fn never_ackable(&self) -> (usize, Option<usize>) {
        let mut never =
            (0..self.acks.len()).filter(|&i| self.durable[i] < self.acks[i].record.sectors);
        let first = never.next();
        (first.map_or(0, |_| 1 + never.count()), first)
    }
}

fn key(a: &Ack) -> (u16, u64) {
    (a.record.stream, a.record.seq)
}

/// The run of the newest plugpull stamp in a write's data (the last stamped sector).
pub fn last_stamped_run(e: &Entry) -> Option<RunId> {
    if !e.is_write() {
        return None;
    }
    e.data
        .chunks_exact(SECTOR)
        .rev()
        .find_map(|s| decode_stamp(s).ok().map(|st| st.run))
}
