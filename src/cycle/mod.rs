//! One power-cut cycle, written once: write stamped records with acks flowing, cut the
//! power while the writer runs, power on, and judge the drive against the acks (or
//! report it dead).
//!
//! Why a module of its own: the demo, the soak, the drive-only campaign and the
//! whole-host agent all run this cycle, and each used to spell it out. What differs
//! between them is named here and passed in, not copied:
//! - where the drive is: a `Device` the caller opens (a simulated drive, a drive found by
//!   serial, the agent's target after boot);
//! - how the cut comes: [`write_until_cut`] runs the writer and hands the caller's `cut`
//!   the live [`Progress`]; the cut sleeps a while (demo), waits for acks and throws a
//!   switch (campaign), tells the controller and waits to die (agent), or does nothing
//!   because the drive trips itself at a chosen operation (soak);
//! - how power comes back and the drive is found again: the caller's, ending in
//!   [`judge`] with the drive or the reason it did not come back; a run fetched from the
//!   witness is judged from a temporary file instead ([`fetched`]), so a long run's acks
//!   are never held.

pub mod fetched;

use crate::device::Device;
use crate::model::RunLog;
use crate::rng::Rng;
use crate::verify::report::Report;
use crate::write::engine::{AckSink, NoBufferMemory, Progress, RecordBuffers, run_streams_with};
use crate::write::plan::Plan;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the writer does once the cut returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterCut {
    /// Stop it (it would notice the cut by itself through I/O errors; this makes sure).
    StopWriter,
    /// Let it write until it fails: the drive's own cut or the host's death ends it.
    LetItRun,
}

/// Runs the writer of `plan` on `dev`, acks going to `sink`, and on this thread calls
/// `cut` with the writer's live progress. Returns what the cut returned and the writer's
/// final progress, once the writer has ended; or, without calling `cut`, why the writer's
/// record buffers could not be allocated (nothing was written).
pub fn write_until_cut<T>(
    dev: &dyn Device,
    plan: &Plan,
    sink: &dyn AckSink,
    cut: impl FnOnce(&Progress) -> (T, AfterCut),
) -> Result<(T, Progress), NoBufferMemory> {
    let buffers = RecordBuffers::allocate(plan, 1)?;
    let progress = Progress::default();
    let stop = AtomicBool::new(false);
    let outcome = std::thread::scope(|s| {
        s.spawn(|| run_streams_with(dev, plan, buffers, sink, &stop, &progress));
        let (outcome, after) = cut(&progress);
        if after == AfterCut::StopWriter {
            stop.store(true, Ordering::SeqCst);
        }
        outcome
    });
    Ok((outcome, progress))
}

/// Why the acks never started flowing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoAcks {
    #[error("the writer failed before any ack: {during} failed: {error}")]
    WriterFailed { during: &'static str, error: String },
    #[error("no acks within {0:?}: the writer is not getting flushes through")]
    Timeout(Duration),
}

/// Waits until the writer has `min_acks` acks confirmed; fails when the writer fails first
/// or, with a `timeout`, when it passes.
pub fn wait_for_acks(
    progress: &Progress,
    min_acks: u64,
    timeout: Option<Duration>,
) -> Result<(), NoAcks> {
    let t0 = Instant::now();
    while progress.records_acked() < min_acks {
        if let Some(f) = progress.failure() {
            return Err(NoAcks::WriterFailed {
                during: f.during,
                error: f.error,
            });
        }
        if let Some(t) = timeout.filter(|t| t0.elapsed() > *t) {
            return Err(NoAcks::Timeout(t));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// The random wait between acks flowing and the cut, in `min..=max`, drawn from the
/// cycle's seed (so a cycle's cut moment replays with its seed).
pub fn cut_delay(seed: u64, min: Duration, max: Duration) -> Duration {
    let mut rng = Rng::new(seed);
    if max > min {
        min + Duration::from_nanos(rng.below((max - min).as_nanos() as u64 + 1))
    } else {
        min
    }
}

/// After power-on: verify the drive against the acks of `log`, or, when it did not come
/// back (`Err` says why), the dead-device report; judged from a temporary log file as a
/// fetched run is ([`fetched::FetchedRun::judge`]), so a cycle whose acks this process
/// holds takes the path and the memory of every other cycle.
pub fn judge(
    drive: Result<Arc<dyn Device>, String>,
    log: &RunLog,
    read_timeout: Duration,
) -> std::io::Result<Report> {
    let run = fetched::FetchedRun::from_acks(&log.descriptor, &log.acks, &log.events)
        .map_err(std::io::Error::other)?;
    Ok(run.judge(drive, read_timeout).report)
}
