//! `plugpull fetch`: arguments to options, then the action.

use crate::commands::args::FetchArgs;
use crate::exit;

pub fn run(a: FetchArgs) -> anyhow::Result<i32> {
    crate::witness::client::run_fetch(a).map(|()| exit::PASS)
}
