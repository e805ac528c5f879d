//! What verifying a tree holds in memory, checked against `--memory` before its acks are
//! loaded. Why a refusal and not parts, as a device run is judged: the tree's plan (every
//! file's path, size and arrival, drawn from the run's seed) is built whole, as the
//! writer built it, and judging a file needs every planned version of its path and the
//! latest acknowledged one. What the judge holds follows the plan's files and the run's
//! acks, both known before the acks are loaded (the descriptor, and a count that holds
//! none of them), so a tree that would not fit is refused with the `--memory` it needs
//! instead of being killed by the kernel half way through.

use crate::model::TreeSettings;
use crate::tree::plan::OVERWRITE_SHARE;
use crate::units::{fmt_bytes, thousands};

/// Bytes held per planned file or ack, whichever are more: its plan step (the path, some
/// 60 bytes, and the step), four maps from id or path to it, the ack with its file name,
/// its sector tally and the judge's counts. Measured: 550 bytes a file for a tree of
/// 204,000 files against one of 20,400 (`docs/tree.md`, "Memory").
pub const BYTES_PER_FILE: u64 = 640;
/// What does not grow with the tree: the binary, buffers, the report.
pub const FIXED_BYTES: u64 = 32 << 20;

/// The run's tree would not fit `--memory`.
#[derive(Debug, thiserror::Error)]
#[error(
    "verifying this tree of {} planned files ({} acknowledged) needs about {}, more than --memory {}: pass --memory {} (verify of a tree holds every planned file and ack at once, about {BYTES_PER_FILE} bytes a file). Nothing was read from the tree",
    thousands(*.planned), thousands(*.acks), fmt_bytes(*.need_bytes),
    fmt_bytes(*.memory_bytes), mib_that_fits(*.need_bytes)
)]
pub struct TooBig {
    pub planned: u64,
    pub acks: u64,
    pub need_bytes: u64,
    pub memory_bytes: u64,
}

/// Files the plan of `files` created files holds: overwrites come on top.
pub fn planned_files(files: u32) -> u64 {
    files as u64 + (files as f64 * OVERWRITE_SHARE).round() as u64
}

/// What verifying `planned` planned files and `acks` acks holds at its peak.
pub fn need_bytes(planned: u64, acks: u64) -> u64 {
    planned
        .max(acks)
        .saturating_mul(BYTES_PER_FILE)
        .saturating_add(FIXED_BYTES)
}

/// Refuses a tree run (its settings `tree`) of `acks` acks that would need more than
/// `memory_bytes`; a run that is not a tree passes (the tree judge refuses it for that).
pub fn check(tree: Option<&TreeSettings>, acks: u64, memory_bytes: u64) -> Result<(), TooBig> {
    let Some(ts) = tree else {
        return Ok(());
    };
    let planned = planned_files(ts.files);
    let need = need_bytes(planned, acks);
    if need <= memory_bytes {
        return Ok(());
    }
    Err(TooBig {
        planned,
        acks,
        need_bytes: need,
        memory_bytes,
    })
}

/// `--memory` spelled in whole MiB, at least `bytes`.
fn mib_that_fits(bytes: u64) -> String {
    format!("{}M", bytes.div_ceil(1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The untar shape's 53,000 files fit the default budget; ten million do not, and
    /// the refusal names a `--memory` that fits.
    #[test]
    fn the_check_follows_the_plan_and_the_acks() {
        let mut t = TreeSettings {
            plan_version: crate::tree::PLAN_VERSION,
            seed: 1,
            files: 53_000,
            total_bytes: 528_000_000,
            root: "plugpull-x".into(),
            flush: "fsync".into(),
        };
        let d = |t: &TreeSettings| Some(t.clone());
        assert!(check(d(&t).as_ref(), 53_000, 512 << 20).is_ok());
        t.files = 10_000_000;
        let e = check(d(&t).as_ref(), 0, 512 << 20).unwrap_err();
        assert_eq!(e.planned, 10_200_000);
        assert_eq!(e.need_bytes, 10_200_000 * BYTES_PER_FILE + FIXED_BYTES);
        let text = e.to_string();
        assert!(
            text.contains("10,200,000 planned files (0 acknowledged)"),
            "{text}"
        );
        let named: u64 = text
            .split("pass --memory ")
            .nth(1)
            .and_then(|t| t.split('M').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        let fits = |mib: u64| check(d(&t).as_ref(), 0, mib << 20).is_ok();
        assert!(fits(named) && !fits(named - 1));
        // More acks than the plan has files (no writer sends them) count as they are.
        t.files = 10;
        assert_eq!(
            check(d(&t).as_ref(), 2_000_000, 512 << 20)
                .unwrap_err()
                .need_bytes,
            2_000_000 * BYTES_PER_FILE + FIXED_BYTES
        );
        // Not a tree: the tree judge says so, not the budget.
        assert!(check(None, u64::MAX, 64 << 20).is_ok());
    }
}
