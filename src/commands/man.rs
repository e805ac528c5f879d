//! `plugpull man`: arguments to options, then the action.

use crate::commands::args::ManArgs;

pub fn run(a: ManArgs) -> anyhow::Result<i32> {
    crate::commands::clidocs::man(a)
}
