//! `plugpull replay`: arguments to [`ReplayOptions`], then the summary to an exit code:
//! 0 when every replayed state got the verdict expected of it, 1 when any disagreed, 2
//! when the log, the run or the scratch image is unusable.

use crate::commands::args::ReplayArgs;
use crate::exit;
use crate::logwrites::{self, ReplayOptions};
use crate::model::Verdict;
use crate::record::RunId;
use crate::verify::AckSource;
use anyhow::Context;

pub fn run(a: ReplayArgs) -> anyhow::Result<i32> {
    let o = options(a)?;
    let summary = logwrites::run(&o)?;
    if o.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.to_text());
    }
    Ok(match logwrites::outcome(&summary) {
        Verdict::Pass => exit::PASS,
        _ => exit::FAIL,
    })
}

/// The options the command line asks for; an error if `--run` is not a run id.
pub fn options(a: ReplayArgs) -> anyhow::Result<ReplayOptions> {
    let run = match &a.run {
        Some(r) => Some(
            RunId::parse(r)
                .with_context(|| format!("--run '{r}' is not a run id (32 hex digits)"))?,
        ),
        None => None,
    };
    let acks = match (a.acks, a.witness) {
        (Some(path), _) => AckSource::File(path),
        (None, Some(addr)) => AckSource::Witness(addr),
        (None, None) => anyhow::bail!("--witness or --acks is required"),
    };
    Ok(ReplayOptions {
        log: a.log,
        acks,
        key_file: a.key_file,
        run,
        base: a.base,
        drops: a.drops,
        seed: a.seed.unwrap_or_else(crate::rng::random_seed),
        full_verify: a.full_verify,
        scratch_dir: a.scratch_dir,
        read_timeout: a.read_timeout,
        json: a.json,
    })
}
