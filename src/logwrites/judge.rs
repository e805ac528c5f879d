//! Judging replayed states one after another with verify's own scan, classify and judge,
//! re-reading only what changed. Why this is the same verdict as a whole verify: a
//! record's class depends only on its own sectors' bytes and on which later acks cover
//! them (`verify::scan::visible_ranges`). Between two durable points, only records whose
//! bytes a write or discard touched, the newly acked ones, and records those overlap can
//! change; every other record keeps the tally it had. Those are re-scanned
//! (`verify::scan::scan_selected`) together with every ack overlapping them, so their
//! visibility is decided as in a whole scan; then `verify::judge_tallies` judges the whole
//! set. `full` judges every state with a whole verify instead, the streaming
//! engine `plugpull verify` ships (the reference the tests compare against; some 16
//! times slower per durable point, 9 ms against 0.55 ms on a 3000-record log in a
//! release build, since it reads the whole span every time). So the durable points of
//! the default pass are judged by verify's classify and judge (`judge_tallies`) on
//! tallies of verify's in-memory scan (`scan_selected`), not by the engine's reads and
//! painting; drop states and `--full-verify` go through the engine.

use crate::device::Device;
use crate::model::{Ack, RunDescriptor, RunLog};
use crate::verify::classify::SectorTally;
use crate::verify::report::Report;
use crate::verify::{judge_tallies, scan, verify_device_or_no_reads};
use std::sync::Arc;
use std::time::Duration;

/// Records further apart than this are scanned in separate passes, so two streams'
/// shares far apart on the device do not make one scan read everything between them.
const CLUSTER_GAP_BYTES: u64 = 256 << 10;

pub struct PointJudge<'a> {
    descriptor: RunDescriptor,
    /// The witness's acks, every one the log may make ackable.
    witness: &'a [Ack],
    /// The acks judged so far, in the order they became ackable; only ever appended.
    pub acks: Vec<Ack>,
    tallies: Vec<SectorTally>,
    /// Indexes into `witness` sorted by record offset, built once: finds the acks
    /// overlapping a range in 4 bytes an ack (a map from offset to a list took some 90).
    by_offset: Vec<u32>,
    /// Per witness ack: its index in `acks`, or `NOT_YET` while it is not judged.
    judged_as: Vec<u32>,
    max_len: u64,
    /// Byte ranges written or discarded since the last judged state.
    dirty: Vec<(u64, u64)>,
    /// Acks added since the last judged state.
    fresh: Vec<usize>,
    full: bool,
    read_timeout: Duration,
    /// Bytes read by scans (what judging cost).
    pub bytes_read: u64,
}

/// `judged_as` of a witness ack not (yet) ackable.
const NOT_YET: u32 = u32::MAX;

