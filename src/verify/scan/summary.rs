//! The region read while verify's first pass over the acks runs, kept as one small
//! summary per record slot instead of the bytes.
//!
//! Why: verify at scale (`verify::scale`) knows which record is live at each place only
//! after a full pass over the acks (0.35 s for 2.6 M acks of 512 B), and the reads
//! started before it (`super::read_early`) could only run 128 MiB ahead, so most of the
//! region was read after that pass, serially (docs/performance.md "Verify read speed
//! against dd"). When the run's records are all one size on a grid from the region's
//! start (the writer's settings say so: `record_bytes_min == record_bytes_max`), a slot
//! is judged against one live ack over all its sectors, and a slot whose every sector is
//! an intact, at-home sector of one record of this run, in order, is judged by that
//! record alone (`uniform_finding`): nothing else of its bytes matters. So the reads run
//! at full speed during the first pass, each slot is reduced to that record (or
//! "undecided"), and only undecided slots (damage: blank, torn, corrupt, foreign, an
//! unreadable block) are read again afterwards (`super::scan_summarised`).
//!
//! What a whole scan computes from every chunk regardless of the acks is kept as it
//! computes it: the records found away from their home, the unreadable ranges, the
//! bytes read, a read that did not complete within the timeout.
//!
//! Memory: 36 B per slot (the record and a count), at most `FREE_SLOTS` slots (144 MiB;
//! 1.25 GiB of 512 B records is 2.6 M slots, 90 MiB), and the chunks of a normal scan
//! (3 per reader) instead of the early reads' 32 per reader.

use super::judge::{Judge, ScanRun, in_bad, note_found_elsewhere};
use super::pipeline::{self, Chunk, Pipeline, block_of, dev_end};
use super::visible::Visible;
use crate::device::Device;
use crate::model::Ack;
use crate::record::{RecordId, RunId, SECTOR};
use crate::verify::classify::{SectorFinding, SectorTally};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

/// Records of `len` bytes at `base + k * len`: the slots of `verify::slots`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotGrid {
    pub base: u64,
    pub len: u64,
}

impl SlotGrid {
    /// The slot ack `a` is exactly, if any.
    fn slot_of(&self, a: &Ack) -> Option<u64> {
        let from = a.record.offset.checked_sub(self.base)?;
        (a.record.len_bytes() == self.len && from % self.len == 0).then_some(from / self.len)
    }
}

/// The live acks, judged from their slots' summaries as the reads go by (the acks come
/// when the first pass ends, usually long before the reads do).
pub(super) struct Judged {
    pub acks: Vec<Ack>,
    pub tallies: Vec<SectorTally>,
    /// The acks the summary cannot judge, in slot order.
    pub again: Vec<usize>,
    /// An ack that is not exactly one slot of the grid, or not in slot order: the
    /// summary does not apply.
    pub off_grid: bool,
    next: usize,
    /// The slot of the last ack judged.
    last: Option<u64>,
}

impl Judged {
    fn new(acks: Vec<Ack>) -> Judged {
        Judged {
            tallies: vec![SectorTally::default(); acks.len()],
            acks,
            again: vec![],
            off_grid: false,
            next: 0,
            last: None,
        }
    }

    /// Judges the acks, in slot order, up to the first whose slot is not below `upto`
    /// (slots below it were read whole, or will not be read).
    fn advance(&mut self, sum: &Summary, upto: u64) {
        while let Some(a) = self.acks.get(self.next) {
            let Some(slot) = sum.grid.slot_of(a).filter(|&k| self.last < Some(k)) else {
                self.off_grid = true;
                return;
            };
            if slot >= upto {
                return;
            }
            self.last = Some(slot);
            match sum
                .record_of(slot)
                .and_then(|r| uniform_finding(r, &a.record))
            {
                Some(f) => (0..a.record.sectors).for_each(|_| self.tallies[self.next].add(f)),
                None => self.again.push(self.next),
            }
            self.next += 1;
        }
    }
}

/// `seen` of a slot one of whose sectors is not its record's, or was not read.
const UNDECIDED: u32 = u32::MAX;

/// What the reads of the region left.
pub(super) struct Summary {
    pub grid: SlotGrid,
    /// (start, readable_end, block), as a scan's `Span` of the same bytes.
    pub reads: (u64, u64, u64),
    /// Per slot from the grid's first, in slot order: the record whose sectors it
    /// holds, meaningful only when the slot's `seen` is all its sectors.
    record: Vec<RecordId>,
    /// Per slot: how many of its sectors, from its first, were read and held `record`'s
    /// sector of that index, intact and at home; `UNDECIDED` once one did not.
    seen: Vec<u32>,
    pub found_elsewhere: super::elsewhere::FoundElsewhere,
    pub bytes_read: u64,
    /// The ranges that failed to read, in offset order (the chunks' `bad`).
    pub bad: Vec<(u64, u64, String)>,
    /// Where the reads stopped for a read that did not complete in time.
    pub timed_out: Option<(u64, u64)>,
}

