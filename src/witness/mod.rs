//! The witness: the machine that keeps power and remembers every acknowledgement.
//!
//! Why a separate machine and a durable log: the host under test loses power, so the
//! promises it made ("record X is flushed") must live somewhere that does not. An ack the
//! witness has reported durable is fsync'd (in its run's log, or in the witness journal
//! that is replayed into the logs at start) and survives the witness being killed or its
//! machine losing power. Wire, log and journal formats are in docs/protocol.md.
//!
//! `store` keeps acks on disk, `server` is `plugpull listen`, `client` is what the writer
//! and `fetch` use to talk to it; `validate` holds the rules every incoming ack must pass.

pub mod client;
// Test support (Cargo.toml's test-support feature, which the fuzz/ crate turns on):
// not in the shipped binary.
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod fuzz;
pub mod server;
pub mod store;
pub mod validate;
