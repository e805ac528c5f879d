//! `plugpull fetch`: arguments to options, then the action, then what it wrote
//! (`render::fetch`).

use crate::commands::args::FetchArgs;
use crate::commands::render;
use crate::exit;
use crate::witness::client::{FetchOptions, fetch_to_file};

pub fn run(a: FetchArgs) -> anyhow::Result<i32> {
    let json = a.json;
    let fetched = fetch_to_file(options(a))?;
    eprint!("{}", render::fetch::warnings(&fetched));
    if json {
        render::out(&render::fetch::json(&fetched));
    } else {
        eprint!("{}", render::fetch::line(&fetched));
    }
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
