//! What a replay holds in memory, checked against `--memory` before the log is replayed.
//!
//! Replay judges every durable point of the log incrementally, so it keeps each
//! acknowledged record's state (its ack, its sector tally, its place in two indexes)
//! from the first entry to the last, and one judged point per entry. What it holds
//! follows the run's acks and the log's entries, both known before the pass. A run that
//! fits is judged whole. One that does not is judged in parts of the region (`parts`):
//! each part holds only its own acks' state, at the cost of replaying the log once per
//! part. Refused with the `--memory` it needs, instead of being killed by the kernel
//! half way through: a run with drop states or `--full-verify` (they judge whole states
//! with a whole verify, so they are never judged in parts), and a run in parts whose
//! largest piece that no cut can separate (records overlapping one another), with the
//! log's points, does not fit.

use crate::units::{fmt_bytes, thousands};

/// Bytes held per ack of the run: the witness's ack (40), its copy in judging order
/// (40), its sector tally (40), four u32 indexes (16), and a little for the judgement's
/// class per ack. Why not less: every ack the log makes durable holds all of it, however
/// few entries the log has (a writeback write carries dozens of records, so the
/// per-entry bytes below do not make up for it); measured 136 to 140 bytes an ack.
pub const BYTES_PER_ACK: u64 = 144;
/// Per ack, with drop states: the durable point from which each is ackable (8), and its
/// place in the list of acks its write holds (8), which the bytes per entry do not
/// cover when a write holds many records.
pub const BYTES_PER_ACK_FOR_DROPS: u64 = 16;
/// Per log entry: a judged durable point (at most one per entry).
pub const BYTES_PER_ENTRY: u64 = 24;
/// Per log entry, with drop states: what is kept of each logged write to plan them.
pub const BYTES_PER_ENTRY_FOR_DROPS: u64 = 112;
/// Buffers that do not grow with the run: the log reader's, the scan's, the binary.
pub const FIXED_BYTES: u64 = 32 << 20;
/// Per ack, for each whole verify (a drop state's, or every point's with
/// `--full-verify`): the judged acks handed to it, and their copy in writer order.
pub const BYTES_PER_ACK_FOR_WHOLE_VERIFY: u64 = 80;

/// What a whole verify of `acks` acks holds besides them: what verify plans for itself
/// within its default budget (`verify::partition::plan`): its fixed buffers, its early
/// reads (128 MiB, filled at once from a scratch image in the page cache) and each live
/// record, or that budget when the run would not fit it (then verify judges in parts).
pub fn whole_verify_bytes(acks: u64) -> u64 {
    use crate::verify::partition::plan::{EARLY_READ_BYTES, FIXED_BYTES, LIVE_RECORD_BYTES};
    acks.saturating_mul(LIVE_RECORD_BYTES)
        .saturating_add(FIXED_BYTES + EARLY_READ_BYTES)
        .min(crate::verify::budget::DEFAULT_MEMORY_BYTES)
}

/// What a replay of `acks` acks over a log of `entries` entries holds at its peak, with
/// drop states and with a whole verify per durable point (`--full-verify`) if asked.
pub fn need_bytes(acks: u64, entries: u64, drops: bool, full_verify: bool) -> u64 {
    let mut per_ack = BYTES_PER_ACK;
    let mut per_entry = BYTES_PER_ENTRY;
    let mut fixed = FIXED_BYTES;
    if drops {
        per_ack += BYTES_PER_ACK_FOR_DROPS;
        per_entry += BYTES_PER_ENTRY_FOR_DROPS;
    }
    if drops || full_verify {
        per_ack += BYTES_PER_ACK_FOR_WHOLE_VERIFY;
        fixed = fixed.saturating_add(whole_verify_bytes(acks));
    }
    fixed
        .saturating_add(acks.saturating_mul(per_ack))
        .saturating_add(entries.saturating_mul(per_entry))
}

