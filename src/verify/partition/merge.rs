//! The acks of several work-file segments, each in ack order, as one stream in ack
//! order; an ack in two of them (one near a part's edge) comes once.

use super::workfile::{Entry, Reader};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct Merged {
    readers: Vec<Reader>,
    /// The next entry of each reader not yet given, by ack number.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Vec<Option<Entry>>,
    last: Option<u64>,
}

impl Merged {
    pub fn new(readers: Vec<Reader>) -> std::io::Result<Merged> {
        let n = readers.len();
        let mut m = Merged {
            readers,
            heads: BinaryHeap::with_capacity(n),
            pending: (0..n).map(|_| None).collect(),
            last: None,
        };
        for i in 0..n {
            m.refill(i)?;
        }
        Ok(m)
    }

    fn refill(&mut self, i: usize) -> std::io::Result<()> {
        if self.pending[i].is_none()
            && let Some(e) = self.readers[i].next_entry()?
        {
            self.heads.push(Reverse((e.0, i)));
            self.pending[i] = Some(e);
        }
        Ok(())
    }

    /// The next ack in ack order, None after the last.
    pub fn next_entry(&mut self) -> std::io::Result<Option<Entry>> {
        loop {
            let Some(Reverse((idx, i))) = self.heads.pop() else {
                return Ok(None);
            };
            let e = self.pending[i].take().expect("a head has its entry");
            self.refill(i)?;
            if self.last == Some(idx) {
                continue;
            }
            self.last = Some(idx);
            return Ok(Some(e));
        }
    }
}
