//! A two-way hand-off of record buffers between a stream's generator and its I/O thread,
//! with batched wake-ups. A plain channel wakes the other thread for every record, and at
//! several hundred thousand records per second the wake-ups cost more than the hashing
//! they were meant to hide; here the generator waits until half the buffers are free,
//! hands prepared buffers over a group at a time (one lock per group, not per record),
//! and wakes a waiting I/O thread only once the group it waits for is complete. The I/O
//! thread's end ([`IoEnd`]) likewise takes every ready buffer at once and returns used
//! ones a quarter of the ring at a time: with a lock round per record the two threads
//! met on the lock often enough that `perf` showed the futex waits and wakes of the
//! contended lock at several percent of the writer's time.
//!
//! The generator's wait for free buffers is timed ([`super::pace`]): it sleeps about as
//! long as the I/O end takes to free half the ring and wakes by its own timer, so the I/O
//! thread, which sets the writer's pace, makes no futex call to wake it unless it is
//! about to run out of prepared records.

use super::pace::{Pace, items_until_free};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

pub struct Pipe<T> {
    state: Mutex<State<T>>,
    ready_cv: Condvar,
    free_cv: Condvar,
    /// Free items the generator waits for before it takes them (half the ring).
    take_at: usize,
    /// Used items the I/O end collects before it hands them back (a quarter of the ring).
    return_at: usize,
    /// Used items the I/O end holds, stored per batch and read by the generator when it
    /// times its wait. On a cache line of its own: next to the lock, every store would
    /// miss after each of the generator's lock rounds.
    io_held: Padded,
    /// Buffers in the ring.
    buffers: usize,
}

#[repr(align(128))]
struct Padded(AtomicUsize);

struct State<T> {
    ready: VecDeque<T>,
    free: Vec<T>,
    closed: bool,
    gen_wait: GenWait,
    /// Items the sleeping I/O thread still needs (0: it does not sleep).
    io_want: usize,
    /// Used items the I/O end has handed back in all.
    returned: u64,
    /// The I/O end's speed, as the generator measures it.
    pace: Pace,
}

/// How the generator waits for free buffers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GenWait {
    No,
    /// With a timeout: it wakes by itself when the buffers should be free.
    Timed,
    /// Until woken (the I/O end's pace is not known yet).
    Untimed,
}

impl<T> Pipe<T> {
    /// A pipe whose free list starts with `buffers`.
    pub fn new(buffers: Vec<T>) -> Pipe<T> {
        let n = buffers.len();
        Pipe {
            buffers: n,
            state: Mutex::new(State {
                ready: VecDeque::new(),
                free: buffers,
                closed: false,
                gen_wait: GenWait::No,
                io_want: 0,
                returned: 0,
                pace: Pace::new(n as u64),
            }),
            ready_cv: Condvar::new(),
            free_cv: Condvar::new(),
            take_at: (n / 2).max(1),
            return_at: (n / 4).max(1),
            io_held: Padded(AtomicUsize::new(0)),
        }
    }

    /// Generator: moves every free buffer into `out` (empty) at once, waiting until
    /// enough are free: by a timed sleep once the I/O end's pace is known, so it is not
    /// woken by the I/O thread. The two vectors swap, so neither side allocates. False
    /// when the pipe is closed.
    pub fn take_free_into(&self, out: &mut Vec<T>) -> bool {
        debug_assert!(out.is_empty());
        let mut g = self.state.lock().unwrap();
        loop {
            if g.closed {
                g.gen_wait = GenWait::No;
                return false;
            }
            let held = self.io_held.0.load(Relaxed);
            let used = g.returned + held as u64;
            g.pace.observe(Instant::now(), used);
            if g.free.len() >= self.take_at {
                break;
            }
            let items = items_until_free(g.free.len(), held, self.take_at, self.return_at);
            g = match g.pace.nap(items) {
                Some(nap) => {
                    g.gen_wait = GenWait::Timed;
                    self.free_cv.wait_timeout(g, nap).unwrap().0
                }
                None => {
                    g.gen_wait = GenWait::Untimed;
                    self.free_cv.wait(g).unwrap()
                }
            };
        }
        g.gen_wait = GenWait::No;
        std::mem::swap(&mut g.free, out);
        true
    }

    /// Generator: hands over prepared items (drained from `items`) under one lock. Wakes
    /// the I/O thread once as many are ready as it waits for, or when `last` (the
    /// generator has nothing more before it waits for free buffers itself).
    pub fn put_ready_all(&self, items: &mut Vec<T>, last: bool) {
        let mut g = self.state.lock().unwrap();
        g.ready.extend(items.drain(..));
        if g.io_want > 0 && (last || g.ready.len() >= g.io_want) {
            g.io_want = 0;
            // After unlocking: woken under the lock, the other thread would block on
            // the lock at once (a second futex wait and wake).
            drop(g);
            self.ready_cv.notify_one();
        }
    }

