//! The witness server: accepts writers, appends their acks to one log per run, reports
//! them durable after an fdatasync of the journal shared by all runs (module `journal`),
//! and serves whole runs to `verify` / `fetch`.
//!
//! Why one gate thread for every handshake, then a thread per connection: module
//! `accept`. After the handshake, writers are few (one per drive under
//! test) and each connection's work is mostly waiting for the journal's next sync;
//! blocking I/O keeps the code small and each run's durability rule obvious. Writers and
//! fetches have separate caps, so neither can starve the other.
//!
//! Why the run slot lock: a writer that reconnects while its old connection is still
//! half-open must not interleave appends with it; the newest connection owns the run
//! and the old one stops at its next step.
//!
//! Why one peer cannot stall the others: no lock is ever held across socket I/O, and the
//! gate never blocks on a socket (it sends with MSG_DONTWAIT and drops a peer that does
//! not take a small reply). The global maps (`runs`, `latest`, `conns`) are held for a
//! lookup only; a run's slot lock is held across its own log append and its wait for the
//! journal sync, which only that run's connections wait for. A writer that sends slowly
//! is bounded by the idle deadline, which counts from the last *complete* frame (a byte
//! a second does not keep a connection alive); one that does not read our replies is
//! bounded by the write timeout, and blocks only its own thread. Memory per pending
//! connection is bounded by `HANDSHAKE_BUF_BYTES`, per writer by `READ_BATCH_BYTES +
//! max_frame_bytes`.
//!
//! Why validation before every store (module `validate`): an ack no writer can produce
//! (0 sectors, 2^32-1 sectors, outside the region, a stream the run lacks) would be made
//! durable and then judged by verify. A Hello's descriptor is checked before its log is
//! created; each Acks frame before any of it is appended.
//!
//! Every connection event is one `key=value` line on stderr (see docs/protocol.md).
//!
//! The parts: `witness` (start, shutdown), `shared` (options, run slots, caps),
//! `dirlock` and `recovery` (what happens before listening), `accept` (the gate),
//! `connection` (a connection's thread) and `recv_buf` (its receive buffer), `writer`
//! and `fetch` (what its frames do), `events` (the log lines), `listen` (the command).
//! This file only names them.

mod accept;
mod connection;
mod dirlock;
mod error;
mod events;
mod fetch;
mod listen;
mod recovery;
mod recv_buf;
#[cfg(test)]
mod reply_tests;
mod runs;
mod shared;
mod witness;
mod writer;

pub use accept::{FETCH_CONNECTIONS, HANDSHAKE_BUF_BYTES, MAX_PENDING_HANDSHAKES};
pub use error::WitnessError;
pub use listen::{ListenOptions, MIN_MAX_FRAME_BYTES, listen};
pub use shared::WitnessOptions;
pub use witness::Witness;
