//! Checked invariants of the simulated drive.
//!
//! Why: the model and its oracle are the yardstick verify is measured against, so a bug
//! in them would pass for a bug in verify (or hide one). Like TigerBeetle's storage
//! simulator, every structure states what must hold between operations in a
//! `check_invariants(&self)` and the drive runs them after every operation, in every
//! build: each check reads a window of each structure (`Sweep`), so they stay cheap, and
//! a release-built simulated drive that breaks its own model must say so, not lie.

/// One broken invariant: which one (a stable name tests match on) and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{invariant}: {detail}")]
pub struct InvariantViolation {
    pub invariant: &'static str,
    pub detail: String,
}

/// `Ok` if `holds`, else the violation of `invariant` with the detail `detail` builds
/// (only built on failure, so a passing check costs no formatting).
pub(crate) fn ensure(
    holds: bool,
    invariant: &'static str,
    detail: impl FnOnce() -> String,
) -> Result<(), InvariantViolation> {
    if holds {
        Ok(())
    } else {
        Err(InvariantViolation {
            invariant,
            detail: detail(),
        })
    }
}

/// Runs `check` and panics on a violation, in every build (module docs).
#[inline(always)]
pub(crate) fn assert_holds(check: impl FnOnce() -> Result<(), InvariantViolation>) {
    if let Err(v) = check() {
        panic!("simulated drive invariant broken: {v}");
    }
}

/// How much of a structure one check reads.
///
/// Why windows: the cache and the oracle can hold thousands of entries (a lying drive
/// caches 512 writes; a soak cycle logs thousands of faults), and reading all of them
/// after every operation made debug runs of the soak fifteen times slower. After an
/// ordinary operation each check reads one window of each structure, the next operation
/// the next window, so a run of operations sweeps everything while each stays cheap;
/// session boundaries (start, power on, cut) and tests read everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// Every entry.
    Full,
    /// Window number `n`: at most [`WINDOW`] entries, continuing where window `n - 1`
    /// stopped, back to the first after the last.
    Window(usize),
}

/// Entries per structure one windowed check reads.
pub(crate) const WINDOW: usize = 8;

impl Sweep {
    /// The entries of `items` this sweep reads.
    pub(crate) fn over<I>(self, items: I) -> impl Iterator<Item = I::Item>
    where
        I: ExactSizeIterator,
    {
        let n = items.len();
        let (skip, take) = match self {
            // The windows tile the entries (the last one may be short), so none wraps;
            // `skip` is O(1) on slices.
            Sweep::Window(step) if n > WINDOW => (step % n.div_ceil(WINDOW) * WINDOW, WINDOW),
            _ => (0, n),
        };
        items.skip(skip).take(take)
    }

    pub(crate) fn is_full(self) -> bool {
        self == Sweep::Full
    }
}
