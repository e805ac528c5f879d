//! The witness server. (Being written: see the witness helper's brief.)
use crate::cli::ListenArgs;
pub fn run(_a: ListenArgs) -> anyhow::Result<()> {
    anyhow::bail!("listen is not implemented yet")
}
