//! From per-record classes to the report: counts, the loss window, ordering holes,
//! findings and the verdict. Why apart from the scan: the scan decides what each sector
//! holds and `classify` what each record is; this is where the run as a whole is judged,
//! for a readable device, a device that timed out, and a dead one alike.

use super::classify::{SectorTally, classify_record};
use super::distribution;
use super::report::{AckLogCheck, Finding, MAX_FINDINGS, OrderingHoles, REPORT_FORMAT, Report};
use super::scan;
use super::verdict::{Facts, ReadTimeout};
use crate::model::{Ack, LossWindow, RecordClass, RunLog, Verdict};
use std::time::Duration;

/// Where a record of a stream was found when it was not at home: (stream, seq) → offset.
pub use super::scan::elsewhere::FoundElsewhere;

/// A read that did not complete within the timeout proves nothing about the data: the
/// host may be starved of CPU (an honest drive was once called FAIL under a CPU
/// hog) or the drive slow. Unless a record verify did read was damaged, the verdict is
/// INCONCLUSIVE (exit 3), not FAIL, the records left unread still counted "unreadable",
/// and the summary says how to get a verdict. When one was damaged, the FAIL stands on
/// the records read: those left unread were never judged, so they are taken out of
/// every count, finding, loss window, ordering hole and the timeline, and the summary
/// and the plain words say how many were left unread. Fed one ack at a time, in ack
/// order: verify streams the acks.
pub(super) struct TimedOut {
    from: u64,
    len: u64,
    acks: u64,
    /// The run's last ack and newest survivor, as [`Judging`] has them: known before any
    /// ack is added, so each record left unread is counted where it belongs at once.
    last_ack_ns: u64,
    newest_survivor: Option<u64>,
    /// Failing records that were read: the loss the drive proves.
    read_failing: u64,
    read_failing_bytes: u64,
    earliest_read_failing_ns: u64,
    /// Records of a failing class the hung read left unread: how many, how many of
    /// them were ordering holes, and how many of each class fell in each bucket of the
    /// timeline. Counted, not listed: a read that hangs early on a large drive leaves
    /// most of its records unread, and a list would outgrow the memory budget.
    unread: u64,
    unread_holes: u64,
    unread_by_bucket: std::collections::BTreeMap<(usize, RecordClass), u64>,
}

impl TimedOut {
    /// A read hung at `from`, leaving `len` bytes unread; the run's last ack was flushed
    /// at `last_ack_ns` and its newest survivor submitted at `newest_survivor`.
    pub fn new(
        (from, len): (u64, u64),
        last_ack_ns: u64,
        newest_survivor: Option<u64>,
    ) -> TimedOut {
        TimedOut {
            from,
            len,
            acks: 0,
            last_ack_ns,
            newest_survivor,
            read_failing: 0,
            read_failing_bytes: 0,
            earliest_read_failing_ns: u64::MAX,
            unread: 0,
            unread_holes: 0,
            unread_by_bucket: Default::default(),
        }
    }

    /// Ack `a`, judged `c`: every ack of the run, in ack order.
    pub fn add(&mut self, a: &Ack, c: RecordClass) {
        self.acks += 1;
        if !c.is_failure() {
            return;
        }
        if self.left_unread(a.record.offset, a.record.len_bytes()) {
            self.unread += 1;
            self.unread_holes += u64::from(self.newest_survivor.is_some_and(|s| s > a.flushed_ns));
            let ms = self.last_ack_ns.saturating_sub(a.flushed_ns) as f64 / 1e6;
            *self
                .unread_by_bucket
                .entry((distribution::bucket_125(ms), c))
                .or_default() += 1;
        } else {
            self.read_failing += 1;
            self.read_failing_bytes += a.record.len_bytes();
            self.earliest_read_failing_ns = self.earliest_read_failing_ns.min(a.flushed_ns);
        }
    }

    /// Whether the record at `offset` of `len` bytes lies (in part) where the hung read
    /// left the device unread.
    fn left_unread(&self, offset: u64, len: u64) -> bool {
        offset < self.from + self.len && offset + len > self.from
    }

    /// For a run judged in parts (`partition`), which sees only its failures in ack
    /// order: `acks` more acks of the run that are not failures, as if each was
    /// [`TimedOut::add`]ed.
    pub fn add_others(&mut self, acks: u64) {
        self.acks += acks;
    }

