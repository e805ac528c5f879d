//! `plugpull listen`: arguments to options, then the action.

use crate::commands::args::ListenArgs;
use crate::exit;

pub fn run(a: ListenArgs) -> anyhow::Result<i32> {
    crate::witness::server::run(a).map(|()| exit::PASS)
}
