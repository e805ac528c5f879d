//! How a command ends: its exit code (one place, documented in README.md) and, when it
//! failed, the one error line. Domain modules return typed errors and outcomes; each
//! `commands/<cmd>.rs` maps them to these codes.

use std::error::Error;

/// verify: every acknowledged record intact (or legitimately superseded).
pub const PASS: i32 = 0;
/// verify: at least one acknowledged record lost, torn, corrupt, stale or misplaced.
pub const FAIL: i32 = 1;
/// Any command: usage error or tool error (bad flags, unreachable witness, refused target).
pub const ERROR: i32 = 2;
/// verify: no verdict possible (no acks for the run; or the ack log is damaged or cannot
/// prove it is whole, and the acks it holds show no loss).
pub const INCONCLUSIVE: i32 = 3;
/// write: the target failed mid-run (I/O error: what a power cut looks like).
pub const TARGET_FAILED: i32 = 4;
/// write, verify: interrupted by Ctrl-C (SIGINT), 128 + 2 as shells report it.
pub const INTERRUPTED: i32 = 130;
/// verify, replay, fetch: stopped by SIGTERM, 128 + 15 as shells report it.
pub const TERMINATED: i32 = 143;

/// An error from another module kept whole, its chain of causes intact, where the
/// module passing it on does not name the type (the witness client's, the key file's).
pub type BoxedError = Box<dyn Error + Send + Sync + 'static>;

/// The error and its causes joined by ": " (what the command layer's `{:#}` prints), so a
/// message built from a typed error reads as it always did.
pub fn error_chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// Prints the error line of a failed command on stderr.
pub fn print_error(e: &(dyn Error + 'static)) {
    eprintln!("plugpull: error: {}", error_chain(e));
}