    pub fn apply(self, report: &mut Report, read_timeout: Duration) {
        let damage_seen = self.read_failing > 0;
        if damage_seen {
            self.leave_out_the_unread(report);
        } else {
            report.loss_window = None;
        }
        report.facts.read_timeout = Some(ReadTimeout {
            at_byte: self.from,
            unread: self.unread,
            acks: self.acks,
            limit: read_timeout,
            damage_seen,
        });
        report.conclude();
    }

    /// Takes the records left unread out of what [`Judging`] made of them as failures:
    /// the counts, the failing count, the loss window, the findings, the ordering holes
    /// and the timeline then speak of the records read only.
    fn leave_out_the_unread(&self, report: &mut Report) {
        report.ordering_holes.count -= self.unread_holes;
        for (&(bucket, c), &n) in &self.unread_by_bucket {
            if let Some(count) = report.counts.get_mut(c.name()) {
                *count -= n;
            }
            let to_ms = distribution::edge_125(bucket);
            if let Some(b) = report.ack_timeline.iter_mut().find(|b| b.to_ms == to_ms)
                && let Some(count) = b.counts.get_mut(c.name())
            {
                *count -= n;
                if *count == 0 {
                    b.counts.remove(c.name());
                }
            }
        }
        report.ack_timeline.retain(|b| !b.counts.is_empty());
        report.facts.failing = self.read_failing;
        report.loss_window = Some(LossWindow {
            records: self.read_failing,
            bytes: self.read_failing_bytes,
            ms: self
                .last_ack_ns
                .saturating_sub(self.earliest_read_failing_ns) as f64
                / 1e6,
        });
        report
            .findings
            .retain(|f| !self.left_unread(f.offset, f.len_bytes));
        report.findings_truncated = self.read_failing as usize > report.findings.len();
    }
}

/// What the failed records add up to, and the first [`MAX_FINDINGS`] of them.
struct Losses {
    records: u64,
    bytes: u64,
    earliest_flushed_ns: u64,
    ordering_holes: u64,
    findings: Vec<Finding>,
}

/// Counts, loss window, ordering holes and the verdict from per-record classes.
pub(super) fn judge(
    acks: &[Ack],
    classes: &[RecordClass],
    tallies: &[SectorTally],
    elsewhere: &FoundElsewhere,
) -> Report {
    let last_ack_ns = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
    let newest_survivor = acks
        .iter()
        .zip(classes)
        .filter(|(_, c)| **c == RecordClass::Intact)
        .map(|(a, _)| a.record.write_time_ns)
        .max();
    let mut latency = distribution::LatencyCoarse::default();
    acks.iter().for_each(|a| latency.add(a));
    let mut j = Judging::new(last_ack_ns, newest_survivor, &latency);
    for ((a, c), t) in acks.iter().zip(classes).zip(tallies) {
        j.add(a, *c, t, elsewhere);
    }
    j.finish()
}

/// [`judge`] one ack at a time, for verify at scale (`verify::scale`), which streams
/// the acks instead of holding them. What needs the whole run is given up front from a
/// first pass: the last ack and the latency's coarse counts; the newest survivor (only
/// a record judged intact can be one) before the first loss.
///
/// Everything but the losses is a count, so acks may be [`Judging::count`]ed in any
/// order; the losses keep the first [`MAX_FINDINGS`] findings, so they are
/// [`Judging::add_loss`]ed in ack order.
pub(super) struct Judging {
    last_ack_ns: u64,
    newest_survivor: Option<u64>,
    /// Acks per class, by `RecordClass as usize` (a map lookup by name per ack showed
    /// in verify's profile with 512 B records).
    by_class: [u64; RecordClass::ALL.len()],
    acked: u64,
    acked_bytes: u64,
    bits: u64,
    losses: Losses,
    timeline: distribution::Timeline,
    latency: distribution::LatencyFine,
    /// Where a hung read left the device unread (offset, length): failures there get no
    /// finding, so the first [`MAX_FINDINGS`] are of records that were read.
    unread: Option<(u64, u64)>,
}

impl Judging {
    pub fn new(
        last_ack_ns: u64,
        newest_survivor: Option<u64>,
        latency: &distribution::LatencyCoarse,
    ) -> Judging {
        Judging {
            last_ack_ns,
            newest_survivor,
            by_class: [0; RecordClass::ALL.len()],
            acked: 0,
            acked_bytes: 0,
            bits: 0,
            losses: Losses {
                records: 0,
                bytes: 0,
                earliest_flushed_ns: u64::MAX,
                ordering_holes: 0,
                findings: vec![],
            },
            timeline: distribution::Timeline::new(last_ack_ns),
            latency: latency.fine(),
            unread: None,
        }
    }

