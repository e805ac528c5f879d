//! Test support (Cargo.toml's test-support feature, not in the shipped binary): a stream
//! that panics in the middle of a real `plugpull write`, so a test can run the command
//! itself and see what a bug in a stream thread does to it (the report, the acks the
//! witness got, the exit code). Why an environment variable: the test runs the binary,
//! and no flag of the shipped command line should exist for it.

use super::plan::Plan;
use crate::device::Device;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `STREAM:N`: stream STREAM panics at its N-th write (1-based).
pub const PANIC_AT_WRITE: &str = "PLUGPULL_TEST_PANIC_AT_WRITE";

/// The panic's message.
pub const PANIC_TEXT: &str = "a bug in the write path (PLUGPULL_TEST_PANIC_AT_WRITE)";

/// The target, whose writes panic as [`PANIC_AT_WRITE`] asks (all of them pass through
/// when it is not set).
pub struct PanicAtWrite<D> {
    inner: D,
    /// The panicking stream's share of the region, [start, end), and the write to panic at.
    at: Option<(u64, u64, u64)>,
    writes: AtomicU64,
}

impl<D: Device> PanicAtWrite<D> {
    pub fn from_env(inner: D, plan: &Plan) -> PanicAtWrite<D> {
        let at = std::env::var(PANIC_AT_WRITE).ok().map(|v| {
            let parsed = v
                .split_once(':')
                .and_then(|(s, n)| Some((s.parse::<u64>().ok()?, n.parse::<u64>().ok()?)));
            let (stream, n) =
                parsed.unwrap_or_else(|| panic!("{PANIC_AT_WRITE}={v}: expected STREAM:N"));
            let start = plan.region_offset + stream * plan.share_bytes();
            (start, start + plan.share_bytes(), n)
        });
        PanicAtWrite {
            inner,
            at,
            writes: AtomicU64::new(0),
        }
    }
}

impl<D: Device> Device for PanicAtWrite<D> {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        self.inner.logical_block_bytes()
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some((start, end, n)) = self.at
            && (start..end).contains(&offset)
            && self.writes.fetch_add(1, Relaxed) + 1 == n
        {
            panic!("{PANIC_TEXT}");
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
}

/// `STREAM:N`: on the io_uring engine, stream STREAM's N-th write (1-based) is submitted
/// on an invalid descriptor, so the kernel fails it (EBADF) in the middle of a deep
/// queue, with the writes around it in flight: a failing write at depth, which no real
/// target produces on demand.
pub const URING_FAIL_AT_WRITE: &str = "PLUGPULL_TEST_URING_FAIL_AT_WRITE";

/// The write [`URING_FAIL_AT_WRITE`] names for `stream` (its 1-based number), if any.
pub fn uring_fail_at_write(stream: u16) -> Option<u64> {
    let v = std::env::var(URING_FAIL_AT_WRITE).ok()?;
    let parsed = v
        .split_once(':')
        .and_then(|(s, n)| Some((s.parse::<u16>().ok()?, n.parse::<u64>().ok()?)));
    let (s, n) = parsed.unwrap_or_else(|| panic!("{URING_FAIL_AT_WRITE}={v}: expected STREAM:N"));
    (s == stream).then_some(n)
}
