//! Attacks on plugpull's promises about running out of memory, about Ctrl-C and
//! SIGTERM, about names planted in TMPDIR, and about a writer thread that panics: each
//! test is the input, fault or timing that would break one, run through the binary.
//!
//! - [`memory`]: verify, replay and a cycle without the memory for their read buffers
//!   (test support's `PLUGPULL_TEST_NO_READ_BUFFERS`), every way they read.
//! - [`signals`]: SIGINT and SIGTERM while a run is fetched or judged, and what each
//!   command leaves in TMPDIR and beside its output.
//! - [`planted`]: a file or a symlink another user put first at a name plugpull makes.
//! - [`panics`]: a stream that panics (`PLUGPULL_TEST_PANIC_AT_WRITE`), early and late,
//!   with several streams and a batch.

mod memory;
mod panics;
mod planted;
mod signals;

use crate::common::Run;
use std::path::Path;
use std::process::Command;

/// Runs `c` to its end: its exit code and output.
fn run_cmd(c: &mut Command) -> Run {
    let out = c.output().expect("run plugpull");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
