//! `plugpull write`: arguments to options, then the action.

use crate::commands::args::WriteArgs;

pub fn run(a: WriteArgs) -> anyhow::Result<i32> {
    crate::write::run(a)
}