/// A replay that would not fit in `--memory`.
#[derive(Debug, thiserror::Error)]
#[error(
    "replaying {acks} acks over a log of {entries} entries{with} needs about {need}, more than --memory {budget}: pass --memory {ask} (drop states and --full-verify judge whole states with a whole verify, so such a run is not judged in parts of the region; without them it is)",
    acks = thousands(*.acks),
    entries = thousands(*.entries),
    with = match (*.drops, *.full_verify) {
        (true, true) => " with drop states and --full-verify",
        (true, false) => " with drop states",
        (false, true) => " with --full-verify",
        (false, false) => "",
    },
    need = fmt_bytes(*.need_bytes),
    budget = fmt_bytes(*.budget_bytes),
    ask = memory_arg(*.need_bytes),
)]
pub struct TooBig {
    pub acks: u64,
    pub entries: u64,
    pub drops: bool,
    pub full_verify: bool,
    pub need_bytes: u64,
    pub budget_bytes: u64,
}

/// A `--memory` value that covers `need` bytes: whole MiB, rounded up.
fn memory_arg(need: u64) -> String {
    format!("{}M", need.div_ceil(1 << 20))
}

/// Whether a replay of `acks` acks over `entries` log entries fits in `budget_bytes`.
pub fn check(
    acks: u64,
    entries: u64,
    drops: bool,
    full_verify: bool,
    budget_bytes: u64,
) -> Result<(), TooBig> {
    let need = need_bytes(acks, entries, drops, full_verify);
    if need <= budget_bytes {
        return Ok(());
    }
    Err(TooBig {
        acks,
        entries,
        drops,
        full_verify,
        need_bytes: need,
        budget_bytes,
    })
}

/// Per ack of a part, judged in parts: its state as judged whole, its index among the
/// witness's acks (8, to name the first never made durable), and its share of the
/// writes not yet durable (8).
pub const BYTES_PER_ACK_IN_PARTS: u64 = BYTES_PER_ACK + 16;
/// Judged in parts, besides [`FIXED_BYTES`]: the histogram the parts are cut from
/// (65,536 buckets of 16 bytes) and the losses named for the first disagreeing points.
pub const PARTS_FIXED_BYTES: u64 = 2 << 20;
/// Judged in parts, per write between two durable points (at most, over the log): the
/// byte range it changed, kept until the next point is judged (16), and its share of
/// the writes not yet durable (8).
pub const BYTES_PER_PENDING_WRITE: u64 = 24;

/// What a log holds that a replay in parts keeps for every part: counted in one pass
/// over the log before the parts (`parts::shape`), so a part is reckoned its log's
/// durable points, not an entry each as a whole replay is before it reads the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogShape {
    pub durable_points: u64,
    /// The most writes and discards between two durable points.
    pub pending_writes_at_most: u64,
}

/// What a part of `acks` acks holds at its peak over a log of `shape` (the merged
/// points, 24 bytes each, are held through every part).
pub fn part_need_bytes(acks: u64, shape: LogShape) -> u64 {
    (FIXED_BYTES + PARTS_FIXED_BYTES)
        .saturating_add(shape.durable_points.saturating_mul(BYTES_PER_ENTRY))
        .saturating_add(
            shape
                .pending_writes_at_most
                .saturating_mul(BYTES_PER_PENDING_WRITE),
        )
        .saturating_add(acks.saturating_mul(BYTES_PER_ACK_IN_PARTS))
}

/// The most acks a part may hold within `budget_bytes` over a log of `shape`.
pub fn part_room_acks(shape: LogShape, budget_bytes: u64) -> u64 {
    budget_bytes.saturating_sub(part_need_bytes(0, shape)) / BYTES_PER_ACK_IN_PARTS
}

