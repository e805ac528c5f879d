//! `plugpull simdrive`: arguments to options, then the action.

use crate::commands::args::SimdriveArgs;
use crate::sim::{Profile, SimdriveOptions};

pub fn run(a: SimdriveArgs) -> anyhow::Result<i32> {
    let options = SimdriveOptions {
        profile: Profile::parse(&a.profile)?,
        mountpoint: a.mountpoint,
        backing: a.backing,
        size_bytes: a.size,
        seed: a.seed,
        oracle: a.oracle,
    };
    // Serving ends in a power cut that exits the process; only a failure returns.
    match crate::sim::serve(options)? {}
}
