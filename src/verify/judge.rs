//! From per-record classes to the report: counts, the loss window, ordering holes,
//! findings and the verdict. Why apart from the scan: the scan decides what each sector
//! holds and `classify` what each record is; this is where the run as a whole is judged,
//! for a readable device, a device that timed out, and a dead one alike.

use super::classify::{SectorTally, classify_record};
use super::distribution;
use super::report::{AckLogCheck, Finding, MAX_FINDINGS, OrderingHoles, REPORT_FORMAT, Report};
use super::scan;
use crate::model::{Ack, LossWindow, RecordClass, RunLog, Verdict};
use std::collections::HashMap;
use std::time::Duration;

/// Where a record of a stream was found when it was not at home: (stream, seq) → offset.
pub type FoundElsewhere = HashMap<(u16, u64), u64>;

/// A read that did not complete within the timeout proves nothing about the data: the
/// host may be starved of CPU (issue 11, defect 9: an honest drive was called FAIL under
/// a CPU hog) or the drive slow. Records it left unread are still counted "unreadable",
/// but unless a record verify did read was damaged, the verdict is INCONCLUSIVE (exit
/// 3), not FAIL, and the summary says how to get a verdict.
pub(super) fn timed_out(
    report: &mut Report,
    acks: &[Ack],
    classes: &[RecordClass],
    (from, len): (u64, u64),
    read_timeout: Duration,
) {
    let unread = |a: &Ack| a.record.offset < from + len && a.record.end() > from;
    let seen_damaged = acks
        .iter()
        .zip(classes)
        .any(|(a, c)| c.is_failure() && !unread(a));
    if seen_damaged {
        return;
    }
    let n = acks.iter().filter(|a| unread(a)).count();
    report.verdict = Verdict::Inconclusive;
    report.loss_window = None;
    report.summary = format!(
        "a read at byte {from} did not complete within {read_timeout:?}, so {n} of {} \
         acknowledged records could not be checked (no damage was seen in the rest); \
         this is not a verdict on the drive: run verify again, with a longer \
         --read-timeout if this machine is busy",
        acks.len()
    );
    report.refresh_plain();
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
    let mut counts = Report::counts_zero();
    for c in classes {
        *counts.get_mut(c.name()).unwrap() += 1;
    }
    let last_ack_ns = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
    let newest_survivor = acks
        .iter()
        .zip(classes)
        .filter(|(_, c)| **c == RecordClass::Intact)
        .map(|(a, _)| a.record.write_time_ns)
        .max();
    let bits = tallies.iter().map(|t| t.corrupt_bits).sum();
    let losses = losses(
        acks,
        classes,
        tallies,
        elsewhere,
        last_ack_ns,
        newest_survivor,
    );
    let (verdict, summary) = verdict(acks.len(), losses.records);
    let mut report = Report {
        format: REPORT_FORMAT,
        verdict,
        summary,
        counts,
        acked_records: acks.len() as u64,
        acked_bytes: acks.iter().map(|a| a.record.len_bytes()).sum(),
        corrupt_bits: bits,
        loss_window: (losses.records > 0).then(|| LossWindow {
            records: losses.records,
            bytes: losses.bytes,
            ms: last_ack_ns.saturating_sub(losses.earliest_flushed_ns) as f64 / 1e6,
        }),
        ordering_holes: OrderingHoles {
            count: losses.ordering_holes,
            newest_survivor_submitted_ns: newest_survivor,
        },
        dead_device: None,
        ack_log: AckLogCheck::default(),
        unreadable_ranges: vec![],
        findings_truncated: losses.records as usize > losses.findings.len(),
        findings: losses.findings,
        target: String::new(),
        ram_warning: None,
        device: None,
        run: None,
        bytes_read: 0,
        verify_ms: 0.0,
        ack_timeline: distribution::ack_timeline(acks, classes),
        flush_latency: distribution::flush_latency(acks),
        plugpull_version: env!("CARGO_PKG_VERSION"),
        plain: String::new(),
    };
    report.refresh_plain();
    report
}

/// Sums up the records that did not survive; a lost record acknowledged before a record
/// that survived was submitted is an ordering hole.
fn losses(
    acks: &[Ack],
    classes: &[RecordClass],
    tallies: &[SectorTally],
    elsewhere: &FoundElsewhere,
    last_ack_ns: u64,
    newest_survivor: Option<u64>,
) -> Losses {
    let mut l = Losses {
        records: 0,
        bytes: 0,
        earliest_flushed_ns: u64::MAX,
        ordering_holes: 0,
        findings: vec![],
    };
    for ((a, c), t) in acks.iter().zip(classes).zip(tallies) {
        if !c.is_failure() {
            continue;
        }
        l.records += 1;
        l.bytes += a.record.len_bytes();
        l.earliest_flushed_ns = l.earliest_flushed_ns.min(a.flushed_ns);
        let hole = newest_survivor.is_some_and(|s| s > a.flushed_ns);
        l.ordering_holes += hole as u64;
        if l.findings.len() < MAX_FINDINGS {
            l.findings
                .push(finding(a, *c, t, elsewhere, last_ack_ns, hole));
        }
    }
    l
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

/// The verdict and its one-line summary, from how many records were acked and lost.
fn verdict(acked: usize, lost: u64) -> (Verdict, String) {
    if acked == 0 {
        (
            Verdict::Inconclusive,
            "the witness holds no acknowledged records for this run, so there is nothing to check"
                .to_string(),
        )
    } else if lost > 0 {
        (
            Verdict::Fail,
            format!("{lost} of {acked} acknowledged records did not survive intact"),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "all {acked} acknowledged records survived (intact or legitimately overwritten)"
            ),
        )
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
    r.verdict = if log.acks.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Fail
    };
    r.summary = format!("the device is dead: {why}");
    r.dead_device = Some(why);
    r.run = Some(log.descriptor.clone());
    r.note_log_damage(crate::witness::store::checker::damage_details(log));
    r.refresh_plain();
    r
}
