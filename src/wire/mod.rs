//! The witness protocol on the wire: frames (length, type, CRC), the messages inside them,
//! and the optional authentication that seals them. Shared by the witness server, its
//! client and the ack log, which stores the same frames. Byte layouts: docs/protocol.md.

pub mod auth;
#[cfg(test)]
pub(crate) mod codec_tests;
pub mod compact;
pub mod entry;
pub mod file_acks;
pub mod frame;
pub mod msg;
pub mod packed;
pub mod version;
