//! `plugpull write`: stream records to the target, flush, acknowledge to the witness.
pub mod engine;
pub mod plan;

use crate::cli::WriteArgs;
pub fn run(_a: WriteArgs) -> anyhow::Result<i32> {
    anyhow::bail!("write is not wired to the witness yet")
}
