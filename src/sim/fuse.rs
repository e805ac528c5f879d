//! FUSE front (being written).
use crate::cli::SimdriveArgs;
pub fn run(_a: SimdriveArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not yet")
}
