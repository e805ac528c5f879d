#!/usr/bin/env bash
# The architecture check, by hand: prints the files of src/ over 600 lines
# (with their line counts), the import circles between files (as path lists), and the
# files outside the command layer (src/commands/, src/main.rs) that mention clap or
# commands::args or use anyhow; then checks the rules and exits non-zero if one fails.
# The rules, and the allowlist of files that may still use anyhow, are in
# tests/integration/architecture/mod.rs, which `cargo test` runs too.
#
# Usage: scripts/arch-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# One thread: the lists come out whole and in order, the `all_lists_printed` test first.
RUST_BACKTRACE=0 exec cargo test --quiet --test integration -- --nocapture --test-threads=1 architecture::
