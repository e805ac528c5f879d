//! Shell completions and man pages, generated from the clap definitions in `args.rs` at run
//! time: one documented command each (`plugpull completions bash`, `plugpull man --dir
//! DIR`), so packagers get them without a build script and they never drift from the
//! options the binary really takes.

use crate::commands::args::{CompletionsArgs, ManArgs};
use crate::commands::help::cli;
use anyhow::{Context, Result};

/// Prints completions for `a.shell` on stdout.
pub fn completions(a: CompletionsArgs) -> Result<i32> {
    let mut cmd = cli();
    clap_complete::generate(a.shell, &mut cmd, "plugpull", &mut std::io::stdout());
    Ok(crate::exit::PASS)
}

/// Writes plugpull.1 and plugpull-SUBCOMMAND.1 for every subcommand into `a.dir`, and
/// prints the paths written.
pub fn man(a: ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    for p in write_man_pages(&a.dir)? {
        println!("{}", p.display());
    }
    Ok(crate::exit::PASS)
}

/// The man pages for the whole command tree; returns the files written.
pub fn write_man_pages(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    clap_mangen::generate_to(cli(), dir)
        .with_context(|| format!("writing man pages to {}", dir.display()))?;
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("plugpull") && n.ends_with(".1"))
        })
        .collect();
    files.sort();
    for f in &files {
        let page = std::fs::read_to_string(f)?;
        std::fs::write(f, examples_section(&page))?;
    }
    Ok(files)
}

/// clap_mangen puts the after-help text under ".SH EXTRA"; every command's starts with
/// "Examples:", which is what man pages call EXAMPLES (man-pages(7)), so the section gets
/// that name. Text that does not start so is left as NOTES.
fn examples_section(page: &str) -> String {
    match page.split_once("\n.SH EXTRA\nExamples:\n") {
        Some((head, rest)) => format!("{head}\n.SH EXAMPLES\n{rest}"),
        None => page.replace("\n.SH EXTRA\n", "\n.SH NOTES\n"),
    }
}
