//! The witness's durable store: one ack log per run, the witness-wide journal that makes
//! an ack durable with one fsync, and the storage trait both write through (so crash tests
//! can cut a simulated disk at every point).
//!
//! Who depends on whom (no circles): `scan` (frames, torn tail, damage) and `layout`
//! (file names) at the bottom; `export` (the end-marked fetch file) and `checker` (what a
//! valid log is) on them; `log` (appending to and recovering one run's log) and `journal`
//! (group commit for all runs) side by side, neither knowing the other; `journal_replay`
//! (journal entries back into logs) and `reader` (a run = log + journal overlay) on top.
//! This file joins the two sides: the journal is the log's [`log::GroupCommit`].

pub mod checker;
pub mod error;
pub mod export;
pub mod journal;
pub mod journal_replay;
pub mod layout;
pub mod log;
pub mod reader;
pub mod scan;
pub mod storage;
pub mod verdicts;

#[cfg(test)]
mod tests;

use crate::record::RunId;
use crate::witness::store::error::StoreResult;

impl log::GroupCommit for journal::Journal {
    fn commit(&self, run: RunId, offset: u64, data: &[u8]) -> StoreResult<()> {
        journal::Journal::commit(self, run, offset, data)
    }
}
