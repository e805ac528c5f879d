//! `plugpull verify`'s report on stdout: text, JSON, or the verdict line; for a device
//! and for a directory tree.

use super::Format;
use crate::tree::TreeVerified;
use crate::verify::report::Report;

/// The report of a device verify in `format`.
pub fn report(format: Format, r: &Report) -> Result<String, serde_json::Error> {
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(r)?),
        Format::Quiet => verdict_line(r),
        Format::Text => r.to_text(),
    })
}

/// The report of a directory verify in `format`: the device report's forms, in words
/// about the storage under the directory, with the tree's own section.
pub fn tree(format: Format, t: &TreeVerified) -> Result<String, serde_json::Error> {
    let r = &t.report.report;
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&t.report)?),
        Format::Quiet => verdict_line(r),
        Format::Text => {
            let text = r
                .to_text()
                .replacen(
                    "In plain words: This drive",
                    "In plain words: The storage under this directory (file system and drive)",
                    1,
                )
                .replace("on this drive", "on this storage");
            text + &crate::tree::verify::tree_text(&t.report.tree)
        }
    })
}

fn verdict_line(r: &Report) -> String {
    format!("VERDICT: {} - {}\n", r.verdict.name(), r.summary)
}
