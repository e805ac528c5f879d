//! `plugpull agent`: arguments to options, then the action.

use crate::commands::args::AgentArgs;

pub fn run(a: AgentArgs) -> anyhow::Result<i32> {
    crate::campaign::agent::run(a)
}
