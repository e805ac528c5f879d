//! `plugpull agent`: arguments to options, then the action.

use crate::campaign::agent::{AgentEnd, AgentOptions};
use crate::commands::args::AgentArgs;

pub fn run(a: AgentArgs) -> anyhow::Result<i32> {
    Ok(
        match crate::campaign::agent::run(AgentOptions { config: a.config })? {
            AgentEnd::Done => crate::exit::PASS,
            AgentEnd::DriveFailedWithPower => crate::exit::TARGET_FAILED,
        },
    )
}
