//! `plugpull report`: verify reports turned into one HTML page people would rather look at.
//!
//! An admin qualifying drives hands the result to colleagues; a vendor attaches it to a
//! power-loss-protection claim. A wall of JSON is not that, so this module reads one or
//! more `plugpull-verify/1` reports (several are the cycles of a campaign), merges them
//! (`aggregate`), and renders a single self-contained page (`html`, charts in `svg`); a
//! fleet matrix (`plugpull-fleet/1`) gets its own page (`html::fleet`).

pub mod aggregate;
pub mod html;
pub mod input;
pub mod svg;

use std::io::Write;
use std::path::{Path, PathBuf};

/// What `plugpull report` renders.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Verify reports, or JSON-lines files of them ("-" is stdin).
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write ("-" for stdout).
    pub output: PathBuf,
    /// Page title (default: from the device and verdict).
    pub title: Option<String>,
    /// Print what was rendered as JSON on stdout.
    pub json: bool,
    /// Print nothing on success.
    pub quiet: bool,
}

/// Why no page was written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Input(#[from] input::InputError),
    #[error(transparent)]
    Write(#[from] crate::userfile::UserFileError),
    #[error(transparent)]
    Stdout(std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// What the page shows, in brief.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Shown {
    /// Verify reports: a run, or a campaign's cycles.
    Cycles(aggregate::Summary),
    /// A fleet matrix.
    Fleet {
        verdict: crate::model::Verdict,
        drives: usize,
        cuts: u64,
    },
}

/// What `plugpull report` wrote, for the command to say.
pub struct Written {
    /// Where the page went; "-" for stdout.
    pub output: PathBuf,
    pub to_stdout: bool,
    pub bytes: usize,
    pub summary: Shown,
    /// Inputs skipped, and why.
    pub notes: Vec<String>,
}

/// Reads the reports and writes the page; what it wrote is for the command to say.
pub fn run(o: ReportOptions) -> Result<Written, ReportError> {
    let mut notes = vec![];
    let made_by = html::shell_line(&std::env::args().collect::<Vec<_>>());
    let (page, summary) = match input::load(&o.inputs, &mut notes)? {
        input::Inputs::Cycles(cycles) => {
            let summary = aggregate::summarise(&cycles);
            let page = html::render(&cycles, &summary, o.title.as_deref(), &made_by, &notes);
            (page, Shown::Cycles(summary))
        }
        input::Inputs::Fleet(m) => {
            let page = html::fleet::render(&m, o.title.as_deref(), &made_by);
            let shown = Shown::Fleet {
                verdict: m.verdict(),
                drives: m.drives.len(),
                cuts: m.cuts,
            };
            (page, shown)
        }
    };
    let to_stdout = o.output == Path::new("-");
    if to_stdout {
        std::io::stdout()
            .write_all(page.as_bytes())
            .map_err(ReportError::Stdout)?;
    } else {
        // Never through a link or into a device: a new file renamed over the name.
        crate::userfile::replace(&o.output, page.as_bytes(), 0o666)?;
    }
    Ok(Written {
        output: o.output,
        to_stdout,
        bytes: page.len(),
        summary,
        notes,
    })
}