    /// Counts then, for a failure, adds the loss: acks in ack order.
    pub fn add(&mut self, a: &Ack, c: RecordClass, t: &SectorTally, elsewhere: &FoundElsewhere) {
        self.count(a, c, t);
        if c.is_failure() {
            self.add_loss(a, c, t, elsewhere);
        }
    }

    /// Adds ack `a` of class `c` to every count (in any order); a failure must also be
    /// given to [`Judging::add_loss`].
    #[inline]
    pub fn count(&mut self, a: &Ack, c: RecordClass, t: &SectorTally) {
        self.count_ack(a);
        self.count_class(a, c, t);
    }

    /// The counts that do not depend on the ack's class: every ack once.
    #[inline]
    pub fn count_ack(&mut self, a: &Ack) {
        self.acked += 1;
        self.acked_bytes += a.record.len_bytes();
        self.latency.add(a);
    }

    /// The counts by class: every ack once, with [`Judging::count_ack`].
    #[inline]
    pub fn count_class(&mut self, a: &Ack, c: RecordClass, t: &SectorTally) {
        self.by_class[c as usize] += 1;
        self.bits += t.corrupt_bits;
        self.timeline.add(a, c);
    }

    /// The newest survivor, when it was not known at [`Judging::new`]: before the first
    /// [`Judging::add_loss`].
    pub fn set_newest_survivor(&mut self, newest_survivor: Option<u64>) {
        self.newest_survivor = newest_survivor;
    }

    /// Where a hung read left the device unread, when one did: before the first
    /// [`Judging::add_loss`]. Those records are taken out of every count after
    /// (`TimedOut::apply`); a finding kept for one would stand in for one that was read.
    pub fn set_unread(&mut self, unread: Option<(u64, u64)>) {
        self.unread = unread;
    }

    /// Adds failed ack `a` to the losses: failures in ack order.
    pub fn add_loss(
        &mut self,
        a: &Ack,
        c: RecordClass,
        t: &SectorTally,
        elsewhere: &FoundElsewhere,
    ) {
        debug_assert!(c.is_failure());
        // A lost record acknowledged before a record that survived was submitted is an
        // ordering hole.
        let l = &mut self.losses;
        l.records += 1;
        l.bytes += a.record.len_bytes();
        l.earliest_flushed_ns = l.earliest_flushed_ns.min(a.flushed_ns);
        let hole = self.newest_survivor.is_some_and(|s| s > a.flushed_ns);
        l.ordering_holes += hole as u64;
        let unread = self
            .unread
            .is_some_and(|(from, len)| a.record.offset < from + len && a.record.end() > from);
        if l.findings.len() < MAX_FINDINGS && !unread {
            l.findings
                .push(finding(a, c, t, elsewhere, self.last_ack_ns, hole));
        }
    }

    /// Acks counted so far ([`Judging::count_ack`]).
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// The report on a run the engine judged (`verify::scale`, `verify::partition`):
    /// the counts, then what the reads found, in the one order both halves need
    /// (a hung read's unread acks before the plain words).
    pub fn finish_run(
        self,
        d: &crate::model::RunDescriptor,
        timed_out: Option<(TimedOut, Duration)>,
        reads: ReadsDone,
        started: std::time::Instant,
    ) -> Report {
        let mut report = self.finish();
        if let Some((to, read_timeout)) = timed_out {
            to.apply(&mut report, read_timeout);
        }
        let mut unreadable = reads.unreadable;
        scan::tidy_unreadable(&mut unreadable);
        report.unreadable_ranges = unreadable;
        report.bytes_read = reads.bytes_read;
        let region = (
            d.settings.region_offset,
            d.settings.region_offset + d.settings.region_bytes,
        );
        report.region_read = reads
            .read_through
            .is_some_and(|(s, e)| s <= region.0 && region.1 <= e);
        report.too_many_found_elsewhere = reads.too_many_found_elsewhere;
        report.verify_ms = started.elapsed().as_secs_f64() * 1e3;
        report.set_run(d);
        report.refresh_plain();
        report
    }

