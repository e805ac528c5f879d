//! Exit codes, one place, documented in README.md.

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

/// An error that carries its own exit code up to main.
#[derive(Debug)]
pub struct ExitCode(pub i32, pub String);

impl std::fmt::Display for ExitCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}
impl std::error::Error for ExitCode {}
