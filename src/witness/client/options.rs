//! The ack sender's tunables, apart from the sender so its file stays one thing.

use crate::wire::auth::Key;
use std::time::Duration;

/// Tunables of the ack sender.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// `push` blocks while this many acks are not yet confirmed durable.
    pub max_unconfirmed: usize,
    /// Heartbeat interval when idle; a connection with no reply for 3x this is dead.
    pub heartbeat: Duration,
    /// Longest wait between reconnect attempts.
    pub reconnect_backoff_max: Duration,
    /// The witness's pre-shared key; `None` for an unauthenticated witness.
    pub key: Option<Key>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            max_unconfirmed: 1 << 20,
            heartbeat: Duration::from_secs(1),
            reconnect_backoff_max: Duration::from_secs(5),
            key: None,
        }
    }
}
