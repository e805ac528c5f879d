//! How long a stream's generator may sleep before enough record buffers are free again,
//! so that it wakes by its own timer instead of being woken by the I/O thread. Why: the
//! generator is about twice as fast as the I/O thread on a fast target, so it sleeps
//! once per half ring; woken by the I/O thread, each of those sleeps cost the I/O thread
//! a futex wake (an inter-processor interrupt, expensive in a VM) and often a switch to
//! the woken generator on its own core, ~0.15 µs per record of its ~2.5 at 370k
//! records/s (docs/performance.md, Session 8). A timer wakes the generator on its own
//! core instead; the I/O thread wakes it only when it is about to run out of records.

use std::time::{Duration, Instant};

/// Naps shorter than this are not worth a timer (the generator polls instead).
pub const MIN_NAP: Duration = Duration::from_micros(5);
/// The longest nap: with a slow target (a disk flushing in milliseconds) the generator
/// looks again this often; the I/O thread wakes it at once if it runs short meanwhile.
pub const MAX_NAP: Duration = Duration::from_millis(20);

/// Timer slack of the generator thread, in ns. Linux lets a sleeping thread's timer fire
/// up to its slack late (50 µs by default), as long as a half-ring nap at several hundred
/// thousand records per second: the generator would wake late, and the I/O thread, short
/// of records, would wake it after all.
const TIMER_SLACK_NS: u64 = 2_000;

/// Makes the calling thread's timed sleeps end within [`TIMER_SLACK_NS`] of their time.
/// Best effort: without it the naps are only longer.
pub fn tighten_timer_slack() {
    let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS as _);
}

/// The I/O end's speed as the generator sees it: items used per unit of time, measured
/// over at least `span` items so that one preempted record does not set the pace.
pub struct Pace {
    span: u64,
    /// When the I/O end had used how many items, at the start of the current span.
    mark: Option<(Instant, u64)>,
    ns_per_item: Option<u64>,
}

impl Pace {
    /// A pace measured over spans of at least `span` items (at least 1).
    pub fn new(span: u64) -> Pace {
        Pace {
            span: span.max(1),
            mark: None,
            ns_per_item: None,
        }
    }

    /// Notes that the I/O end had used `used` items in all at `now`.
    pub fn observe(&mut self, now: Instant, used: u64) {
        match self.mark {
            Some((t, u)) if used >= u + self.span => {
                let ns = now.saturating_duration_since(t).as_nanos() as u64;
                self.ns_per_item = Some(ns / (used - u));
                self.mark = Some((now, used));
            }
            // A pipe that was reset (fewer used than marked) starts a new span.
            Some((_, u)) if used < u => self.mark = Some((now, used)),
            Some(_) => {}
            None => self.mark = Some((now, used)),
        }
    }

    /// How long the I/O end takes to use `items` more, within [`MIN_NAP`, `MAX_NAP`];
    /// `None` before the first span was measured (the generator must then be woken).
    pub fn nap(&self, items: usize) -> Option<Duration> {
        let ns = self.ns_per_item?.saturating_mul(items as u64);
        Some(Duration::from_nanos(ns).clamp(MIN_NAP, MAX_NAP))
    }
}

/// Items the I/O end must still use before `free` reaches `take_at`, when it hands used
/// items back `return_at` at a time and holds `held` used ones now (it returns them once
/// it holds `return_at`).
pub fn items_until_free(free: usize, held: usize, take_at: usize, return_at: usize) -> usize {
    if free >= take_at {
        return 0;
    }
    let return_at = return_at.max(1);
    let returns = (take_at - free).div_ceil(return_at);
    return_at.saturating_sub(held) + (returns - 1) * return_at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_is_measured_over_a_whole_span() {
        let t0 = Instant::now();
        let at = |us| t0 + Duration::from_micros(us);
        let mut p = Pace::new(10);
        assert_eq!(p.nap(4), None, "no estimate before a span");
        p.observe(at(0), 100);
        p.observe(at(5), 105);
        assert_eq!(p.nap(4), None, "half a span is not a measurement");
        // 20 items in 50 µs: 2.5 µs each.
        p.observe(at(50), 120);
        assert_eq!(p.nap(4), Some(Duration::from_micros(10)));
        // The next span starts at the last mark: 10 items in 100 µs.
        p.observe(at(150), 130);
        assert_eq!(p.nap(4), Some(Duration::from_micros(40)));
        assert_eq!(p.nap(0), Some(MIN_NAP));
        assert_eq!(p.nap(1 << 30), Some(MAX_NAP));
        // Counting restarts lower: a new span, the old estimate kept meanwhile.
        p.observe(at(160), 3);
        p.observe(at(170), 12);
        assert_eq!(p.nap(4), Some(Duration::from_micros(40)));
        p.observe(at(180), 13);
        assert_eq!(p.nap(10), Some(Duration::from_micros(20)));
        assert_eq!(p.nap(1), Some(MIN_NAP));
    }

    #[test]
    fn items_until_free_counts_whole_returns() {
        // Ring of 64: take at 32 free, returns of 16.
        assert_eq!(items_until_free(32, 5, 32, 16), 0);
        assert_eq!(items_until_free(40, 0, 32, 16), 0);
        // One return missing: the rest of the held chunk.
        assert_eq!(items_until_free(16, 0, 32, 16), 16);
        assert_eq!(items_until_free(16, 15, 32, 16), 1);
        assert_eq!(items_until_free(20, 15, 32, 16), 1);
        // Two returns missing: the rest of this chunk and a whole next one.
        assert_eq!(items_until_free(0, 4, 32, 16), 12 + 16);
        assert_eq!(items_until_free(0, 0, 32, 16), 32);
        // Held past the return point (returned at the next batch).
        assert_eq!(items_until_free(0, 20, 32, 16), 16);
        assert_eq!(items_until_free(0, 0, 1, 0), 1);
    }
}
