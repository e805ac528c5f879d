//! `plugpull runs`: arguments to a listing of the witness's runs, printed as text or JSON.

use crate::commands::args::RunsArgs;
use crate::exit;
use crate::witness::client::{list_runs, runs_json, runs_text};

pub fn run(a: RunsArgs) -> anyhow::Result<i32> {
    let key = crate::wire::auth::load_key(a.key_file.as_deref())?;
    let runs = list_runs(&a.witness, key.as_ref())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs_json(&runs))?);
    } else {
        print!("{}", runs_text(&runs));
    }
    Ok(exit::PASS)
}
