//! `plugpull campaign`: arguments to options, then the action.

use crate::commands::args::CampaignArgs;

pub fn run(a: CampaignArgs) -> anyhow::Result<i32> {
    crate::campaign::run(a)
}
