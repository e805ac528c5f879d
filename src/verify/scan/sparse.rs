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

/// The ack count, against the region, below which a run's records are read alone: at
/// most 1/SPARSE_RATIO of the region ([`sparse_at_most`]).
pub const SPARSE_RATIO: u64 = 4;

/// The runs of whole blocks holding the records at `order` in `acks`, within
/// [`within`.0, `within`.1) (sorted, disjoint). A gap of at most [`COALESCE_GAP_BYTES`]
/// between two records is read through when it lies inside one chunk of the device's
/// grid (`pipeline::CHUNK_BYTES`) and does not start on its edge. Why the grid: which
/// gaps are read then depends only on the records within each chunk, so the parts of a
/// run judged in parts (`verify::partition`, edges on the grid) read exactly the bytes
/// the whole run reads.
pub(super) fn record_runs(
    acks: &[Ack],
    order: &[usize],
    within: (u64, u64),
    block: u64,
) -> Vec<(u64, u64)> {
    let (lo, hi) = within;
    let mut extents: Vec<(u64, u64)> = order
        .iter()
        .map(|&i| {
            let r = &acks[i].record;
            let s = (r.offset / block * block).clamp(lo, hi);
            let e = (r.end().div_ceil(block) * block).clamp(lo, hi);
            (s, e)
        })
        .filter(|&(s, e)| s < e)
        .collect();
    extents.sort_unstable();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (s, e) in extents {
        match runs.last_mut() {
            Some(last) if s <= last.1 || reads_through(last.1, s) => last.1 = last.1.max(e),
            _ => runs.push((s, e)),
        }
    }
    runs
}

/// Whether the gap [from, to) between two records' blocks is read through.
fn reads_through(from: u64, to: u64) -> bool {
    let chunk = super::pipeline::CHUNK_BYTES;
    to - from <= COALESCE_GAP_BYTES && from % chunk != 0 && from / chunk == to / chunk
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

/// How verify reads a run's span, decided once its `acks` are counted (the first pass
/// over them): only its records' blocks when they are few for the region
/// ([`sparse_at_most`]), else all of it, and all of it with `scan_region` or when the
/// source could not bound its acks before the pass (`acks_at_most` None: a stream, whose
/// reads of the whole region were started before it; tests hold sparse reads to them).
/// A run judged whole and one judged in parts decide alike, from the same count.
pub fn reads_of_run(
    d: &RunDescriptor,
    acks_at_most: Option<u64>,
    acks: u64,
    scan_region: bool,
) -> Reads {
    let few = sparse_at_most(d, acks_at_most)
        || (acks_at_most.is_some() && sparse_at_most(d, Some(acks)));
    match !scan_region && few {
        true => Reads::Records,
        false => Reads::Span,
    }
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
