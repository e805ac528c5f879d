//! A reference judge for the differential tests: deliberately simple and slow, sharing
//! nothing with the engine but the record format and the decision table's rules.
//!
//! Why: the tests once compared the streaming engine with an in-memory verify; with one
//! engine left, they compare it with this. Per sector of the device: which ack owns it
//! last (the greatest (stream, seq) covering it, found by brute force over every ack);
//! per owned sector: one 512-byte read and what the device holds there, against the
//! bytes the owner's record would have. No painting, no slots, no read pipeline, no
//! summary: a bug in any of those shows as a difference.

use crate::device::Device;
use crate::model::{Ack, RecordClass, RunDescriptor, Verdict};
use crate::record::{RunKey, SECTOR, StampError, decode_stamp, fill_record};
use crate::verify::report::Report;
use std::collections::{BTreeMap, HashSet};

const SECTOR_U64: u64 = SECTOR as u64;

/// The parts of a report both judges must agree on.
#[derive(Debug, PartialEq, Eq)]
pub struct Judged {
    pub verdict: Verdict,
    /// Records per class, classes with none left out.
    pub counts: BTreeMap<&'static str, u64>,
    pub acked_records: u64,
    pub acked_bytes: u64,
    pub corrupt_bits: u64,
    /// (stream, seq, class, ordering hole) of every failing record, sorted.
    pub failing: Vec<(u16, u64, &'static str, bool)>,
    /// (records, bytes) lost.
    pub loss_window: Option<(u64, u64)>,
}

/// What one sector holds for the record that owns it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    Intact,
    Newer,
    Older,
    Blank,
    Foreign,
    Corrupt(u64),
    Misplaced,
    Unreadable,
}

/// The sector at `at` of `dev`, or None when it cannot be read (or lies past the end).
fn read_sector(dev: &dyn Device, at: u64) -> Option<Vec<u8>> {
    if at + SECTOR_U64 > dev.size_bytes() {
        return None;
    }
    let mut b = vec![0u8; SECTOR];
    dev.read_at(&mut b, at).ok().map(|()| b)
}

fn bits_apart(a: &[u8], b: &[u8]) -> u64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x ^ y).count_ones() as u64)
        .sum()
}