/// A run judged in parts whose largest piece no cut can separate does not fit.
#[derive(Debug, thiserror::Error)]
#[error(
    "judging {total} acks in parts of the region: bytes {start}..{end} hold {acks} acks whose records overlap one another (or lie within one {bucket} bucket, the finest cut), so no part can hold fewer; with the log's {points} durable points that needs about {need}, more than --memory {budget}: pass --memory {ask}",
    total = thousands(*.total_acks),
    start = thousands(.range.0),
    end = if .range.1 == u64::MAX { "the end".to_string() } else { thousands(.range.1) },
    acks = thousands(*.acks),
    bucket = fmt_bytes(*.bucket_bytes),
    points = thousands(*.durable_points),
    need = fmt_bytes(*.need_bytes),
    budget = fmt_bytes(*.budget_bytes),
    ask = memory_arg(*.need_bytes),
)]
pub struct PieceTooBig {
    pub total_acks: u64,
    pub range: (u64, u64),
    pub acks: u64,
    pub bucket_bytes: u64,
    pub durable_points: u64,
    pub need_bytes: u64,
    pub budget_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_fits_until_its_acks_and_entries_pass_the_budget() {
        let budget = 512 << 20;
        assert!(check(1_000_000, 1_000_000, false, false, budget).is_ok());
        let e = check(4_000_000, 4_000_000, false, false, budget).unwrap_err();
        assert_eq!(e.need_bytes, need_bytes(4_000_000, 4_000_000, false, false));
        let text = e.to_string();
        assert!(text.contains("4,000,000 acks"), "{text}");
        assert!(text.contains("more than --memory 512.0 MiB"), "{text}");
        // The --memory it names is enough.
        let ask: u64 = text
            .split("pass --memory ")
            .nth(1)
            .and_then(|s| s.split('M').next())
            .and_then(|n| n.parse().ok())
            .expect("a --memory in whole MiB");
        assert!(check(4_000_000, 4_000_000, false, false, ask << 20).is_ok());
        assert!(check(4_000_000, 4_000_000, false, false, (ask - 1) << 20).is_err());
    }

    /// What each judged ack holds for the whole pass, whatever the log's entries: the
    /// per-ack figure must cover it alone.
    #[test]
    fn the_bytes_per_ack_cover_what_every_judged_ack_holds() {
        use std::mem::size_of;
        let held = 2 * size_of::<crate::model::Ack>()
            + size_of::<crate::verify::classify::SectorTally>()
            + 4 * size_of::<u32>();
        assert!(
            BYTES_PER_ACK >= held as u64,
            "{BYTES_PER_ACK} bytes an ack, each holds {held}"
        );
    }

    /// A drop state's verify and each of `--full-verify`'s hold, besides the judged acks,
    /// what verify plans for itself: its buffers and early reads (168 MiB) and each live
    /// record, up to its own default budget.
    #[test]
    fn whole_verifies_are_reckoned_as_verify_plans_them() {
        use crate::verify::partition::plan;
        let fixed = plan::FIXED_BYTES + plan::EARLY_READ_BYTES;
        for n in [10, 150_000, 1_000_000, 10_000_000] {
            let alone = need_bytes(n, n, false, false);
            let live = (fixed + n * plan::LIVE_RECORD_BYTES).min(512 << 20);
            for (drops, full) in [(true, false), (false, true), (true, true)] {
                let need = need_bytes(n, n, drops, full);
                assert!(need >= alone + live + n * 80, "{n} acks, {drops} {full}");
            }
            assert!(need_bytes(n, n, true, false) > need_bytes(n, n, false, true));
        }
        let text = check(10, 10, false, true, 1).unwrap_err().to_string();
        assert!(
            text.contains("10 entries with --full-verify needs"),
            "{text}"
        );
        let text = check(10, 10, true, true, 1).unwrap_err().to_string();
        assert!(
            text.contains("with drop states and --full-verify"),
            "{text}"
        );
    }

    #[test]
    fn drop_states_cost_more_and_counts_never_overflow() {
        assert!(need_bytes(10, 10, true, false) > need_bytes(10, 10, false, false));
        assert_eq!(need_bytes(u64::MAX, 1, false, false), u64::MAX);
        assert!(check(u64::MAX, u64::MAX, true, true, u64::MAX - 1).is_err());
    }
}
