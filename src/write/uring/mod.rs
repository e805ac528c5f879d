//! The io_uring engine of `write --iodepth N`: each stream keeps up to N writes in flight
//! on its own ring and submits flushes (IORING_OP_FSYNC) while its writes keep flowing,
//! which the synchronous loop (`engine::io_loop`, one pwrite at a time) cannot do.
//!
//! Guarantee 1 holds as in the synchronous loop, by a different route: which records a
//! flush covers is decided by the flush-epoch rule (`super::epoch`): a successful flush
//! covers the writes whose completions were reaped before it was *submitted*. Acks leave
//! through the same gate (`Progress::ack`), so after any failure, in any stream, nothing
//! more is acknowledged. A stream that stops (a failure, Ctrl-C, the limit) first reaps
//! every write it still has in flight: the kernel may write from a buffer until its
//! completion is reaped, so a buffer is never reused or freed before that.
//!
//! Why a ring per stream, not one shared: each stream's I/O thread submits and reaps on
//! its own, without a lock between streams (as the synchronous streams share nothing
//! but the gate).

mod settings;
mod stream;

pub use settings::{DepthSettings, MAX_IODEPTH};

use super::engine::{AckSink, Progress, RecordBuffers, stream_loop};
use super::plan::Plan;
use crate::device::FlushMethod;
use io_uring::IoUring;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

/// io_uring cannot be used here; nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum UringRefused {
    #[error(
        "--iodepth needs io_uring, and this kernel has it disabled (/proc/sys/kernel/io_uring_disabled is 2): run without --iodepth (one write in flight per stream; --streams N for more), or set the sysctl to 0"
    )]
    DisabledBySysctl,
    #[error(
        "--iodepth needs io_uring, and setting up a ring was refused ({source}): {why}. Run without --iodepth (one write in flight per stream; --streams N for more)"
    )]
    Blocked {
        why: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--iodepth needs io_uring, and setting up a ring of {entries} entries failed: {source}. Run without --iodepth, or with a smaller one"
    )]
    Setup {
        entries: u32,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "--iodepth needs a target with a file descriptor (a block device or a file); this one has none (an in-process device). Use the synchronous engine (no --iodepth)"
    )]
    NoFileDescriptor,
}

/// What `/proc/sys/kernel/io_uring_disabled` says (absent before Linux 6.6: allowed).
fn disabled_by_sysctl() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|v| v.trim() == "2")
}

/// One ring per stream, each large enough for its writes and a flush: set up before the
/// witness hears of the run, so a kernel or container without io_uring refuses the run
/// while nothing of it exists anywhere.
pub struct Rings(Vec<IoUring>);

impl Rings {
    pub fn set_up(streams: u16, depth: &DepthSettings) -> Result<Rings, UringRefused> {
        if disabled_by_sysctl() {
            return Err(UringRefused::DisabledBySysctl);
        }
        // Room for every write in flight and the one flush; completions get twice that.
        let entries = (depth.iodepth + 1).next_power_of_two();
        let rings = (0..streams.max(1))
            .map(|_| IoUring::new(entries))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|source| refusal(entries, source))?;
        Ok(Rings(rings))
    }
}

fn refusal(entries: u32, source: std::io::Error) -> UringRefused {
    match source.raw_os_error() {
        Some(libc::EPERM) => UringRefused::Blocked {
            why: "io_uring is not permitted to this process (a container's seccomp profile, or kernel.io_uring_disabled = 1 and a user outside kernel.io_uring_group)",
            source,
        },
        Some(libc::ENOSYS) => UringRefused::Blocked {
            why: "this kernel has no io_uring (built without it, or a seccomp filter hides it)",
            source,
        },
        _ => UringRefused::Setup { entries, source },
    }
}

/// [`super::engine::run_streams_with`] on io_uring: every stream of `plan` writes through
/// `fd` (the target's handle) with `depth`, flushes by `flush`, and acknowledges to
/// `sink` until the plan's limits, `stop` or the first failure. `fd` None (a target
/// without one) is refused before anything is written.
#[allow(clippy::too_many_arguments)]
pub fn run_streams(
    fd: Option<BorrowedFd<'_>>,
    rings: Rings,
    plan: &Plan,
    depth: &DepthSettings,
    flush: FlushMethod,
    buffers: RecordBuffers,
    sink: &dyn AckSink,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<(), UringRefused> {
    let fd = fd.ok_or(UringRefused::NoFileDescriptor)?;
    let started = AtomicU64::new(0);
    let io = stream::Shared {
        fd,
        plan,
        depth: *depth,
        flush,
        sink,
        stop,
        progress,
        started: &started,
        t0: Instant::now(),
    };
    std::thread::scope(|s| {
        for ((stream, ring), uring) in (0..plan.streams).zip(buffers.rings).zip(rings.0) {
            let io = &io;
            s.spawn(move || {
                stream_loop(plan, progress, stream, ring, |pipe| {
                    stream::run(io, stream, uring, pipe)
                })
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests;
