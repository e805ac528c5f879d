//! `plugpull fetch`: arguments to options, then the action, then what it wrote
//! (`render::fetch`).

use crate::commands::args::FetchArgs;
use crate::commands::render;
use crate::exit;
use crate::verify::temp_log::PartFile;
use crate::witness::client::{FetchOptions, fetch_to_file};

pub fn run(a: FetchArgs) -> anyhow::Result<i32> {
    let json = a.json;
    // The fetch writes to a part file known in advance, so Ctrl-C or SIGTERM in the
    // middle of it leaves nothing beside FILE (FILE itself is replaced only when the
    // whole run is in).
    let part = PartFile::beside(&a.output);
    crate::commands::interrupt::on_ctrl_c_or_term_say(
        b"\nplugpull fetch: interrupted (Ctrl-C): the output file was not written (an older one is left as it was); run it again.\n",
        b"\nplugpull fetch: terminated (SIGTERM): the output file was not written (an older one is left as it was); run it again.\n",
    );
    let mut o = options(a);
    o.part = Some(part.0.clone());
    let fetched = fetch_to_file(o)?;
    drop(part);
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
        part: None,
        key_file: a.key_file,
        json: a.json,
    }
}