impl Summary {
    /// The record slot `k` holds whole and intact, if the reads showed one.
    pub fn record_of(&self, k: u64) -> Option<&RecordId> {
        let k = k as usize;
        let full = (self.grid.len / SECTOR as u64) as u32;
        (self.seen.get(k) == Some(&full)).then(|| &self.record[k])
    }

    /// Takes sector `p` of chunk `c` (sector number `s` in it).
    #[inline]
    fn take_sector(&mut self, run: RunId, c: &Chunk, s: usize, p: u64) {
        let SlotGrid { base, len } = self.grid;
        let Some(from) = p.checked_sub(base) else {
            return;
        };
        let k = (from / len) as usize;
        let j = ((from % len) / SECTOR as u64) as u32;
        // Slots are reached in order: the chunks come in offset order.
        if k == self.seen.len() {
            if j != 0 {
                // The span starts inside this slot: no slot of the grid's table.
                return;
            }
            self.seen.push(0);
            self.record.push(RecordId {
                stream: 0,
                seq: 0,
                offset: 0,
                sectors: 0,
                write_time_ns: 0,
            });
        }
        let (Some(seen), Some(record)) = (self.seen.get_mut(k), self.record.get_mut(k)) else {
            return;
        };
        if *seen == UNDECIDED {
            return;
        }
        let home = base + k as u64 * len;
        let own = match &c.stamps[s] {
            Ok(st) => {
                st.run == run
                    && c.content_ok[s]
                    && st.index == j
                    && st.record.offset == home
                    && st.record.sectors as u64 * SECTOR as u64 == len
                    && (j == 0 || st.record == *record)
                    && *seen == j
            }
            Err(_) => false,
        };
        if !own || in_bad(&c.bad, p) {
            *seen = UNDECIDED;
            return;
        }
        if let Ok(st) = &c.stamps[s]
            && j == 0
        {
            *record = st.record;
        }
        *seen += 1;
    }

    fn take_chunk(&mut self, run: RunId, c: &Chunk) {
        self.bytes_read += c.len as u64;
        self.bad.extend(c.bad.iter().cloned());
        note_found_elsewhere(run, c, &mut self.found_elsewhere);
        for s in 0..c.len / SECTOR {
            self.take_sector(run, c, s, c.offset + (s * SECTOR) as u64);
        }
    }
}

/// The region being read and summarised, on a thread of its own.
pub struct SummaryRead {
    grid: SlotGrid,
    stop: Arc<AtomicBool>,
    /// Where the live acks go when the first pass ends.
    to_judge: mpsc::Sender<Vec<Ack>>,
    thread: Option<JoinHandle<(Summary, Option<Judged>)>>,
}

impl SummaryRead {
    pub fn grid(&self) -> SlotGrid {
        self.grid
    }

    /// Hands the live acks (in slot order) over to be judged as the reads go by, and
    /// waits for the reads to end (at most the read timeout past the last chunk).
    pub(super) fn finish(mut self, acks: Vec<Ack>) -> (Summary, Judged) {
        let t = self.thread.take().expect("finished once");
        // The thread waits for the acks before it ends, so it takes them.
        let _ = self.to_judge.send(acks);
        let (sum, judged) = t.join().expect("the summarising thread does not panic");
        (sum, judged.expect("the acks were sent"))
    }
}

