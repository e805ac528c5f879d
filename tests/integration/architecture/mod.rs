//! The architecture, checked. Reads src/ and fails when:
//! - (a) a file outside `src/commands/` and `src/main.rs` mentions `clap` or
//!   `commands::args`: the command line is the roof, no domain module stands on it;
//! - (b) a file in src/ is over [`MAX_LINES`] lines (unit tests in it count);
//! - (c) files of src/ import each other in a circle (`a` uses `b` ... uses `a`);
//! - (d) `anyhow` is used outside `src/commands/` and `src/main.rs` by a file not in
//!   [`ANYHOW_ALLOWED`], or a file in that list no longer uses it (so the list only
//!   shrinks: take the file off it).
//!
//! What counts as a mention or a use is the code: comments and string literals are
//! blanked first. For (c) and (d) test-only code is left out (`#[cfg(test)]` items and
//! files declared `#[cfg(test)] mod x;`): a test module that uses `super::*` is not a
//! circle, and a test may return `anyhow::Result`. For (a) test code counts too: a test
//! that needs clap to build a domain value means the domain still stands on the CLI.
//!
//! `scripts/arch-check.sh` runs this with `--nocapture`; [`all_lists_printed`] prints
//! every list. The parts: [`source`] (the files and their code), [`paths`] (what a file
//! names), [`graph`] (imports and circles), [`rules`], and [`fixtures`] (the checker
//! tested on small trees).

mod fixtures;
mod graph;
mod paths;
mod rules;
mod source;

use graph::{find_cycles, import_graph};
use rules::{anyhow_users, clap_users, cycle_list, long_files, src_list};
use source::read_sources;

/// No source file over this many lines.
const MAX_LINES: usize = 600;

/// Files outside the command layer that still use anyhow (once 35). Only
/// shrinks: remove a file when it stops using anyhow (the check fails until you do).
const ANYHOW_ALLOWED: &[&str] = &[];

#[test]
fn only_the_command_layer_mentions_clap() {
    let users = clap_users(&read_sources());
    assert!(
        users.is_empty(),
        "files outside src/commands/ and src/main.rs that mention clap or commands::args \
         (give the module a plain options type; commands/<cmd>.rs converts the clap \
         arguments into it):{}",
        src_list(&users)
    );
}

#[test]
fn no_source_file_is_over_600_lines() {
    let long = long_files(&read_sources());
    let list: String = long
        .iter()
        .map(|(f, n)| format!("\n  src/{f}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by job into submodules; move a big \
         `mod tests` into x/tests.rs):{list}"
    );
}

#[test]
fn no_import_circles() {
    let cycles = find_cycles(&import_graph(&read_sources()));
    assert!(
        cycles.is_empty(),
        "import circles between files of src/ (each line: a file, the file it uses, ..., \
         back to the first):{}",
        cycle_list(&cycles)
    );
}

#[test]
fn anyhow_only_in_the_command_layer_and_the_shrinking_allowlist() {
    let users = anyhow_users(&read_sources());
    let new: Vec<String> = users
        .iter()
        .filter(|f| !ANYHOW_ALLOWED.contains(&f.as_str()))
        .cloned()
        .collect();
    let stale: Vec<String> = ANYHOW_ALLOWED
        .iter()
        .filter(|f| !users.iter().any(|u| u == *f))
        .map(|f| f.to_string())
        .collect();
    assert!(
        new.is_empty(),
        "files outside src/commands/ and src/main.rs that use anyhow and are not in \
         ANYHOW_ALLOWED (give the module a typed error, thiserror is in Cargo.toml):{}",
        src_list(&new)
    );
    assert!(
        stale.is_empty(),
        "files in ANYHOW_ALLOWED (tests/integration/architecture/mod.rs) that no longer use \
         anyhow: take them off the list so it only shrinks:{}",
        src_list(&stale)
    );
}

/// Prints every list, pass or fail (what `scripts/arch-check.sh` shows), and checks
/// that the lists are of the whole crate: every check above passes on a src/ it could
/// not read, so each module lib.rs declares must be among the files read.
#[test]
fn all_lists_printed() {
    let sources = read_sources();
    let lib = sources.get("lib.rs").expect("src/lib.rs read");
    assert!(sources.contains_key("main.rs"), "src/main.rs read");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|m| m.strip_suffix(';'))
        .collect();
    assert!(modules.len() > 10, "lib.rs declares {modules:?}");
    let unread: Vec<&&str> = modules
        .iter()
        .filter(|m| {
            !sources.contains_key(&format!("{m}.rs"))
                && !sources.contains_key(&format!("{m}/mod.rs"))
        })
        .collect();
    assert!(unread.is_empty(), "modules of lib.rs not read: {unread:?}");
    let long: String = long_files(&sources)
        .iter()
        .map(|(f, n)| format!("\n  src/{f}: {n} lines"))
        .collect();
    println!("files over {MAX_LINES} lines:{long}");
    let cycles = find_cycles(&import_graph(&sources));
    println!("import circles:{}", cycle_list(&cycles));
    println!(
        "clap or commands::args outside the command layer:{}",
        src_list(&clap_users(&sources))
    );
    println!(
        "anyhow outside the command layer:{}",
        src_list(&anyhow_users(&sources))
    );
}
