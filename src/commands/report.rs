//! `plugpull report`: arguments to options, then the action, then what it wrote
//! (`render::report`).

use crate::commands::args::ReportArgs;
use crate::commands::render;
use crate::report::ReportOptions;

pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    let (json, quiet) = (a.json, a.quiet);
    let written = crate::report::run(ReportOptions {
        inputs: a.inputs,
        output: a.output,
        title: a.title,
        json,
        quiet,
    })?;
    eprint!("{}", render::report::notes(&written, quiet));
    render::out(&render::report::written(&written, json, quiet)?);
    Ok(crate::exit::PASS)
}