impl Drop for SummaryRead {
    /// Not used after all (the acks did not fit the grid): stop reading.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts reading [from, to) of `dev` (whole blocks, clamped to the device) and
/// summarising it per slot of `grid`, for a later [`super::scan_summarised`]; an error
/// when the reads' buffers or threads cannot be had.
pub fn summarise_early(
    dev: Arc<dyn Device>,
    run: ScanRun,
    grid: SlotGrid,
    from: u64,
    to: u64,
    read_timeout: Duration,
) -> std::io::Result<SummaryRead> {
    let block = block_of(dev.as_ref());
    let start = from / block * block;
    let readable_end = (to.div_ceil(block) * block).min(dev_end(dev.as_ref(), block));
    let readable_end = readable_end.max(start);
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let reads = (start, readable_end, block);
    let (to_judge, acks_in) = mpsc::channel::<Vec<Ack>>();
    let slots = (readable_end.saturating_sub(grid.base)).div_ceil(grid.len) as usize;
    #[cfg(feature = "test-support")]
    pipeline::starved_by_test(true)?;
    // The table of slots (up to `FREE_SLOTS`, 4 Mi slots, about 150 MiB) and the reads'
    // buffers are had here, not on the thread, so a failure to allocate them is this
    // call's error (verify then reads without summarising) rather than an abort.
    let (mut record, mut seen) = (Vec::new(), Vec::new());
    let reserved = record
        .try_reserve_exact(slots)
        .and_then(|()| seen.try_reserve_exact(slots));
    reserved.map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("verify cannot allocate the summary of {slots} slots: {e}"),
        )
    })?;
    let pipeline = match start < readable_end {
        true => Some(Pipeline::start(
            dev,
            start,
            readable_end,
            block,
            pipeline::POOL,
        )?),
        false => None,
    };
    let summarising = std::thread::Builder::new().name("verify-summary".into());
    let thread = summarising.spawn(move || {
        let mut sum = Summary {
            grid,
            reads,
            record,
            seen,
            found_elsewhere: super::elsewhere::FoundElsewhere::new(),
            bytes_read: 0,
            bad: vec![],
            timed_out: None,
        };
        let mut judged: Option<Judged> = None;
        let mut at = start;
        while let Some(pipeline) = &pipeline
            && at < readable_end
            && !stopping.load(Ordering::Relaxed)
        {
            let Some(c) = pipeline.next(read_timeout) else {
                // A hung read: as the scan, the rest is unreadable and the reader is
                // abandoned.
                sum.timed_out = Some((at, readable_end - at));
                sum.bad.push((
                    at,
                    readable_end - at,
                    format!("read did not complete within {read_timeout:?}"),
                ));
                break;
            };
            sum.take_chunk(run.id, &c);
            at = c.offset + c.len as u64;
            pipeline.recycle(c);
            if judged.is_none() {
                judged = acks_in.try_recv().ok().map(Judged::new);
            }
            if let Some(j) = &mut judged {
                j.advance(&sum, at.saturating_sub(grid.base) / grid.len);
            }
        }
        // None if the reads were dropped unused (the sender with them).
        let mut judged = judged.or_else(|| acks_in.recv().ok().map(Judged::new));
        if let Some(j) = &mut judged {
            j.advance(&sum, u64::MAX);
        }
        (sum, judged)
    });
    Ok(SummaryRead {
        grid,
        stop,
        to_judge,
        thread: Some(thread.map_err(pipeline::no_thread)?),
    })
}

/// What every sector of a slot says about the live ack `rec` of that slot when the slot
/// holds record `r` whole, intact and at home: `classify_sector` for such a sector, which
/// is the same for all of them. None when only the bytes can tell (the same record id
/// with other fields: the bit count of a corrupt sector).
pub(super) fn uniform_finding(r: &RecordId, rec: &RecordId) -> Option<SectorFinding> {
    use std::cmp::Ordering::*;
    Some(if r == rec {
        SectorFinding::Intact
    } else if r.stream == rec.stream {
        match r.seq.cmp(&rec.seq) {
            Greater => SectorFinding::Superseded,
            Less => SectorFinding::Old,
            Equal => return None,
        }
    } else if r.write_time_ns > rec.write_time_ns {
        SectorFinding::Superseded
    } else {
        SectorFinding::Old
    })
}

/// The slots read again because their summary could not judge them.
pub(super) struct Reread<'a> {
    pub dev: Arc<dyn Device>,
    /// The scan's span: (start, readable_end, end, block).
    pub span: (u64, u64, u64, u64),
    /// What failed to read the first time: those sectors stay unreadable, as in a
    /// whole scan, whatever a second read gives.
    pub bad: &'a [(u64, u64, String)],
    pub read_timeout: Duration,
}

/// What reading the slots again found besides the tallies.
pub(super) struct Reread2 {
    /// Blocks that failed only now.
    pub new_bad: Vec<(u64, u64, String)>,
    /// Where a read did not complete within the timeout, and the rest of the span from
    /// there (left unread), as a whole scan reports a hang.
    pub timed_out: Option<(u64, u64)>,
}

