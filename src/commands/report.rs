//! `plugpull report`: arguments to options, then the action.

use crate::commands::args::ReportArgs;
use crate::report::ReportOptions;

pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    crate::report::run(ReportOptions {
        inputs: a.inputs,
        output: a.output,
        title: a.title,
        json: a.json,
        quiet: a.quiet,
    })?;
    Ok(crate::exit::PASS)
}
