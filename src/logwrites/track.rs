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
use std::collections::HashMap;

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

/// Per acked record: how many of its sectors the log wrote, and how many are durable.
#[derive(Clone, Copy, Debug, Default)]
struct RecState {
    written: u32,
    durable: u32,
    ackable: bool,
}

/// Follows the log entry by entry: which acks become ackable at each durable point.
pub struct Tracker {
    run: RunId,
    acks: Vec<Ack>,
    /// (stream, seq) -> index into `acks`.
    by_key: HashMap<(u16, u64), usize>,
    state: Vec<RecState>,
    /// (ack index, sectors) written since the last flush, not yet durable.
    pending: Vec<(usize, u32)>,
    /// Indexes into `writes` not yet durable.
    pending_writes: Vec<usize>,
    pub writes: Vec<WriteInfo>,
    /// Acks whose sectors are all durable, not yet handed out by `take_ackable`.
    ready: Vec<usize>,
    /// Sectors stamped by the run that belong to no ack (written but never acked).
    pub unacked_sectors: u64,
}

impl Tracker {
    pub fn new(run: RunId, acks: &[Ack]) -> Tracker {
        let by_key = acks
            .iter()
            .enumerate()
            .map(|(i, a)| ((a.record.stream, a.record.seq), i))
            .collect();
        Tracker {
            run,
            acks: acks.to_vec(),
            by_key,
            state: vec![RecState::default(); acks.len()],
            pending: vec![],
            pending_writes: vec![],
            writes: vec![],
            ready: vec![],
            unacked_sectors: 0,
        }
    }

    /// Notes one entry, before it is a durable point (if it is one): a flush first makes
    /// everything logged before it durable, then its data (if any) is written, durable at
    /// once only with FUA.
    pub fn note(&mut self, e: &Entry, point: usize) {
        if e.is_flush() {
            for (i, n) in std::mem::take(&mut self.pending) {
                self.make_durable(i, n);
            }
            for w in std::mem::take(&mut self.pending_writes) {
                self.writes[w].durable_at = Some(point);
            }
        }
        if !(e.is_write() || e.is_discard()) {
            return;
        }
        let mut held: Vec<(usize, u32)> = vec![];
        if e.is_write() {
            for (k, sector) in e.data.chunks_exact(SECTOR).enumerate() {
                let Ok(st) = decode_stamp(sector) else {
                    continue;
                };
                if st.run != self.run || st.home() != e.offset + (k * SECTOR) as u64 {
                    continue;
                }
                match self.by_key.get(&(st.record.stream, st.record.seq)) {
                    Some(&i) if self.acks[i].record == st.record => match held.last_mut() {
                        Some((j, n)) if *j == i => *n += 1,
                        _ => held.push((i, 1)),
                    },
                    _ => self.unacked_sectors += 1,
                }
            }
        }
        let w = self.writes.len();
        let durable_now = e.is_fua() && e.is_write();
        self.writes.push(WriteInfo {
            entry: e.index,
            offset: e.offset,
            len: e.len,
            discard: e.is_discard(),
            fua: e.is_fua(),
            flush: e.is_flush(),
            acks: held.iter().map(|&(i, _)| i).collect(),
            durable_at: durable_now.then_some(point),
        });
        for (i, n) in held {
            self.state[i].written += n;
            if durable_now {
                self.make_durable(i, n);
            } else {
                self.pending.push((i, n));
            }
        }
        if !durable_now {
            self.pending_writes.push(w);
        }
    }

    fn make_durable(&mut self, i: usize, n: u32) {
        let s = &mut self.state[i];
        s.durable += n;
        if !s.ackable && s.durable >= self.acks[i].record.sectors {
            s.ackable = true;
            self.ready.push(i);
        }
    }

    /// The acks that became ackable since the last call, in the order they did.
    pub fn take_ackable(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.ready)
    }

    /// Acks the log never made durable in full (the log missed their writes or flush).
    pub fn never_ackable(&self) -> Vec<usize> {
        (0..self.acks.len())
            .filter(|&i| !self.state[i].ackable)
            .collect()
    }
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
