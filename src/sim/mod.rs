//! The simulated drive. (Being written.)
use crate::cli::SimdriveArgs;
pub fn run(_a: SimdriveArgs) -> anyhow::Result<i32> {
    anyhow::bail!("simdrive is not implemented yet")
}
