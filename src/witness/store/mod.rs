//! The witness's durable store: one ack log per run, the witness-wide journal that makes
//! an ack durable with one fsync, and the storage trait both write through (so crash tests
//! can cut a simulated disk at every point).

pub mod journal;
pub mod log;
pub mod storage;
