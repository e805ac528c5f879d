//! The four rules over a source tree, as lists of the files that break them, and how
//! the lists are printed. The thresholds and the allowlist are in main.rs.

use super::MAX_LINES;
use super::source::{Sources, code_only, is_roof, line_count, mentions, without_tests};

pub fn clap_users(sources: &Sources) -> Vec<String> {
    sources
        .iter()
        .filter(|(f, _)| !is_roof(f))
        .filter(|(_, text)| {
            let code = code_only(text);
            mentions(&code, "clap") || code.contains("commands::args")
        })
        .map(|(f, _)| f.clone())
        .collect()
}

pub fn long_files(sources: &Sources) -> Vec<(String, usize)> {
    sources
        .iter()
        .map(|(f, text)| (f.clone(), line_count(text)))
        .filter(|(_, n)| *n > MAX_LINES)
        .collect()
}

pub fn anyhow_users(sources: &Sources) -> Vec<String> {
    sources
        .iter()
        .filter(|(f, _)| !is_roof(f))
        .filter(|(_, text)| mentions(&without_tests(&code_only(text)).0, "anyhow"))
        .map(|(f, _)| f.clone())
        .collect()
}

pub fn src_list(files: &[String]) -> String {
    files.iter().map(|f| format!("\n  src/{f}")).collect()
}

pub fn cycle_list(cycles: &[Vec<String>]) -> String {
    cycles
        .iter()
        .map(|c| {
            let names: Vec<String> = c.iter().map(|f| format!("src/{f}")).collect();
            format!("\n  {}", names.join(" -> "))
        })
        .collect()
}
