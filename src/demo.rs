//! The demo. (Being written.)
use crate::cli::DemoArgs;
pub fn run(_a: DemoArgs) -> anyhow::Result<i32> {
    anyhow::bail!("demo is not implemented yet")
}
