//! A two-way hand-off of record buffers between a stream's generator and its I/O thread,
//! with batched wake-ups. A plain channel wakes the other thread for every record, and at
//! several hundred thousand records per second the wake-ups cost more than the hashing
//! they were meant to hide; here the generator sleeps until half the buffers are free,
//! hands prepared buffers over a group at a time (one lock per group, not per record),
//! and wakes a waiting I/O thread only once the group it waits for is complete. The I/O
//! thread's end ([`IoEnd`]) likewise takes every ready buffer at once and returns used
//! ones a quarter of the ring at a time: with a lock round per record the two threads
//! met on the lock often enough that `perf` showed the futex waits and wakes of the
//! contended lock at several percent of the writer's time.

use crate::sync::{lock, wait};
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

pub struct Pipe<T> {
    state: Mutex<State<T>>,
    ready_cv: Condvar,
    free_cv: Condvar,
    wake_free_at: usize,
    /// Buffers in the ring.
    buffers: usize,
}

struct State<T> {
    ready: VecDeque<T>,
    free: Vec<T>,
    closed: bool,
    gen_waiting: bool,
    /// Items the sleeping I/O thread still needs (0: it does not sleep).
    io_want: usize,
}

impl<T> Pipe<T> {
    /// A pipe whose free list starts with `buffers`.
    pub fn new(buffers: Vec<T>) -> Pipe<T> {
        let wake_free_at = (buffers.len() / 2).max(1);
        Pipe {
            buffers: buffers.len(),
            state: Mutex::new(State {
                ready: VecDeque::new(),
                free: buffers,
                closed: false,
                gen_waiting: false,
                io_want: 0,
            }),
            ready_cv: Condvar::new(),
            free_cv: Condvar::new(),
            wake_free_at,
        }
    }

    /// Generator: moves every free buffer into `out` (empty) at once, waiting until
    /// enough are free. The two vectors swap, so neither side allocates. False when the
    /// pipe is closed.
    pub fn take_free_into(&self, out: &mut Vec<T>) -> bool {
        debug_assert!(out.is_empty());
        let mut g = lock(&self.state);
        while !g.closed && g.free.len() < self.wake_free_at {
            g.gen_waiting = true;
            g = wait(&self.free_cv, g);
        }
        g.gen_waiting = false;
        if g.closed {
            return false;
        }
        std::mem::swap(&mut g.free, out);
        true
    }

    /// Generator: hands over prepared items (drained from `items`) under one lock. Wakes
    /// the I/O thread once as many are ready as it waits for, or when `last` (the
    /// generator has nothing more before it waits for free buffers itself).
    pub fn put_ready_all(&self, items: &mut Vec<T>, last: bool) {
        let mut g = lock(&self.state);
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
        let mut g = lock(&self.state);
        let mut wake_gen = false;
        if !used.is_empty() {
            g.free.append(used);
            if g.gen_waiting && g.free.len() >= self.wake_free_at {
                g.gen_waiting = false;
                wake_gen = true;
            }
        }
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
            if std::mem::take(&mut wake_gen) {
                // Before sleeping: the generator must run to fill `ready`.
                self.free_cv.notify_one();
            }
            g.io_want = want - got;
            g = wait(&self.ready_cv, g);
        };
        // After unlocking, as in `put_ready_all`.
        drop(g);
        if wake_gen {
            self.free_cv.notify_one();
        }
        done
    }

    /// Ends the hand-off; both sides return at their next call.
    pub fn close(&self) {
        let mut g = lock(&self.state);
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
            return_at: (pipe.buffers / 4).max(1),
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
        // One at a time: `extend(drain(..n))` cost ~60 instructions a record in drain
        // drop guards for batches of one (callgrind).
        for _ in 0..n {
            out.extend(self.ready.pop_front());
        }
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
