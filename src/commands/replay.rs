//! `plugpull replay`: arguments to [`ReplayOptions`], then the summary to an exit code:
//! 0 when every replayed state got the verdict expected of it, 1 when any disagreed, 2
//! when the log, the run or the scratch image is unusable.

use crate::commands::ack_args;
use crate::commands::args::ReplayArgs;
use crate::exit;
use crate::logwrites::{self, ReplayOptions};
use crate::model::Verdict;

pub fn run(a: ReplayArgs) -> anyhow::Result<i32> {
    let o = options(a)?;
    // Replay only reads the log and the acks; its scratch image has no name (module
    // `logwrites::image`) and its fetched acks are removed by the handler.
    crate::commands::interrupt::on_ctrl_c_or_term_say(
        b"\nplugpull replay: interrupted (Ctrl-C): no summary. Replay only reads the log; run it again.\n",
        b"\nplugpull replay: terminated (SIGTERM): no summary. Replay only reads the log; run it again.\n",
    );
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
    let run = ack_args::run_id(a.run.as_deref())?;
    let acks = ack_args::ack_source(a.acks, a.witness)?;
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
        memory_bytes: a.memory,
        json: a.json,
    })
}
