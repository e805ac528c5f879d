//! Reads that follow the records: when the records to judge cover little of their span
//! (a few thousand records placed at random over a large drive), only their own blocks
//! are read, coalesced into runs of nearby blocks, in offset order, through the same
//! pipeline. Why: the span of 20,000 random 4 KiB records over 200 GiB is the whole
//! 200 GiB, two minutes of reads for 80 MB of records. The bytes between the runs hold
//! no byte of any record judged, so skipping them changes no record's tally; only a
//! record of the run written away from its home into a skipped gap goes unseen, which
//! `--scan-region` (the whole region read) is there for.

use crate::model::{Ack, RunDescriptor};

/// How a scan reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reads {
    /// The whole span of the records (and of `also`).
    #[default]
    Span,
    /// Only the records' blocks, when they are sparse in their span
    /// ([`record_runs`]); else the whole span.
    Records,
}

/// Gaps up to this long between two records are read through: one read of a gap
/// costs less than a second request on any drive, and few long runs keep the
/// pipeline's chunks full.
pub(super) const COALESCE_GAP_BYTES: u64 = 256 << 10;

/// A span is read whole when the records' runs would cover more than 1/SPARSE_RATIO of
/// it: reading a dense span in sequence is as fast as its records alone.
pub const SPARSE_RATIO: u64 = 4;

/// The runs of whole blocks holding the records at `order` in `acks` (sorted, disjoint,
/// gaps of at most [`COALESCE_GAP_BYTES`] read through, cut at the device's end), or
/// None if they cover more than 1/[`SPARSE_RATIO`] of `span` (read the span whole).
/// `span`: (start, end, readable_end, block) of the scan's span.
pub(super) fn record_runs(
    acks: &[Ack],
    order: &[usize],
    span: (u64, u64, u64, u64),
) -> Option<Vec<(u64, u64)>> {
    let (start, end, readable_end, block) = span;
    let width = end - start;
    // A cheap bound first: records whose bytes alone fill the span cannot be sparse (no
    // list of extents is made for a dense region of a billion records).
    let bytes: u64 = order.iter().map(|&i| acks[i].record.len_bytes()).sum();
    if bytes.saturating_mul(SPARSE_RATIO) > width {
        return None;
    }
    let mut extents: Vec<(u64, u64)> = order
        .iter()
        .map(|&i| {
            let r = &acks[i].record;
            let s = r.offset / block * block;
            let e = r.end().div_ceil(block) * block;
            (s.min(readable_end), e.min(readable_end))
        })
        .filter(|&(s, e)| s < e)
        .collect();
    extents.sort_unstable();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (s, e) in extents {
        match runs.last_mut() {
            Some(last) if s <= last.1.saturating_add(COALESCE_GAP_BYTES) => last.1 = last.1.max(e),
            _ => runs.push((s, e)),
        }
    }
    let covered: u64 = runs.iter().map(|&(s, e)| e - s).sum();
    (covered.saturating_mul(SPARSE_RATIO) <= width).then_some(runs)
}

/// Whether `acks_at_most` acks (None: unknown) of records of at most the run's largest
/// size cover at most 1/[`SPARSE_RATIO`] of the run's region: then reading the whole
/// region before the first pass (`verify::scale`) would be mostly wasted.
pub fn sparse_at_most(d: &RunDescriptor, acks_at_most: Option<u64>) -> bool {
    let s = &d.settings;
    let Some(n) = acks_at_most else { return false };
    n.saturating_mul(s.record_bytes_max.max(1))
        .saturating_mul(SPARSE_RATIO)
        <= s.region_bytes
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
