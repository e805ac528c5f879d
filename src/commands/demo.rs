//! `plugpull demo`: arguments to options, then the action.

use crate::commands::args::DemoArgs;

pub fn run(a: DemoArgs) -> anyhow::Result<i32> {
    crate::demo::run(a)
}