    pub fn finish(self) -> Report {
        let losses = self.losses;
        let facts = Facts {
            acked: self.acked,
            failing: losses.records,
            intact: self.by_class[RecordClass::Intact as usize],
            ..Default::default()
        };
        let last_ack_ns = self.last_ack_ns;
        let mut report = Report {
            format: REPORT_FORMAT,
            verdict: Verdict::Inconclusive,
            summary: String::new(),
            counts: RecordClass::ALL
                .iter()
                .map(|&c| (c.name(), self.by_class[c as usize]))
                .collect(),
            acked_records: self.acked,
            acked_bytes: self.acked_bytes,
            corrupt_bits: self.bits,
            loss_window: (losses.records > 0).then(|| LossWindow {
                records: losses.records,
                bytes: losses.bytes,
                ms: last_ack_ns.saturating_sub(losses.earliest_flushed_ns) as f64 / 1e6,
            }),
            ordering_holes: OrderingHoles {
                count: losses.ordering_holes,
                newest_survivor_submitted_ns: self.newest_survivor,
            },
            dead_device: None,
            ack_log: AckLogCheck::default(),
            writer_end: None,
            superseded_by_runs: vec![],
            unreadable_ranges: vec![],
            findings_truncated: losses.records as usize > losses.findings.len(),
            findings: losses.findings,
            target: String::new(),
            ram_warning: None,
            device: None,
            run: None,
            written_by: None,
            unacked_found: None,
            bytes_read: 0,
            region_read: false,
            too_many_found_elsewhere: false,
            verify_ms: 0.0,
            ack_timeline: self.timeline.finish(),
            flush_latency: self.latency.finish(),
            plugpull_version: env!("CARGO_PKG_VERSION"),
            plain: String::new(),
            facts,
        };
        report.conclude();
        report
    }
}

/// What a run's reads came to, for [`Judging::finish_run`].
pub struct ReadsDone {
    pub unreadable: Vec<(u64, u64, String)>,
    pub bytes_read: u64,
    /// `scan::ScanResult::read_through`, of all the reads.
    pub read_through: Option<(u64, u64)>,
    /// `FoundElsewhere::too_many`: so many records were found away from home that
    /// none is named.
    pub too_many_found_elsewhere: bool,
}

/// One failed record as the report lists it.
fn finding(
    a: &Ack,
    class: RecordClass,
    t: &SectorTally,
    elsewhere: &FoundElsewhere,
    last_ack_ns: u64,
    ordering_hole: bool,
) -> Finding {
    let sectors = [
        ("intact", t.intact),
        ("superseded", t.superseded),
        ("old", t.old),
        ("blank", t.blank),
        ("foreign", t.foreign),
        ("corrupt", t.corrupt),
        ("misplaced", t.misplaced),
        ("unreadable", t.unreadable),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .collect();
    Finding {
        class,
        stream: a.record.stream,
        seq: a.record.seq,
        offset: a.record.offset,
        len_bytes: a.record.len_bytes(),
        submitted_ns: a.record.write_time_ns,
        flushed_ns: a.flushed_ns,
        acked_ms_before_last_ack: last_ack_ns.saturating_sub(a.flushed_ns) as f64 / 1e6,
        sectors,
        corrupt_bits: (t.corrupt_bits > 0).then_some(t.corrupt_bits),
        found_at: elsewhere
            .get(&(a.record.stream, a.record.seq))
            .copied()
            .filter(|_| class == RecordClass::Misdirected),
        ordering_hole,
    }
}

/// A report for a target that cannot be opened or read at all.
pub fn dead_device_report(log: &RunLog, why: String) -> Report {
    // Sectors a later acknowledged record covers are that record's to lose: a record
    // wholly covered is superseded even on a dead drive.
    let visible = scan::visible_ranges(&log.acks);
    let tallies: Vec<_> = log
        .acks
        .iter()
        .zip(&visible)
        .map(|(a, v)| {
            let seen: u64 = v
                .iter()
                .map(|(s, e)| (e - s) / crate::record::SECTOR as u64)
                .sum();
            SectorTally {
                unreadable: seen as u32,
                superseded: a.record.sectors - seen as u32,
                ..Default::default()
            }
        })
        .collect();
    let classes: Vec<RecordClass> = tallies.iter().map(|t| classify_record(t, false)).collect();
    let mut r = judge(&log.acks, &classes, &tallies, &Default::default());
    r.dead_device = Some(why.clone());
    r.facts.dead_device = Some(why);
    r.set_run(&log.descriptor);
    r.conclude();
    r.note_log_damage(crate::witness::store::checker::damage_details(log));
    r
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
