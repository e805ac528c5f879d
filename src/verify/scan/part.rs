//! One part of a run judged in parts (`verify::partition`): the scan reads and judges
//! only the part's own bytes, and exactly the whole run's reads among them.
//!
//! Why: a part's report must add up, with the others', to the whole run's. Each byte of
//! the whole run's span belongs to one part, so each is read once (a bad sector is
//! listed once), and the reads among a part's bytes are the whole run's there: the same
//! chunks on the device's grid (`pipeline::chunks_of`), the same gaps read through
//! (`sparse::record_runs`), so a misdirected copy, a failed or a hung read shows up in
//! the parts exactly where it shows up in the whole run. A record across a part's edge
//! gets a tally from each part it touches, of its sectors there; the tallies add up.

use super::pipeline::{block_of, dev_end};
use super::sparse::Reads;
use crate::device::Device;

/// The bytes one part judges.
#[derive(Clone, Copy, Debug)]
pub struct Part {
    /// The part's own bytes, [start, end): it judges no sector outside them.
    pub owned: (u64, u64),
    /// The whole run's span ([`whole_span`]): the part reads its share of it.
    pub span: (u64, u64),
    /// How the whole run reads its span: all of it, or only the records' blocks.
    pub reads: Reads,
    /// A read of an earlier part hung: none of this part is read (another hang would
    /// cost the timeout again); its sectors are unreadable, as after a hang in the whole
    /// run.
    pub hung: bool,
}

/// The span a whole scan reads for records over `records` (their lowest offset and
/// highest end) and `also`: whole blocks of `dev`, `also` cut at the device's end.
pub fn whole_span(dev: &dyn Device, records: (u64, u64), also: Option<(u64, u64)>) -> (u64, u64) {
    let block = block_of(dev);
    let rec = (records.0 / block * block, records.1.div_ceil(block) * block);
    match also {
        Some((s, e)) => (
            rec.0.min(s / block * block),
            rec.1
                .max((e.div_ceil(block) * block).min(dev_end(dev, block))),
        ),
        None => rec,
    }
}

/// Where the device's readable blocks end, if before `end`.
pub fn readable_end(dev: &dyn Device, end: u64) -> u64 {
    end.min(dev_end(dev, block_of(dev)))
}

/// The unreadable ranges as a report lists them: in offset order, touching ranges of the
/// same reason joined. Why: a whole run and its parts then list the same ranges (a part
/// ends where the next begins, so one range beyond the device's end or after a hang
/// comes as a piece from each).
pub fn tidy_unreadable(ranges: &mut Vec<(u64, u64, String)>) {
    ranges.sort_by_key(|r| r.0);
    let mut out: Vec<(u64, u64, String)> = Vec::with_capacity(ranges.len());
    for r in ranges.drain(..) {
        match out.last_mut() {
            Some(last) if last.0 + last.1 == r.0 && last.2 == r.2 => last.1 += r.1,
            _ => out.push(r),
        }
    }
    *ranges = out;
}
