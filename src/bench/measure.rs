//! The one timed loop every table uses: run an operation until a time has passed (and at
//! least a minimum count), time each call, and stop at the first error, keeping the error
//! so the row is marked instead of silently dropped or silently "fixed" (diskinfo stops
//! flushing when the flush is unsupported and goes on printing numbers; we do not).

use super::stats::Samples;
use serde::Serialize;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM (see `bench::run`): every timed loop stops at once, so the
/// command can still remove its own file and print what it measured.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// True once the user asked bench to stop.
pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// How a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every operation succeeded.
    Ok,
    /// The target could not be opened for this method (e.g. O_DSYNC refused).
    OpenFailed,
    /// A write returned an error; the figures cover the operations before it.
    WriteFailed,
    /// A flush returned an error or is unsupported; the figures cover the operations
    /// before it and must not be read as flush latency.
    FlushFailed,
    /// A read returned an error.
    ReadFailed,
}

impl Status {
    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }
    /// Short mark for text tables.
    pub fn mark(self) -> &'static str {
        match self {
            Status::Ok => "",
            Status::OpenFailed => "OPEN FAILED",
            Status::WriteFailed => "WRITE FAILED",
            Status::FlushFailed => "FLUSH FAILED",
            Status::ReadFailed => "READ FAILED",
        }
    }
}

/// Why one operation failed.
#[derive(Debug)]
pub struct Failure {
    pub status: Status,
    pub what: &'static str,
    pub error: io::Error,
}

impl Failure {
    pub fn write(error: io::Error) -> Failure {
        Failure {
            status: Status::WriteFailed,
            what: "write",
            error,
        }
    }
    pub fn flush(error: io::Error) -> Failure {
        Failure {
            status: Status::FlushFailed,
            what: "flush",
            error,
        }
    }
    pub fn read(error: io::Error) -> Failure {
        Failure {
            status: Status::ReadFailed,
            what: "read",
            error,
        }
    }
    pub fn message(&self) -> String {
        let hint = match self.error.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) if self.status == Status::FlushFailed => {
                " (the target does not support this flush)"
            }
            _ => "",
        };
        format!("{}: {}{hint}", self.what, self.error)
    }
}

/// What one timed loop produced.
#[derive(Debug)]
pub struct Measured {
    pub samples: Samples,
    pub ios: u64,
    pub elapsed: Duration,
    pub status: Status,
    pub error: Option<String>,
}

/// Limits of one timed loop.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Keep going at least this long...
    pub time: Duration,
    /// ...and at least this many operations...
    pub min_ios: u64,
    /// ...but never more than this many.
    pub max_ios: u64,
}

/// Calls `op(i)` for i = 0, 1, ... within `limits`, timing each call.
pub fn timed(limits: Limits, mut op: impl FnMut(u64) -> Result<(), Failure>) -> Measured {
    let mut samples = Samples::with_capacity(1024);
    let start = Instant::now();
    let mut ios = 0u64;
    let mut status = Status::Ok;
    let mut error = None;
    while ios < limits.max_ios
        && !stopped()
        && (ios < limits.min_ios || start.elapsed() < limits.time)
    {
        let t0 = Instant::now();
        match op(ios) {
            Ok(()) => {
                samples.push(t0.elapsed());
                ios += 1;
            }
            Err(f) => {
                status = f.status;
                error = Some(f.message());
                break;
            }
        }
    }
    Measured {
        samples,
        ios,
        elapsed: start.elapsed(),
        status,
        error,
    }
}
