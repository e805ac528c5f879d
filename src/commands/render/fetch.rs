//! What `plugpull fetch` says: the witness's damage warnings and the line naming the
//! file on stderr, or JSON on stdout.

use crate::units::thousands;
use crate::witness::client::FetchedRun;

/// Damage warnings, one line each (for stderr).
pub fn warnings(f: &FetchedRun) -> String {
    f.damage
        .iter()
        .map(|d| format!("warning: {}\n", crate::model::peer_text::shown(d)))
        .collect()
}

/// The JSON for stdout (`--json`).
pub fn json(f: &FetchedRun) -> String {
    let out = serde_json::json!({
        "format": "plugpull-fetch/1",
        "run_id": f.got.descriptor.run_id.hex(),
        "acks": f.got.acks,
        "witness_events": f.got.events.len(),
        "output": f.output.display().to_string(),
        "damage": f.damage,
    });
    format!("{out}\n")
}

/// The line for stderr without `--json`.
pub fn line(f: &FetchedRun) -> String {
    format!(
        "fetched run {} ({} acks, {} witness events) into {}\n",
        f.got.descriptor.run_id,
        thousands(f.got.acks),
        thousands(f.got.events.len() as u64),
        f.output.display()
    )
}
