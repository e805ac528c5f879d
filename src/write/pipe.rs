//! A two-way hand-off of record buffers between a stream's generator and its I/O thread,
//! with batched wake-ups. A plain channel wakes the other thread for every record, and at
//! several hundred thousand records per second the wake-ups cost more than the hashing
//! they were meant to hide; here the generator sleeps until half the buffers are free.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

pub struct Pipe<T> {
    state: Mutex<State<T>>,
    ready_cv: Condvar,
    free_cv: Condvar,
    wake_free_at: usize,
}

struct State<T> {
    ready: VecDeque<T>,
    free: Vec<T>,
    closed: bool,
    gen_waiting: bool,
    io_waiting: bool,
}

impl<T> Pipe<T> {
    /// A pipe whose free list starts with `buffers`.
    pub fn new(buffers: Vec<T>) -> Pipe<T> {
        let wake_free_at = (buffers.len() / 2).max(1);
        Pipe {
            state: Mutex::new(State {
                ready: VecDeque::new(),
                free: buffers,
                closed: false,
                gen_waiting: false,
                io_waiting: false,
            }),
            ready_cv: Condvar::new(),
            free_cv: Condvar::new(),
            wake_free_at,
        }
    }

    /// Generator: takes every free buffer at once, waiting until enough are free.
    /// Empty when the pipe is closed.
    pub fn take_free(&self) -> Vec<T> {
        let mut g = self.state.lock().unwrap();
        while !g.closed && g.free.len() < self.wake_free_at {
            g.gen_waiting = true;
            g = self.free_cv.wait(g).unwrap();
        }
        g.gen_waiting = false;
        if g.closed {
            Vec::new()
        } else {
            std::mem::take(&mut g.free)
        }
    }

    /// Generator: hands over one prepared item.
    pub fn put_ready(&self, item: T) {
        let mut g = self.state.lock().unwrap();
        g.ready.push_back(item);
        if g.io_waiting {
            g.io_waiting = false;
            self.ready_cv.notify_one();
        }
    }

    /// I/O thread: fills `out` (emptied first) with the next `n` prepared items, taking
    /// whatever is ready under one lock and waiting only when nothing is. False once
    /// closed.
    pub fn take_ready_into(&self, n: usize, out: &mut Vec<T>) -> bool {
        out.clear();
        let mut g = self.state.lock().unwrap();
        while out.len() < n {
            if g.closed {
                return false;
            }
            if g.ready.is_empty() {
                g.io_waiting = true;
                g = self.ready_cv.wait(g).unwrap();
                continue;
            }
            let k = (n - out.len()).min(g.ready.len());
            out.extend(g.ready.drain(..k));
        }
        true
    }

    /// I/O thread: returns used buffers (drained from `items`) under one lock.
    pub fn put_free_all(&self, items: &mut Vec<T>) {
        let mut g = self.state.lock().unwrap();
        g.free.append(items);
        if g.gen_waiting && g.free.len() >= self.wake_free_at {
            g.gen_waiting = false;
            self.free_cv.notify_one();
        }
    }

    /// Ends the hand-off; both sides return at their next call.
    pub fn close(&self) {
        let mut g = self.state.lock().unwrap();
        g.closed = true;
        self.free_cv.notify_all();
        self.ready_cv.notify_all();
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
                loop {
                    let bufs = p.take_free();
                    if bufs.is_empty() {
                        return;
                    }
                    for _ in bufs {
                        n += 1;
                        p.put_ready(n);
                    }
                }
            });
            let mut got = Vec::new();
            let mut want = 0u64;
            // Batches of 1, 2, 3 and 4 (at most half the buffers, as the engine takes).
            for i in 0..400 {
                assert!(p.take_ready_into(i % 4 + 1, &mut got));
                assert_eq!(got.len(), i % 4 + 1);
                for &x in &got {
                    want += 1;
                    assert_eq!(x, want);
                }
                p.put_free_all(&mut got);
                assert!(got.is_empty());
            }
            p.close();
        });
        let mut got = Vec::new();
        assert!(!p.take_ready_into(1, &mut got));
    }
}