/// Judges `acks` of run `d` against `dev` the slow way. `scan_region`: misplaced copies
/// are looked for over the whole region too, not only between the live records.
pub fn judge(dev: &dyn Device, d: &RunDescriptor, acks: &[Ack], scan_region: bool) -> Judged {
    let run = d.run_id;
    let key = RunKey::for_version(run, d.format_version).expect("a known format");
    // Who owns each sector last: the greatest (stream, seq) covering it.
    let mut owner: BTreeMap<u64, usize> = BTreeMap::new();
    for (i, a) in acks.iter().enumerate() {
        for k in 0..a.record.sectors as u64 {
            let at = a.record.offset + k * SECTOR_U64;
            let o = owner.entry(at).or_insert(i);
            let (r, mine) = (&acks[*o].record, &a.record);
            if (mine.stream, mine.seq) > (r.stream, r.seq) {
                *o = i;
            }
        }
    }
    let owned = |i: usize| -> Vec<u64> {
        let a = &acks[i].record;
        (0..a.sectors as u64)
            .filter(|k| owner[&(a.offset + k * SECTOR_U64)] == i)
            .collect()
    };
    // Where copies of a record away from their home are looked for: the span of the
    // live records, and the region when asked.
    let live: Vec<usize> = (0..acks.len()).filter(|&i| !owned(i).is_empty()).collect();
    let mut span = live.iter().fold((u64::MAX, 0), |(s, e), &i| {
        let r = &acks[i].record;
        (s.min(r.offset), e.max(r.end()))
    });
    if scan_region {
        let s = &d.settings;
        span = (
            span.0.min(s.region_offset),
            span.1.max(s.region_offset + s.region_bytes),
        );
    }
    let mut elsewhere: HashSet<(u16, u64)> = HashSet::new();
    let mut at = span.0;
    while at < span.1 {
        if let Some(b) = read_sector(dev, at)
            && let Ok(s) = decode_stamp(&b)
            && s.run == run
            && s.home() != at
        {
            elsewhere.insert((s.record.stream, s.record.seq));
        }
        at += SECTOR_U64;
    }
    let mut classes = vec![RecordClass::Superseded; acks.len()];
    let mut bits = 0u64;
    for &i in &live {
        let rec = &acks[i].record;
        let mut want = vec![0u8; rec.len_bytes() as usize];
        fill_record(&mut want, &key, run, rec);
        let mine = owned(i);
        // A sector a later ack owns counts as superseded: that ack is judged there.
        let held: Vec<Held> = (0..rec.sectors as u64)
            .map(|k| {
                if !mine.contains(&k) {
                    return Held::Newer;
                }
                let at = rec.offset + k * SECTOR_U64;
                let want = &want[k as usize * SECTOR..(k as usize + 1) * SECTOR];
                let Some(got) = read_sector(dev, at) else {
                    return Held::Unreadable;
                };
                if got == want {
                    return Held::Intact;
                }
                let bits = bits_apart(&got, want).max(1);
                match decode_stamp(&got) {
                    Ok(s) if s.run != run => Held::Foreign,
                    Ok(s) if s.home() != at => Held::Misplaced,
                    Ok(s) if s.record == *rec => Held::Corrupt(bits),
                    Ok(s) if s.record.stream == rec.stream => match s.record.seq.cmp(&rec.seq) {
                        std::cmp::Ordering::Greater => Held::Newer,
                        std::cmp::Ordering::Less => Held::Older,
                        std::cmp::Ordering::Equal => Held::Corrupt(bits),
                    },
                    Ok(s) if s.record.write_time_ns > rec.write_time_ns => Held::Newer,
                    Ok(_) => Held::Older,
                    Err(StampError::UnknownVersion(_)) => Held::Foreign,
                    Err(_) if bits <= super::super::classify::CORRUPT_MAX_BITS => {
                        Held::Corrupt(bits)
                    }
                    Err(_) => Held::Blank,
                }
            })
            .collect();
        let has = |h: Held| held.contains(&h);
        let corrupt: u64 = held
            .iter()
            .map(|h| match h {
                Held::Corrupt(b) => *b,
                _ => 0,
            })
            .sum();
        let stale_or_lost = held
            .iter()
            .any(|h| matches!(h, Held::Older | Held::Blank | Held::Foreign));
        // Counted whatever the class (an unreadable record's corrupt sectors too).
        bits += corrupt;
        classes[i] = if has(Held::Unreadable) {
            RecordClass::Unreadable
        } else if corrupt > 0 {
            RecordClass::Corrupt
        } else if has(Held::Misplaced) {
            RecordClass::Misdirected
        } else if !stale_or_lost {
            if has(Held::Newer) {
                RecordClass::Superseded
            } else {
                RecordClass::Intact
            }
        } else if has(Held::Intact) {
            RecordClass::Shorn
        } else if elsewhere.contains(&(rec.stream, rec.seq)) {
            RecordClass::Misdirected
        } else if has(Held::Foreign) {
            RecordClass::Stale
        } else {
            RecordClass::Lost
        };
    }
    let newest_survivor = (0..acks.len())
        .filter(|&i| classes[i] == RecordClass::Intact)
        .map(|i| acks[i].record.write_time_ns)
        .max();
    let mut counts = BTreeMap::new();
    let mut failing = vec![];
    let (mut lost, mut lost_bytes) = (0, 0);
    for (a, c) in acks.iter().zip(&classes) {
        *counts.entry(c.name()).or_insert(0) += 1;
        if c.is_failure() {
            let hole = newest_survivor.is_some_and(|s| s > a.flushed_ns);
            failing.push((a.record.stream, a.record.seq, c.name(), hole));
            lost += 1;
            lost_bytes += a.record.len_bytes();
        }
    }
    failing.sort_unstable();
    let verdict = match (acks.len(), lost) {
        (0, _) => Verdict::Inconclusive,
        (_, 0) => Verdict::Pass,
        _ => Verdict::Fail,
    };
    Judged {
        verdict,
        counts,
        acked_records: acks.len() as u64,
        acked_bytes: acks.iter().map(|a| a.record.len_bytes()).sum(),
        corrupt_bits: bits,
        failing,
        loss_window: (lost > 0).then_some((lost, lost_bytes)),
    }
}

/// The same parts of the engine's report.
pub fn observed(r: &Report) -> Judged {
    assert!(!r.findings_truncated, "a test run small enough to list");
    let mut failing: Vec<_> = r
        .findings
        .iter()
        .map(|f| (f.stream, f.seq, f.class.name(), f.ordering_hole))
        .collect();
    failing.sort_unstable();
    Judged {
        verdict: r.verdict,
        counts: r
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(c, n)| (*c, *n))
            .collect(),
        acked_records: r.acked_records,
        acked_bytes: r.acked_bytes,
        corrupt_bits: r.corrupt_bits,
        failing,
        loss_window: r.loss_window.as_ref().map(|w| (w.records, w.bytes)),
    }
}
