//! `plugpull fetch`: arguments to options, then the action.

use crate::commands::args::FetchArgs;
use crate::exit;
use crate::witness::client::{FetchOptions, fetch_to_file};

pub fn run(a: FetchArgs) -> anyhow::Result<i32> {
    fetch_to_file(options(a))?;
    Ok(exit::PASS)
}

fn options(a: FetchArgs) -> FetchOptions {
    FetchOptions {
        witness: a.witness,
        run: a.run,
        target: a.target,
        output: a.output,
        key_file: a.key_file,
        json: a.json,
    }
}
