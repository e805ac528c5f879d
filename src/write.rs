//! The writer. (Being written.)
use crate::cli::WriteArgs;
pub fn run(_a: WriteArgs) -> anyhow::Result<i32> {
    anyhow::bail!("write is not implemented yet")
}