impl<'a> PointJudge<'a> {
    /// A judge of `witness` acks (fewer than `u32::MAX`), none of them ackable yet.
    pub fn new(
        descriptor: RunDescriptor,
        witness: &'a [Ack],
        full: bool,
        read_timeout: Duration,
    ) -> PointJudge<'a> {
        assert!(
            witness.len() < NOT_YET as usize,
            "replay judges fewer than u32::MAX acks (loading that many takes some 170 GB first)"
        );
        let mut by_offset: Vec<u32> = (0..witness.len() as u32).collect();
        by_offset.sort_unstable_by_key(|&i| witness[i as usize].record.offset);
        PointJudge {
            descriptor,
            witness,
            acks: vec![],
            tallies: vec![],
            by_offset,
            judged_as: vec![NOT_YET; witness.len()],
            max_len: 0,
            dirty: vec![],
            fresh: vec![],
            full,
            read_timeout,
            bytes_read: 0,
        }
    }

    /// Bytes the replay changed on the image.
    pub fn note_dirty(&mut self, offset: u64, len: u64) {
        if len > 0 {
            self.dirty.push((offset, offset.saturating_add(len)));
        }
    }

    /// Witness acks (by index) the writer could have received by now, on top of the
    /// earlier ones.
    pub fn add(&mut self, ready: impl IntoIterator<Item = usize>) {
        for w in ready {
            let a = self.witness[w];
            let i = self.acks.len();
            self.max_len = self.max_len.max(a.record.len_bytes());
            self.judged_as[w] = i as u32;
            self.acks.push(a);
            self.tallies.push(SectorTally::default());
            self.fresh.push(i);
        }
    }

    /// Judged acks (indexes into `acks`) whose records overlap [s, e).
    fn overlapping(&self, s: u64, e: u64, out: &mut Vec<usize>) {
        let from = s.saturating_sub(self.max_len.saturating_sub(1));
        let offset = |k: usize| self.witness[self.by_offset[k] as usize].record.offset;
        let lo = self
            .by_offset
            .partition_point(|&w| self.witness[w as usize].record.offset < from);
        for k in lo..self.by_offset.len() {
            if offset(k) >= e {
                break;
            }
            let w = self.by_offset[k] as usize;
            let i = self.judged_as[w];
            if i != NOT_YET && self.witness[w].record.end() > s {
                out.push(i as usize);
            }
        }
    }

    /// Judges the image as it is now against the acks added so far; an error when the
    /// scan's read buffers cannot be had.
    pub fn judge(&mut self, dev: &Arc<dyn Device>) -> std::io::Result<Report> {
        if self.full {
            self.dirty.clear();
            self.fresh.clear();
            let log = self.log(self.acks.clone());
            let r = verify_device_or_no_reads(dev.clone(), &log, self.read_timeout)?;
            self.bytes_read += r.bytes_read;
            return Ok(r);
        }
        // New acks, and the older ones whose visible sectors they may hide.
        let mut targets: Vec<usize> = std::mem::take(&mut self.fresh);
        for k in 0..targets.len() {
            let r = self.acks[targets[k]].record;
            self.overlapping(r.offset, r.end(), &mut targets);
        }
        // Records whose bytes changed.
        for (s, e) in std::mem::take(&mut self.dirty) {
            self.overlapping(s, e, &mut targets);
        }
        targets.sort_unstable();
        targets.dedup();
        let mut found = crate::verify::judge::FoundElsewhere::new();
        for cluster in self.clusters(&targets) {
            self.rescan(dev, &cluster, &mut found)?;
        }
        let (mut report, _) = judge_tallies(&self.acks, &self.tallies, &found);
        report.run = Some(self.descriptor.clone());
        Ok(report)
    }

    /// `targets` (sorted by index) split into groups close together on the device.
    fn clusters(&self, targets: &[usize]) -> Vec<Vec<usize>> {
        let mut by_off: Vec<usize> = targets.to_vec();
        by_off.sort_by_key(|&i| self.acks[i].record.offset);
        let mut out: Vec<Vec<usize>> = vec![];
        let mut end = 0u64;
        for i in by_off {
            let r = &self.acks[i].record;
            match out.last_mut() {
                Some(c) if r.offset <= end.saturating_add(CLUSTER_GAP_BYTES) => c.push(i),
                _ => out.push(vec![i]),
            }
            end = end.max(r.end());
        }
        out
    }

    /// Re-scans the records of `cluster` (ack indexes) with every ack overlapping them.
    fn rescan(
        &mut self,
        dev: &Arc<dyn Device>,
        cluster: &[usize],
        found: &mut crate::verify::judge::FoundElsewhere,
    ) -> std::io::Result<()> {
        let mut with: Vec<usize> = cluster.to_vec();
        for &i in cluster {
            let r = self.acks[i].record;
            self.overlapping(r.offset, r.end(), &mut with);
        }
        with.sort_unstable();
        with.dedup();
        let sub: Vec<Ack> = with.iter().map(|&i| self.acks[i]).collect();
        let selected: Vec<usize> = cluster
            .iter()
            .map(|i| with.binary_search(i).expect("a target is in its own set"))
            .collect();
        let run = &self.descriptor;
        let result = scan::scan_selected(dev.clone(), run, &sub, &selected, self.read_timeout)?;
        self.bytes_read += result.bytes_read;
        for &k in &selected {
            self.tallies[with[k]] = result.tallies[k];
        }
        found.add(&result.found_elsewhere);
        Ok(())
    }

    /// A run log holding `acks`, for a whole verify of a state.
    pub fn log(&self, acks: Vec<Ack>) -> RunLog {
        RunLog {
            files: Default::default(),
            descriptor: self.descriptor.clone(),
            acks: in_writer_order(acks),
            events: vec![],
        }
    }
}

/// `acks` (in the order they became ackable in the log) in an order a writer sends
/// them: each stream's by seq. Why: verify refuses a log where a stream's seqs go back
/// as one no writer produced, and the log can make a record durable before an earlier
/// one of its stream (a split write). Each stream's acks are sorted by seq into the
/// places that stream's acks held, so the streams stay interleaved as they were acked.
/// Not by flush time: that is the writer's wall clock, which a clock step (NTP just after
/// boot) can move back mid-run, and sorting by it would put seqs out of order.
pub fn in_writer_order(mut acks: Vec<Ack>) -> Vec<Ack> {
    let mut by_stream: std::collections::BTreeMap<u16, Vec<Ack>> = Default::default();
    for a in &acks {
        by_stream.entry(a.record.stream).or_default().push(*a);
    }
    for list in by_stream.values_mut() {
        // Reversed so `pop` hands them out lowest seq first.
        list.sort_by_key(|a| std::cmp::Reverse(a.record.seq));
    }
    for slot in acks.iter_mut() {
        let list = by_stream
            .get_mut(&slot.record.stream)
            .expect("counted above");
        *slot = list.pop().expect("one per place");
    }
    acks
}
