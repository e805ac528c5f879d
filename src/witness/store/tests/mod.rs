//! Unit tests of the store: each exercises several of its modules together (a log
//! written, a journal replayed, the result read back), so they live beside them.

mod compact;
mod journal;
mod log;
