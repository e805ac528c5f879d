//! The simulated drive: a model of an SSD with a volatile write cache and seeded fault
//! profiles, so verify can be proven right on every failure class without cutting real
//! power.
//!
//! - [`model`]: durable image + volatile cache + fault layer (single-threaded core);
//! - [`profile`]: which behaviour, with which knobs;
//! - [`oracle`]: the log of injected faults and its resolution after the cut;
//! - [`media`]: the image and the sidecar of post-cut faults;
//! - [`compare`]: what verify must report, from the oracle and the witness's acks;
//! - [`drive`]: [`SimDrive`], the model behind the `Device` trait for in-process use;
//! - [`fuse`]: `plugpull simdrive`, the model served as one file over FUSE, so the real
//!   writer reaches it through real syscalls and a SIGKILL is a power cut.
//!
//! docs/fault-model.md describes every profile and the oracle format.

pub mod compare;
pub mod drive;
pub mod fuse;
pub mod invariant;
pub mod media;
pub mod model;
pub mod oracle;
pub mod profile;

pub use drive::SimDrive;
pub use fuse::{SimdriveError, SimdriveOptions, serve};
pub use model::SimConfig;
pub use oracle::{Class, Fault, RecordRef, resolve};
pub use profile::{Kind, Profile, ProfileError};

#[cfg(test)]
mod tests;
