//! `plugpull report`: arguments to options, then the action.

use crate::commands::args::ReportArgs;

pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    crate::report::run(a)
}
