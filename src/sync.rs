//! Locks that outlive a panicking holder.
//!
//! Why not `lock().unwrap()`: one panicking thread would poison the lock and every other
//! thread would then panic on it too, a cascade of PoisonErrors in place of the one
//! failure that matters, and the writer or witness would stop without saying what it
//! had done. Every lock taken through here guards data that its holders change in steps
//! that each leave it consistent (an assignment, an append, a move of whole buffers),
//! and the panic itself is reported where the thread started, so the survivors may go
//! on with what the panicking holder left.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Locks `m`, taking the data as a panicking holder left it (module docs).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits on `cv` with `guard`, as [`lock`] does if a holder panicked meanwhile.
pub fn wait<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    cv.wait(guard).unwrap_or_else(|p| p.into_inner())
}

/// [`wait`] for at most `timeout` (a spurious or timed-out wake-up returns the guard
/// all the same: callers check their condition again).
pub fn wait_timeout<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    cv.wait_timeout(guard, timeout)
        .unwrap_or_else(|p| p.into_inner())
        .0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A holder that panicked leaves the lock usable, with what it wrote.
    #[test]
    fn a_lock_a_thread_panicked_with_still_gives_its_data() {
        let m = Mutex::new(1);
        let _ = std::thread::scope(|s| {
            s.spawn(|| {
                let mut g = m.lock().unwrap();
                *g = 2;
                panic!("holder dies");
            })
            .join()
        });
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), 2);
    }
}
