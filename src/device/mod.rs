//! Where records go: the [`Device`] trait, and its real implementation over files and
//! block devices. The simulated drive (`crate::sim`) implements the same trait, so the
//! writer, verify and bench run unchanged against either.

mod aligned;
pub mod error;
mod file;
pub mod geometry;
pub mod health;
pub mod identity;
mod interface;
pub mod marker;
// Test support (Cargo.toml's test-support feature): not in the shipped binary.
#[cfg(any(test, feature = "test-support"))]
pub mod mem;
pub mod open;
pub mod safety;
pub mod stack;

pub use aligned::AlignedBuf;
pub use error::DeviceError;
pub use file::{
    FileDevice, FlushMethod, OpenOptions, PreparedFile, is_block_device, prepare_file,
    prepare_target_file,
};
pub use interface::Device;
