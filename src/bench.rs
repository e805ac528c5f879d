//! The flush-latency fingerprint. (Being written.)
use crate::cli::BenchArgs;
pub fn run(_a: BenchArgs) -> anyhow::Result<i32> {
    anyhow::bail!("bench is not implemented yet")
}
