//! `plugpull report`: verify reports turned into one HTML page people would rather look at.
//!
//! An admin qualifying drives hands the result to colleagues; a vendor attaches it to a
//! power-loss-protection claim. A wall of JSON is not that, so this module reads one or
//! more `plugpull-verify/1` reports (several are the cycles of a campaign), merges them
//! (`aggregate`), and renders a single self-contained page (`html`, charts in `svg`).

pub mod aggregate;
pub mod html;
pub mod input;
pub mod svg;

use crate::commands::args::ReportArgs;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

pub fn run(a: ReportArgs) -> Result<i32> {
    let mut notes = vec![];
    let cycles = input::load(&a.inputs, &mut notes)?;
    let summary = aggregate::summarise(&cycles);
    let made_by = html::shell_line(&std::env::args().collect::<Vec<_>>());
    let page = html::render(&cycles, &summary, a.title.as_deref(), &made_by, &notes);
    let to_stdout = a.output == Path::new("-");
    if to_stdout {
        std::io::stdout().write_all(page.as_bytes())?;
    } else {
        std::fs::write(&a.output, &page)
            .with_context(|| format!("writing {}", a.output.display()))?;
    }
    for n in &notes {
        if !a.quiet {
            eprintln!("plugpull: {n}");
        }
    }
    if a.json && !to_stdout {
        let v = serde_json::json!({
            "format": "plugpull-report/1",
            "output": a.output.display().to_string(),
            "bytes": page.len(),
            "summary": summary,
            "skipped": notes,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else if !a.quiet && !to_stdout {
        println!(
            "wrote {} ({} cycle(s), verdict {}, {} KiB)",
            a.output.display(),
            summary.cycles,
            summary.verdict,
            page.len().div_ceil(1024)
        );
    }
    Ok(crate::exit::PASS)
}
