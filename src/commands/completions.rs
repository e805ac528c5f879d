//! `plugpull completions`: arguments to options, then the action.

use crate::commands::args::CompletionsArgs;

pub fn run(a: CompletionsArgs) -> anyhow::Result<i32> {
    crate::commands::clidocs::completions(a)
}
