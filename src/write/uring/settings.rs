//! How deep a stream writes and when it flushes (`write --iodepth`, `--flush-every`,
//! `--flush-within`). Why its own file: the engine's root and its stream loop both use
//! it, and neither may import the other.

use crate::device::FlushMethod;
use std::time::Duration;

/// The largest `--iodepth`.
pub const MAX_IODEPTH: u32 = 1024;

/// How deep each stream writes and when it flushes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthSettings {
    /// Writes in flight per stream (2..=[`MAX_IODEPTH`]; 1 is the synchronous loop).
    pub iodepth: u32,
    /// A flush is submitted once this many writes completed since the last one was
    /// submitted (`--flush-every`, default: the depth)...
    pub flush_every: u32,
    /// ...or this long after the first of them completed, whichever comes first
    /// (`--flush-within`).
    pub flush_within: Duration,
}

impl DepthSettings {
    /// The most records one stream has submitted and not acknowledged: the depth in
    /// flight plus the completed writes the next flush will cover. A stream submits no
    /// more beyond it, which bounds what a cut can leave past the last ack (the run
    /// descriptor's `max_records_unacked`).
    pub fn window(&self, flush: FlushMethod) -> usize {
        match flush {
            FlushMethod::Fdatasync | FlushMethod::Fsync => {
                self.iodepth as usize + self.flush_every as usize
            }
            FlushMethod::Dsync | FlushMethod::None => self.iodepth as usize,
        }
    }
}