impl Reread<'_> {
    /// Reads the records of the acks at `again` (in offset order) through the pipeline,
    /// with the read timeout, and judges them as a whole scan does, adding to `tallies`.
    pub fn judge(
        &self,
        run: ScanRun,
        acks: &[Ack],
        again: Vec<usize>,
        visible: Visible,
        tallies: &mut [SectorTally],
    ) -> std::io::Result<Reread2> {
        let (_, readable_end, end, block) = self.span;
        // The blocks to read, merged where records share or touch a block.
        let mut ranges: Vec<(u64, u64)> = vec![];
        for &i in &again {
            let r = &acks[i].record;
            let s = r.offset / block * block;
            let e = (r.end().div_ceil(block) * block).min(readable_end);
            if s >= e {
                continue;
            }
            match ranges.last_mut() {
                Some((_, le)) if s <= *le => *le = (*le).max(e),
                _ => ranges.push((s, e)),
            }
        }
        let mut judge = Judge::new(run, acks, again, visible);
        let runs = Arc::new(ranges);
        let reads = pipeline::Pipeline::start_runs(self.dev.clone(), runs.clone(), block, 1)?;
        let mut out = Reread2 {
            new_bad: vec![],
            timed_out: None,
        };
        let mut judged_to = None;
        for (at, len) in pipeline::chunks_of(&runs) {
            let Some(mut c) = reads.next(self.read_timeout) else {
                // A hung read: the rest unread, the reader abandoned (as `scan_inner`).
                out.timed_out = Some((at, readable_end - at));
                out.new_bad.push((
                    at,
                    readable_end - at,
                    format!("read did not complete within {:?}", self.read_timeout),
                ));
                judged_to = Some(at);
                break;
            };
            out.new_bad
                .extend(c.bad.iter().filter(|b| !in_bad(self.bad, b.0)).cloned());
            let old = self.bad.iter().filter(|b| b.0 < at + len && at < b.0 + b.1);
            c.bad.extend(old.cloned());
            judge.judge_range(Some(&c), at, at + len, tallies);
            reads.recycle(c);
        }
        match judged_to {
            Some(at) => judge.judge_range(None, at, end, tallies),
            None if readable_end < end => judge.judge_range(None, readable_end, end, tallies),
            None => {}
        }
        Ok(out)
    }
}

/// The slots to summarise the region by while verify's first pass runs: the writer's
/// records are all one size, and the region holds at most `free_slots` of them (the
/// summary's memory). Whether the acks really are those slots is known only after the
/// first pass (`verify::scale` checks the slot table's grid).
pub fn summary_grid(d: &crate::model::RunDescriptor, free_slots: u64) -> Option<SlotGrid> {
    let s = &d.settings;
    let len = s.record_bytes_min;
    let fits = len == s.record_bytes_max
        && len > 0
        && len % SECTOR as u64 == 0
        && s.region_bytes / len <= free_slots;
    fits.then_some(SlotGrid {
        base: s.region_offset,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grid of more slots than memory holds (a drive of 4 EiB in 512-byte slots): an
    /// error from the call, before any read, not a panic or an abort on the thread.
    #[test]
    fn a_summary_table_without_memory_is_an_error() {
        struct Huge;
        impl Device for Huge {
            fn size_bytes(&self) -> u64 {
                1 << 62
            }
            fn logical_block_bytes(&self) -> u32 {
                512
            }
            fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
                unreachable!("verify never writes")
            }
            fn flush(&self) -> std::io::Result<()> {
                unreachable!("verify never writes")
            }
            fn read_at(&self, buf: &mut [u8], _: u64) -> std::io::Result<()> {
                buf.fill(0);
                Ok(())
            }
        }
        let grid = SlotGrid { base: 0, len: 512 };
        let run = ScanRun::from(RunId([1; 16]));
        let timeout = std::time::Duration::from_secs(1);
        let got = summarise_early(Arc::new(Huge), run, grid, 0, 1 << 62, timeout);
        let e = got.err().expect("no table of 2^53 slots");
        assert!(e.to_string().contains("cannot allocate the summary"), "{e}");
    }

    /// The acks are judged as far as the slots were read, no further: a slot judged
    /// before its last sector is read would be read again needlessly.
    #[test]
    fn acks_are_judged_up_to_the_slots_read() {
        let rec = |k: u64| RecordId {
            stream: 0,
            seq: k + 1,
            offset: k * 512,
            sectors: 1,
            write_time_ns: k,
        };
        let grid = SlotGrid { base: 0, len: 512 };
        let mut sum = Summary {
            grid,
            reads: (0, 2048, 512),
            record: (0..3).map(rec).collect(),
            seen: vec![1, 1, 1],
            found_elsewhere: crate::verify::scan::elsewhere::FoundElsewhere::new(),
            bytes_read: 0,
            bad: vec![],
            timed_out: None,
        };
        let ack = |k| Ack {
            record: rec(k),
            flushed_ns: k + 1,
        };
        let mut j = Judged::new((0..4).map(ack).collect());
        j.advance(&sum, 2);
        assert_eq!(j.next, 2);
        assert_eq!(j.tallies[0].intact, 1);
        assert_eq!(j.tallies[2], SectorTally::default());
        // Slot 3 never read: judged from its bytes afterwards.
        sum.seen.push(0);
        sum.record.push(rec(3));
        j.advance(&sum, u64::MAX);
        assert_eq!(j.tallies[2].intact, 1);
        assert_eq!(j.again, [3]);
        assert!(!j.off_grid);
        // Out of slot order: the summary does not apply.
        let mut j = Judged::new(vec![ack(1), ack(0)]);
        j.advance(&sum, u64::MAX);
        assert!(j.off_grid);
    }
}
