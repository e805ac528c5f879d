//! `plugpull campaign`: arguments to options, then the action.

use crate::campaign::CampaignOptions;
use crate::commands::args::CampaignArgs;

pub fn run(a: CampaignArgs) -> anyhow::Result<i32> {
    let summary = crate::campaign::run(CampaignOptions {
        config: a.config,
        results: a.results,
        cycles: a.cycles,
        summary_only: a.summary,
        json: a.json,
        quiet: a.quiet,
    })?;
    Ok(if summary.failed > 0 {
        crate::exit::FAIL
    } else if summary.errors > 0 {
        crate::exit::ERROR
    } else if summary.cut_not_proven > 0 {
        // Nothing lost, but some cuts are not proven: not a pass.
        crate::exit::INCONCLUSIVE
    } else {
        crate::exit::PASS
    })
}
