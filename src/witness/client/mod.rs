//! The witness's client: the writer's ack sender and verify's fetch.
//!
//! Why a queue and a background thread: the writer's flush loop must never wait on the
//! network (a slow witness would change the timing we are measuring), so `push` only
//! appends to an in-memory queue. The queue holds every ack not yet confirmed durable;
//! that is exactly what must be resent after a reconnect, starting at the witness's
//! durable count from the Welcome. Acks leave the queue only when the witness says they
//! are fdatasync'd.
//!
//! `sender` is the queue and its threads, `fetch` reads a whole run (and is the `fetch`
//! command's action), `runs` lists the runs a witness holds, `connect` is what they all
//! do to reach the witness.

mod batch;
mod connect;
pub mod error;
mod fetch;
mod options;
mod runs;
mod sender;

pub use fetch::{
    AckSink, FetchOptions, FetchedFile, FetchedRun, fetch, fetch_into_file, fetch_into_file_via,
    fetch_streamed, fetch_to_file, fetch_with_key,
};
pub use options::ClientOptions;
pub use runs::{list_runs, record_verdict, runs_json, runs_text, sort_newest_first};
pub use sender::{AckSender, SenderStats};
