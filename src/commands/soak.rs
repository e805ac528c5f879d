//! `plugpull soak`: arguments to options, then the action.

use crate::commands::args::SoakArgs;

pub fn run(a: SoakArgs) -> anyhow::Result<i32> {
    crate::soak::run(a)
}
