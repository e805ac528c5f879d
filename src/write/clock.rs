//! The I/O thread's clock reads: two a batch (a write time, a flush time), none for the
//! run's duration. Why not `model::now_ns` and `Instant::elapsed`: std's `SystemTime`
//! arithmetic (a checked timespec subtraction, a 128-bit product) took about 150 of the
//! I/O thread's ~1,050 instructions per record (callgrind), and the monotonic read for
//! `--duration` was a third clock read per batch (callgrind of the writer).

use std::time::{Duration, Instant};

/// Nanoseconds since the Unix epoch, writer clock: the value `model::now_ns` gives (0 if
/// the clock is before 1970), in fewer instructions.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call, and
    // CLOCK_REALTIME is a clock every Linux has, so the call only writes `ts`.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if r != 0 || ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// The end of `--duration`, checked against the flush times the I/O thread reads anyway.
/// The monotonic clock decides; it is read only when the wall clock says the time is up
/// or went backwards (a step of the wall clock can then neither end a run early nor
/// make it run on).
pub struct Deadline {
    t0: Instant,
    duration: Duration,
    /// The wall-clock time (ns) at which the run is expected to end.
    at_ns: u64,
    /// The last wall-clock time checked.
    last_ns: u64,
}

impl Deadline {
    /// A run of `duration` that started at `t0` (monotonic), which was `now_ns` on the
    /// wall clock a moment ago.
    pub fn new(t0: Instant, duration: Duration, now_ns: u64) -> Deadline {
        let mut d = Deadline {
            t0,
            duration,
            at_ns: 0,
            last_ns: now_ns,
        };
        d.rearm(now_ns);
        d
    }

    /// True once `duration` has passed since `t0`; `now_ns` is the wall clock now.
    pub fn passed(&mut self, now_ns: u64) -> bool {
        if now_ns >= self.at_ns || now_ns < self.last_ns {
            if self.t0.elapsed() >= self.duration {
                return true;
            }
            self.rearm(now_ns);
        }
        self.last_ns = now_ns;
        false
    }

    /// Expects the end after what is left on the monotonic clock, from `now_ns`.
    fn rearm(&mut self, now_ns: u64) {
        let left = self.duration.saturating_sub(self.t0.elapsed());
        self.at_ns = now_ns.saturating_add(left.as_nanos().min(u64::MAX as u128) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_ns_is_model_now_ns() {
        let a = crate::model::now_ns();
        let b = realtime_ns();
        let c = crate::model::now_ns();
        assert!(a <= b && b <= c, "{a} {b} {c}");
        assert!(
            b > 1_700_000_000_000_000_000,
            "a 2023-or-later time, not {b}"
        );
    }

    #[test]
    fn deadline_follows_the_monotonic_clock_whatever_the_wall_clock_does() {
        let wall = 1_000_000_000_000u64;
        // Not yet: the wall clock has not reached the expected end.
        let mut d = Deadline::new(Instant::now(), Duration::from_secs(3600), wall);
        assert!(!d.passed(wall + 1_000));
        // A wall clock stepped an hour forward does not end the run...
        assert!(!d.passed(wall + 7_200 * 1_000_000_000));
        // ... nor one stepped back, and the expected end moves with it.
        assert!(!d.passed(wall - 1_000_000_000));
        assert!(!d.passed(wall));
        // A short run ends once its time has passed, whatever the wall clock says.
        let mut d = Deadline::new(Instant::now(), Duration::from_millis(20), wall);
        assert!(!d.passed(wall));
        std::thread::sleep(Duration::from_millis(30));
        // The wall clock stepped back: the monotonic clock still ends the run.
        assert!(d.passed(wall - 1_000_000_000));
        let mut d = Deadline::new(Instant::now(), Duration::from_millis(20), wall);
        std::thread::sleep(Duration::from_millis(30));
        assert!(d.passed(wall + 30_000_000));
        // A run whose time has passed while the wall clock stood still: ends only once
        // the wall clock reaches the expected end (it always moves on in a real run).
        let mut d = Deadline::new(Instant::now(), Duration::from_millis(20), wall);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!d.passed(wall + 1));
        assert!(d.passed(wall + 20_000_000));
    }
}
