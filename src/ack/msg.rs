//! TODO(helper): see ack/mod.rs
