//! What verify must report after a simulated power cut, derived from the drive's oracle
//! and the witness's acks: the yardstick of the power-cut scenarios and the soak.
//!
//! Why a separate rule and not the raw oracle: the oracle speaks for the drive (every
//! flushed write, and what sat on media), while verify speaks for the witness (every
//! acknowledged record). The rule that maps one onto the other:
//!
//! 1. Only records of this run that the witness acknowledged count. A write that was
//!    flushed but whose ack never left the writer (the flush in flight at the cut) or
//!    never reached the witness made no promise.
//! 2. A record counts only where it is the latest acknowledged record: the oracle drops a
//!    fault's records once a later write is flushed over them, and verify judges only
//!    sectors no later ack covers. The two agree when every flushed write is acknowledged
//!    and later records cover earlier ones whole (fixed-size records on a grid); tests
//!    keep to that (see `Scope` below and docs/fault-model.md).
//! 3. Classes map one to one, except: a hole is "lost" plus a run-level ordering finding;
//!    a misdirected write whose copy landed outside the span verify reads is "lost" (verify
//!    cannot see a copy it does not read); unreadable and dead faults name ranges, so
//!    every acknowledged record with a latest sector in the range is "unreadable".
//! 4. When several faults hit one record, the decision table's order decides:
//!    unreadable, corrupt, misdirected, shorn, lost.
//! 5. Corrupt records carry the number of flipped bits still on media.

use super::oracle::{Class, Fault};
use crate::model::{Ack, RecordClass};
use crate::verify::report::Report;
use crate::verify::scan::visible_ranges;
use std::collections::{BTreeMap, HashSet};

/// (stream, seq) -> (verify's class, corrupt bits or 0).
pub type Findings = BTreeMap<(u16, u64), (RecordClass, u64)>;

/// The byte span verify reads for these acks: from the first record to the end of the
/// last, in 512-byte blocks.
pub fn scan_span(acks: &[Ack]) -> (u64, u64) {
    let start = acks.iter().map(|a| a.record.offset).min().unwrap_or(0);
    let end = acks.iter().map(|a| a.record.end()).max().unwrap_or(0);
    (start / 512 * 512, end.div_ceil(512) * 512)
}

/// The decision table's order when several faults hit one record (rule 4).
fn rank(class: RecordClass) -> u8 {
    match class {
        RecordClass::Unreadable => 5,
        RecordClass::Corrupt => 4,
        RecordClass::Misdirected => 3,
        RecordClass::Shorn => 2,
        _ => 1,
    }
}

fn put(out: &mut Findings, key: (u16, u64), class: RecordClass, bits: u64) {
    match out.get_mut(&key) {
        Some(cur) if rank(cur.0) > rank(class) => {}
        Some(cur) if cur.0 == class => cur.1 += bits,
        _ => {
            out.insert(key, (class, bits));
        }
    }
}

/// What verify must find for run `run` (hex) given its acks and the resolved oracle.
pub fn expected(run: &str, acks: &[Ack], oracle: &[Fault]) -> Findings {
    let acked: HashSet<(u16, u64)> = acks
        .iter()
        .map(|a| (a.record.stream, a.record.seq))
        .collect();
    let (span_start, span_end) = scan_span(acks);
    let mut out = Findings::new();
    for f in oracle {
        let class = match f.class {
            Class::Unreadable | Class::Dead => continue,
            Class::Lost | Class::Hole => RecordClass::Lost,
            Class::Shorn => RecordClass::Shorn,
            Class::Corrupt => RecordClass::Corrupt,
            Class::Misdirected => match f.to_offset {
                Some(d) if d + f.len <= span_start || d >= span_end => RecordClass::Lost,
                _ => RecordClass::Misdirected,
            },
        };
        for r in &f.records {
            let key = (r.stream, r.seq);
            if r.run != run || !acked.contains(&key) {
                continue;
            }
            let bits = if class == RecordClass::Corrupt {
                f.bits
            } else {
                0
            };
            put(&mut out, key, class, bits);
        }
    }
    // Range faults: every acknowledged record still visible in the range.
    let ranges: Vec<(u64, u64)> = oracle
        .iter()
        .filter(|f| matches!(f.class, Class::Unreadable | Class::Dead))
        .map(|f| (f.offset, f.offset + f.len))
        .collect();
    if !ranges.is_empty() {
        let visible = visible_ranges(acks);
        for (a, vis) in acks.iter().zip(&visible) {
            let hit = vis
                .iter()
                .any(|&(s, e)| ranges.iter().any(|&(rs, re)| s < re && rs < e));
            if hit {
                let key = (a.record.stream, a.record.seq);
                out.insert(key, (RecordClass::Unreadable, 0));
            }
        }
    }
    // A corrupt record's bits only matter as a count; drop zero counts on other classes.
    for v in out.values_mut() {
        if v.0 != RecordClass::Corrupt {
            v.1 = 0;
        }
    }
    out
}

/// What verify reported, in the same terms. `None` if the report lists only some of its
/// failing records (findings truncated), so it cannot be compared exactly.
pub fn found(report: &Report) -> Option<Findings> {
    if report.findings_truncated {
        return None;
    }
    Some(
        report
            .findings
            .iter()
            .map(|f| ((f.stream, f.seq), (f.class, f.corrupt_bits.unwrap_or(0))))
            .collect(),
    )
}

/// The same, from a `plugpull verify --json` report (`None` also when a class is not
/// one of verify's).
pub fn found_json(report: &serde_json::Value) -> Option<Findings> {
    if report["findings_truncated"].as_bool() == Some(true) {
        return None;
    }
    let mut out = Findings::new();
    for f in report["findings"].as_array()? {
        let key = (f["stream"].as_u64()? as u16, f["seq"].as_u64()?);
        let class = f["class"].as_str()?.parse::<RecordClass>().ok()?;
        out.insert(key, (class, f["corrupt_bits"].as_u64().unwrap_or(0)));
    }
    Some(out)
}

/// A readable account of where two sets differ, for failure messages.
pub fn diff(expected: &Findings, found: &Findings) -> String {
    let mut lines = Vec::new();
    for (k, v) in expected {
        match found.get(k) {
            None => lines.push(format!("  missed   {k:?}: oracle says {}", show(v))),
            Some(w) if w != v => lines.push(format!(
                "  differs  {k:?}: oracle {}, verify {}",
                show(v),
                show(w)
            )),
            _ => {}
        }
    }
    for (k, w) in found {
        if !expected.contains_key(k) {
            lines.push(format!(
                "  extra    {k:?}: verify says {}, oracle nothing",
                show(w)
            ));
        }
    }
    lines.truncate(40);
    lines.join("\n")
}

/// A finding as the failure messages have always shown it: `("lost", 0)`.
fn show(&(class, bits): &(RecordClass, u64)) -> String {
    format!("{:?}", (class.name(), bits))
}
