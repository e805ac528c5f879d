//! `plugpull demo`: arguments to options, then the action.

use crate::commands::args::DemoArgs;
use crate::demo::DemoOptions;
use crate::sim::profile::Profile;

pub fn run(a: DemoArgs) -> anyhow::Result<i32> {
    let options = DemoOptions {
        profile: Profile::parse(&a.profile).map_err(anyhow::Error::msg)?,
        profile_name: a.profile,
        seed: a.seed,
        duration: a.duration,
        json: a.json,
    };
    Ok(crate::demo::run(options)?.exit_code())
}
