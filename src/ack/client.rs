//! The writer's ack sender and verify's fetch. (Being written.)
use crate::cli::FetchArgs;
pub fn run_fetch(_a: FetchArgs) -> anyhow::Result<()> {
    anyhow::bail!("fetch is not implemented yet")
}
pub fn fetch(_addr: &str, _sel: &super::RunSelector) -> anyhow::Result<super::RunLog> {
    anyhow::bail!("not yet")
}
