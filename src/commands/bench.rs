//! `plugpull bench`: arguments to options, then the action.

use crate::commands::args::BenchArgs;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    crate::bench::run(a)
}