    /// I/O thread: returns `used` (drained) to the free list, then moves every ready
    /// item to the back of `ready`, waiting until at least `want` were moved, all under
    /// one lock. False once closed.
    fn exchange(&self, want: usize, used: &mut Vec<T>, ready: &mut VecDeque<T>) -> bool {
        let mut g = self.state.lock().unwrap();
        g.returned += used.len() as u64;
        g.free.append(used);
        let mut got = 0;
        let done = loop {
            if g.closed {
                break false;
            }
            got += g.ready.len();
            ready.extend(g.ready.drain(..));
            if got >= want {
                break true;
            }
            if g.gen_wait != GenWait::No {
                // Before sleeping: the generator must run to fill `ready` (it finds at
                // least half the ring free: what the I/O end lacks is free).
                g.gen_wait = GenWait::No;
                self.free_cv.notify_one();
            }
            g.io_want = want - got;
            g = self.ready_cv.wait(g).unwrap();
        };
        let wake_gen = g.free.len() >= self.take_at
            && match g.gen_wait {
                GenWait::No => false,
                GenWait::Untimed => true,
                // Its timer is late (or the I/O end sped up): wake it before the I/O end
                // runs dry, which it would before its next return of used items.
                GenWait::Timed => ready.len() < self.return_at,
            };
        if wake_gen {
            g.gen_wait = GenWait::No;
        }
        // After unlocking, as in `put_ready_all`.
        drop(g);
        if wake_gen {
            self.free_cv.notify_one();
        }
        done
    }

    /// Ends the hand-off; both sides return at their next call.
    pub fn close(&self) {
        let mut g = self.state.lock().unwrap();
        g.closed = true;
        self.free_cv.notify_all();
        self.ready_cv.notify_all();
    }
}

/// The I/O thread's end of a [`Pipe`]: it keeps the prepared items it took and the used
/// ones it has not returned yet, and locks the pipe only when it runs short of prepared
/// items or holds a quarter of the ring used.
pub struct IoEnd<'a, T> {
    pipe: &'a Pipe<T>,
    ready: VecDeque<T>,
    used: Vec<T>,
    return_at: usize,
}

impl<'a, T> IoEnd<'a, T> {
    pub fn new(pipe: &'a Pipe<T>) -> IoEnd<'a, T> {
        IoEnd {
            pipe,
            ready: VecDeque::with_capacity(pipe.buffers),
            used: Vec::with_capacity(pipe.buffers),
            return_at: pipe.return_at,
        }
    }

    /// Takes back the used items in `out` and fills it with the next `n` prepared items
    /// (n at most half the ring), waiting only when fewer are ready. False once the pipe
    /// is closed.
    pub fn next_batch(&mut self, n: usize, out: &mut Vec<T>) -> bool {
        self.used.append(out);
        if (self.ready.len() < n || self.used.len() >= self.return_at)
            && !self.pipe.exchange(
                n.saturating_sub(self.ready.len()),
                &mut self.used,
                &mut self.ready,
            )
        {
            return false;
        }
        // One at a time: `extend(drain(..n))` cost ~60 instructions a record in drop
        // guards for batches of one (callgrind).
        for _ in 0..n {
            out.extend(self.ready.pop_front());
        }
        // The batch in `out` is used once written: count it as held.
        self.pipe.io_held.0.store(self.used.len() + n, Relaxed);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn items_flow_in_order_and_close_releases_both_sides() {
        let p = Pipe::new((0..8).map(|_| 0u64).collect());
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut n = 0;
                let mut bufs = Vec::new();
                let mut group = Vec::new();
                while p.take_free_into(&mut bufs) {
                    let k = bufs.len();
                    for (i, _) in bufs.drain(..).enumerate() {
                        n += 1;
                        group.push(n);
                        if group.len() == 3 || i + 1 == k {
                            p.put_ready_all(&mut group, i + 1 == k);
                        }
                    }
                }
            });
            let mut io = IoEnd::new(&p);
            let mut got = Vec::new();
            let mut want = 0u64;
            // Batches of 1, 2, 3 and 4 (at most half the buffers, as the engine takes).
            for i in 0..400 {
                assert!(io.next_batch(i % 4 + 1, &mut got));
                assert_eq!(got.len(), i % 4 + 1);
                for &x in &got {
                    want += 1;
                    assert_eq!(x, want);
                }
            }
            p.close();
        });
        let mut got = Vec::new();
        assert!(!IoEnd::new(&p).next_batch(1, &mut got));
    }
}
