//! Verify. (Being written.)
use crate::cli::VerifyArgs;
pub fn run(_a: VerifyArgs) -> anyhow::Result<i32> {
    anyhow::bail!("verify is not implemented yet")
}
