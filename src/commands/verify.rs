//! `plugpull verify`: arguments to options, then the action.

use crate::commands::args::VerifyArgs;

pub fn run(a: VerifyArgs) -> anyhow::Result<i32> {
    crate::verify::run(a)
}
