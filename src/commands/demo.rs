//! `plugpull demo`: arguments to options, then the action: one cycle on one simulated
//! drive, or (`--fleet`) the fleet's matrix.

use crate::commands::args::DemoArgs;
use crate::demo::DemoOptions;
use crate::fleet::demo::FleetDemoOptions;
use crate::sim::profile::Profile;
use std::time::Duration;

pub fn run(a: DemoArgs) -> anyhow::Result<i32> {
    if a.fleet {
        let o = FleetDemoOptions {
            cuts: a.cuts,
            seed: a.seed,
            duration: a.duration.unwrap_or(Duration::from_secs(1)),
            narrate: !a.json,
        };
        let matrix = crate::fleet::demo::run(&o)?;
        match a.json {
            true => println!("{}", serde_json::to_string_pretty(&matrix)?),
            false => print!("{}", crate::fleet::text::matrix_text(&matrix)),
        }
        return Ok(matrix.verdict().exit_code());
    }
    let options = DemoOptions {
        profile: Profile::parse(&a.profile).map_err(anyhow::Error::msg)?,
        profile_name: a.profile,
        seed: a.seed,
        duration: a.duration.unwrap_or(Duration::from_secs(3)),
        json: a.json,
    };
    Ok(crate::demo::run(options)?.exit_code())
}
