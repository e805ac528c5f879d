//! `plugpull simdrive`: arguments to options, then the action.

use crate::commands::args::SimdriveArgs;

pub fn run(a: SimdriveArgs) -> anyhow::Result<i32> {
    crate::sim::run(a)
}
