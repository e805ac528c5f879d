//! What a replay holds in memory, checked against `--memory` before the log is replayed.
//!
//! Why a refusal and not parts, as verify does: replay judges every durable point of the
//! log incrementally, so it keeps each acknowledged record's state (its ack, its sector
//! tally, its place in two indexes) from the first entry to the last. Replaying the log
//! once per part of the region would cost the log's length per part. What the replay
//! holds follows the run's acks and the log's entries, both known before the pass, so a
//! run that would not fit is refused with the `--memory` it needs instead of being
//! killed by the kernel half way through.

use crate::units::{fmt_bytes, thousands};

/// Bytes held per ack of the run: the witness's ack (40), its copy in judging order
/// (40), its sector tally (40), four u32 indexes (16), and a little for the judgement's
/// class per ack. Why not less: every ack the log makes durable holds all of it however
/// few entries the log has (a writeback write carries dozens of records, so the bytes
/// per entry below do not make up for it); measured 136 to 140 bytes an ack.
pub const BYTES_PER_ACK: u64 = 144;
/// Per ack, with drop states: the durable point from which each is ackable, and the
/// whole verify of each drop state (the judged acks and the engine's own per-ack state).
pub const BYTES_PER_ACK_FOR_DROPS: u64 = 176;
/// Per log entry: a judged durable point (at most one per entry).
pub const BYTES_PER_ENTRY: u64 = 24;
/// Per log entry, with drop states: what is kept of each logged write to plan them.
pub const BYTES_PER_ENTRY_FOR_DROPS: u64 = 112;
/// Buffers that do not grow with the run: the log reader's, the scan's, the binary.
pub const FIXED_BYTES: u64 = 32 << 20;
/// With drop states: the read buffers of the whole verify that judges each; and its
/// early reads of the region (up to `verify::partition::plan::EARLY_READ_BYTES`), which
/// that verify holds when the run fits its own default budget, as a drop state's does.
pub const FIXED_BYTES_FOR_DROPS: u64 = 48 << 20;

/// What a replay of `acks` acks over a log of `entries` entries holds at its peak; with
/// drop states, of a run whose region is `region_bytes` long.
pub fn need_bytes(acks: u64, entries: u64, drops: bool, region_bytes: u64) -> u64 {
    let per_ack = BYTES_PER_ACK + if drops { BYTES_PER_ACK_FOR_DROPS } else { 0 };
    let per_entry = BYTES_PER_ENTRY + if drops { BYTES_PER_ENTRY_FOR_DROPS } else { 0 };
    let early_reads = region_bytes.min(crate::verify::partition::plan::EARLY_READ_BYTES);
    let fixed = FIXED_BYTES
        + if drops {
            FIXED_BYTES_FOR_DROPS + early_reads
        } else {
            0
        };
    fixed
        .saturating_add(acks.saturating_mul(per_ack))
        .saturating_add(entries.saturating_mul(per_entry))
}

/// A replay that would not fit in `--memory`.
#[derive(Debug, thiserror::Error)]
#[error(
    "replaying {acks} acks over a log of {entries} entries{with_drops} needs about {need}, more than --memory {budget}: pass --memory {ask} (replay keeps every acknowledged record's state for the whole log; it does not judge in parts as verify does)",
    acks = thousands(*.acks),
    entries = thousands(*.entries),
    with_drops = if *.drops { " with drop states" } else { "" },
    need = fmt_bytes(*.need_bytes),
    budget = fmt_bytes(*.budget_bytes),
    ask = memory_arg(*.need_bytes),
)]
pub struct TooBig {
    pub acks: u64,
    pub entries: u64,
    pub drops: bool,
    pub need_bytes: u64,
    pub budget_bytes: u64,
}

/// A `--memory` value that covers `need` bytes: whole MiB, rounded up.
fn memory_arg(need: u64) -> String {
    format!("{}M", need.div_ceil(1 << 20))
}

/// Whether a replay of `acks` acks over `entries` log entries (with drop states, of a
/// run whose region is `region_bytes` long) fits in `budget_bytes`.
pub fn check(
    acks: u64,
    entries: u64,
    drops: bool,
    region_bytes: u64,
    budget_bytes: u64,
) -> Result<(), TooBig> {
    let need = need_bytes(acks, entries, drops, region_bytes);
    if need <= budget_bytes {
        return Ok(());
    }
    Err(TooBig {
        acks,
        entries,
        drops,
        need_bytes: need,
        budget_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_fits_until_its_acks_and_entries_pass_the_budget() {
        let budget = 512 << 20;
        assert!(check(1_000_000, 1_000_000, false, 0, budget).is_ok());
        let e = check(4_000_000, 4_000_000, false, 0, budget).unwrap_err();
        assert_eq!(e.need_bytes, need_bytes(4_000_000, 4_000_000, false, 0));
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
        assert!(check(4_000_000, 4_000_000, false, 0, ask << 20).is_ok());
        assert!(check(4_000_000, 4_000_000, false, 0, (ask - 1) << 20).is_err());
    }

    /// What each judged ack holds for the whole pass, whatever the log's entries: the
    /// figure per ack must cover it alone.
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

    #[test]
    fn drop_states_cost_more_and_counts_never_overflow() {
        assert!(need_bytes(10, 10, true, 0) > need_bytes(10, 10, false, 0));
        // The drop states' verify reads the region early, up to its bound.
        let small = need_bytes(10, 10, true, 1 << 20);
        assert_eq!(need_bytes(10, 10, true, 2 << 20), small + (1 << 20));
        assert_eq!(
            need_bytes(10, 10, true, u64::MAX),
            need_bytes(10, 10, true, 1 << 40)
        );
        assert_eq!(
            need_bytes(10, 10, false, 1 << 40),
            need_bytes(10, 10, false, 0)
        );
        assert_eq!(need_bytes(u64::MAX, 1, false, 0), u64::MAX);
        assert!(check(u64::MAX, u64::MAX, true, u64::MAX, u64::MAX - 1).is_err());
    }
}
