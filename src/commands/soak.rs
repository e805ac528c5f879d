//! `plugpull soak`: arguments to options, then the action.

use crate::commands::args::SoakArgs;
use crate::soak::{Kinds, SoakOptions};

pub fn run(a: SoakArgs) -> anyhow::Result<i32> {
    let kinds = match a.only.as_deref() {
        None => Kinds::Both,
        Some("honest") => Kinds::HonestOnly,
        Some("faulty") => Kinds::FaultyOnly,
        Some(o) => anyhow::bail!("--only {o:?}: expected honest or faulty"),
    };
    let summary = crate::soak::run(SoakOptions {
        seed: a.seed,
        cycles: a.cycles,
        kinds,
        verbose: a.verbose,
        json: a.json,
    })?;
    Ok(if summary.failing.is_empty() {
        crate::exit::PASS
    } else {
        crate::exit::FAIL
    })
}
