//! `plugpull write`: stream records to the target, flush, acknowledge to the witness.
//!
//! Setup order matters: open the target once and check everything that can be checked
//! before touching anything (the safety rules on that handle, sizes, free space:
//! `target`), then reach the witness (address, handshake), so a run never writes without
//! someone keeping its promises and a witness that is down leaves nothing behind; only
//! then create the file (O_EXCL, marked as plugpull's, see `device::marker`) or take over
//! the handle checked before the handshake (never the name again), and make the file's
//! allocation durable before the first ack. A file
//! created by an attempt that fails or is interrupted before its first record is removed
//! again.

mod clock;
pub mod engine;
pub mod epoch;
mod events;
#[cfg(feature = "test-support")]
pub mod fault;
mod pipe;
pub mod plan;
mod prepare;
mod ring;
mod stamp;
mod status;
pub mod summary;
pub mod target;
pub mod uring;

use crate::device::{FlushMethod, OpenOptions, identity, safety};
use crate::model::{Ack, Placement, RunDescriptor, WriterSettings};
use crate::record::RunId;
use crate::units::SizeRange;
use crate::witness::client::{AckSender, ClientOptions};
use engine::{AckSink, Progress, RecordBuffers, run_streams_with};
use plan::{Plan, PlanError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};
pub use summary::{AckedRecord, WriteSummary};
pub use target::{TargetError, TargetPlan, open_target, plan_target};

use crate::exit::BoxedError;

/// Everything `write` needs to know; the command line's `plugpull write` arguments.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// A block device or a file (created and preallocated if missing).
    pub target: PathBuf,
    /// The witness, HOST:PORT.
    pub witness: String,
    /// The witness's pre-shared key file.
    pub key_file: Option<PathBuf>,
    /// Bytes of the target to use (default: the whole device, or 1 GiB for a new file).
    pub size_bytes: Option<u64>,
    /// Where the region starts on the target.
    pub offset_bytes: u64,
    pub record_size: SizeRange,
    pub placement: Placement,
    /// Writer threads, each with an equal, disjoint share of the region.
    pub streams: u16,
    /// Records each stream writes before one flush covers them all (group commit).
    pub batch: usize,
    /// Writes in flight per stream on io_uring and the flush interval (`--iodepth`);
    /// None: the synchronous loop, one write at a time.
    pub depth: Option<uring::DepthSettings>,
    pub flush: FlushMethod,
    /// O_DIRECT (true) or through the page cache.
    pub direct: bool,
    pub duration: Option<Duration>,
    /// Stop after this many records (all streams together).
    pub count: Option<u64>,
    /// Seed for placement and sizes (random if None).
    pub seed: Option<u64>,
    /// The path the user named for destruction (must be `target` itself).
    pub destroy_data_on: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    pub json: bool,
    /// No status line, no progress lines (only errors and the summary's warnings).
    pub quiet: bool,
    /// Writes pause while this many acks are not yet durable at the witness.
    pub max_unconfirmed: usize,
}

/// How a run that started ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The limit was reached or SIGTERM stopped it (a service being stopped).
    Finished,
    /// Ctrl-C (SIGINT) stopped it; what was acknowledged is durable at the witness.
    Interrupted,
    /// A write or flush failed (what a power cut looks like); nothing more was acked.
    TargetFailed,
}

/// A run that could not start, or could not be ended cleanly.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The key file could not be read.
    #[error(transparent)]
    Key(BoxedError),
    /// The witness could not be reached or did not accept the run.
    #[error(transparent)]
    Witness(BoxedError),
    #[error("preparing {}", .target.display())]
    Preparing {
        target: PathBuf,
        #[source]
        source: TargetError,
    },
    /// The record buffers of the run could not be allocated; nothing was written.
    #[error(transparent)]
    NoBufferMemory(#[from] engine::NoBufferMemory),
    /// `--iodepth` asked for io_uring, which cannot be used here; nothing was written.
    #[error(transparent)]
    Uring(#[from] uring::UringRefused),
    #[error("interrupted before the first record; nothing was written to {}", .0.display())]
    InterruptedBeforeFirstRecord(PathBuf),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A stream thread panicked: plugpull's bug, not the target's failure. Every stream
    /// stopped, and nothing was acknowledged after it.
    #[error(
        "plugpull failed: a thread of stream {stream} {what}. This is a bug in plugpull, not a failure of the target; every stream stopped and nothing more was acknowledged ({} records were). Please report it with the message above",
        crate::units::thousands(*.acked)
    )]
    Internal {
        stream: u16,
        what: String,
        acked: u64,
    },
}

impl AckSink for AckSender {
    fn push(&self, ack: Ack) {
        AckSender::push(self, ack)
    }
    fn push_all(&self, acks: &[Ack]) {
        AckSender::push_all(self, acks)
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that set `STOP` (0: none): Ctrl-C ends with exit 130 as shells expect,
/// SIGTERM (a service stopped) as a run that reached its limit.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// After Ctrl-C, how long the writer waits for the witness to confirm what it was sent.
const CTRL_C_WITNESS_WAIT: Duration = Duration::from_secs(5);

/// Whether Ctrl-C (SIGINT) stopped this process's run.
pub fn interrupted_by_ctrl_c() -> bool {
    STOP_SIGNAL.load(Ordering::SeqCst) == libc::SIGINT
}

fn install_stop_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// `plugpull write`: plans, connects, prepares, runs the streams, reports.
pub fn run(o: &WriteOptions) -> Result<WriteOutcome, WriteError> {
    // From here on Ctrl-C stops the run cleanly, preallocation included.
    install_stop_handler();
    let mut tp = plan_target(
        &o.target,
        o.destroy_data_on.as_deref(),
        o.offset_bytes,
        o.size_bytes,
        OpenOptions {
            direct: o.direct,
            flush: o.flush,
        },
    )?;
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let plan = make_plan(o, &tp, seed);
    plan.validate()?;
    let ram = safety::ram_warning(&o.target);
    if let Some(w) = &ram {
        events::say(&format!("WARNING: {w}"));
    }
    let device = tp.identity();
    let mut descriptor = run_descriptor(&plan, device.clone(), o.flush, o.direct);
    let in_flight = match &o.depth {
        Some(d) => d.window(o.flush),
        None => o.batch.max(1),
    };
    descriptor.settings.max_records_unacked =
        Some(in_flight as u64 + o.max_unconfirmed.max(1) as u64);
    // Before the witness hears of the run: a run the writer cannot hold in memory, or
    // that asks for io_uring where it is blocked, is refused while nothing of it exists
    // anywhere.
    let rings = match &o.depth {
        Some(d) => Some(uring::Rings::set_up(plan.streams, d)?),
        None => None,
    };
    let per_flush = o.depth.map_or(o.batch, |d| d.iodepth as usize);
    let buffers = RecordBuffers::allocate(&plan, per_flush)?;
    let sender = connect(o, &descriptor)?;
    let dev = prepare(o, &mut tp)?;
    if !o.quiet {
        announce(o, &plan, &device);
    }
    install_stop_handler();
    let progress = Progress::default();
    let t0 = Instant::now();
    // On a terminal the status line shows the state; elsewhere a line per change does.
    let terminal = events::stderr_is_terminal();
    let status = (!o.quiet && terminal).then(|| status::StatusLine::start(o.max_unconfirmed));
    let watcher =
        (!o.quiet && !terminal).then(|| events::Watcher::new(o.max_unconfirmed, &o.witness));
    let streams_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        if let Some(st) = &status {
            s.spawn(|| st.run(&progress, &sender, t0));
        }
        if let Some(w) = &watcher {
            s.spawn(|| w.run(&sender));
        }
        // A stream paused at --max-unconfirmed waits inside the sender; on Ctrl-C or
        // SIGTERM release it, or the writer would ignore the signal while the witness is
        // away (the signal handler itself may not take locks).
        s.spawn(|| {
            while !streams_done.load(Ordering::SeqCst) {
                if STOP.load(Ordering::SeqCst) {
                    sender.release_pushers();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        match (rings, &o.depth) {
            (Some(rings), Some(d)) => {
                use std::os::fd::AsFd;
                // Both checked before the witness heard of the run: a FileDevice always
                // has a descriptor.
                let run = uring::run_streams(
                    Some(dev.as_fd()),
                    rings,
                    &plan,
                    d,
                    o.flush,
                    buffers,
                    &sender,
                    &STOP,
                    &progress,
                );
                run.expect("a file or block device has a descriptor");
            }
            _ => {
                #[cfg(feature = "test-support")]
                let dev = fault::PanicAtWrite::from_env(dev, &plan);
                run_streams_with(&dev, &plan, buffers, &sender, &STOP, &progress);
            }
        }
        streams_done.store(true, Ordering::SeqCst);
        if let Some(st) = &status {
            st.stop();
        }
        if let Some(w) = &watcher {
            w.stop();
        }
    });
    let elapsed = t0.elapsed();
    let failure = progress.failure();
    let interrupted = STOP.load(Ordering::SeqCst);
    sender.set_bye_reason(bye_reason(failure.as_ref(), interrupted));
    // Ctrl-C means "stop now": wait briefly for the witness, then report how far it got
    // rather than failing after the normal 30 s (the witness may be what is missing).
    let stats = if interrupted && interrupted_by_ctrl_c() && failure.is_none() {
        sender.finish_within(CTRL_C_WITNESS_WAIT)
    } else {
        sender
            .finish(Duration::from_secs(30))
            .map_err(|e| WriteError::Witness(e.into()))?
    };
    let end = summary::Ending {
        failure,
        interrupted,
        elapsed,
        stats,
    };
    let target = o.target.display().to_string();
    let engine = summary::EngineUsed::of(o.depth.as_ref(), o.flush);
    let summary = summary::summarize(&plan, &target, &progress, &end, ram.clone(), engine);
    summary::print_summary(&summary, o.json, o.quiet)?;
    if let Some(w) = &ram {
        events::say(&format!("WARNING: {w}"));
    }
    summary::warn_witness_behind(&end.stats, summary.records_acked);
    match &end.failure {
        Some(f) if f.is_internal() => Err(WriteError::Internal {
            stream: f.record.stream,
            what: f.error.clone(),
            acked: summary.records_acked,
        }),
        Some(f) => {
            summary::explain_target_failure(f, &summary, &target, &o.witness);
            Ok(WriteOutcome::TargetFailed)
        }
        None if interrupted && interrupted_by_ctrl_c() => {
            summary::explain_interruption(&summary, &end.stats, &target, &o.witness);
            Ok(WriteOutcome::Interrupted)
        }
        None => Ok(WriteOutcome::Finished),
    }
}

/// What the Bye tells the witness, so verify can tell a run the power cut from one
/// that ended by itself (`model::bye`).
fn bye_reason(failure: Option<&engine::Failure>, interrupted: bool) -> String {
    use crate::model::bye;
    let gone = |f: &engine::Failure| {
        f.raw_os_error
            .is_some_and(|e| crate::device::error::DRIVE_GONE_ERRNOS.contains(&e))
    };
    match failure {
        Some(f) => format!(
            "{}: {} of stream {} seq {} failed: {}",
            if gone(f) {
                bye::TARGET_FAILED
            } else {
                bye::WRITE_FAILED
            },
            f.during,
            f.record.stream,
            f.record.seq,
            f.error
        ),
        None if interrupted && interrupted_by_ctrl_c() => {
            format!("{}: Ctrl-C (SIGINT)", bye::STOPPED)
        }
        None if interrupted => format!("{}: SIGTERM", bye::STOPPED),
        None => format!("{}: it wrote what it was asked to", bye::FINISHED),
    }
}

/// The run's plan: a new run id, the region, record sizes aligned to what the device
/// accepts for direct I/O.
fn make_plan(o: &WriteOptions, tp: &TargetPlan, seed: u64) -> Plan {
    let align = if o.direct {
        (tp.logical_block_bytes as u64).max(512)
    } else {
        512
    };
    Plan {
        run: RunId::random(),
        region_offset: o.offset_bytes,
        region_bytes: tp.region_bytes,
        record_min: o.record_size.min,
        record_max: o.record_size.max,
        placement: o.placement,
        streams: o.streams,
        seed,
        align,
        count: o.count,
        duration: o.duration,
    }
}

/// Connects to the witness and hands it the run's descriptor (the handshake).
fn connect(o: &WriteOptions, descriptor: &RunDescriptor) -> Result<AckSender, WriteError> {
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| WriteError::Key(e.into()))?;
    AckSender::connect(
        &o.witness,
        descriptor,
        ClientOptions {
            key,
            max_unconfirmed: o.max_unconfirmed.max(1),
            ..ClientOptions::default()
        },
    )
    .map_err(|e| WriteError::Witness(e.into()))
}

/// Creates the target file or takes over the handle checked before the handshake; a file
/// created here is kept only when the run was not interrupted during preparation.
fn prepare(o: &WriteOptions, tp: &mut TargetPlan) -> Result<crate::device::FileDevice, WriteError> {
    let (dev, created) = tp.prepare(&STOP).map_err(|source| {
        // Ctrl-C during preallocation surfaces as an interrupted write: say what
        // happened (nothing written, the new file removed), not a preparation error.
        if STOP.load(Ordering::SeqCst) {
            WriteError::InterruptedBeforeFirstRecord(o.target.clone())
        } else {
            WriteError::Preparing {
                target: o.target.clone(),
                source,
            }
        }
    })?;
    if STOP.load(Ordering::SeqCst) {
        drop(created);
        return Err(WriteError::InterruptedBeforeFirstRecord(o.target.clone()));
    }
    if let Some(f) = created {
        f.keep();
    }
    Ok(dev)
}

/// The run's first line on stderr: what is written where, and how.
fn announce(o: &WriteOptions, plan: &Plan, device: &identity::DeviceIdentity) {
    events::say(&format!(
        "started run {} -> {} ({}), region {} at offset {}, {} stream(s){}, flush {}, {}, seed {}",
        plan.run,
        o.target.display(),
        describe(device),
        crate::units::fmt_bytes(plan.region_bytes),
        o.offset_bytes,
        o.streams,
        match &o.depth {
            Some(d) => format!(", {}", summary::EngineUsed::of(Some(d), o.flush).describe()),
            None if o.batch > 1 => format!(", {} records per flush", o.batch),
            None => String::new(),
        },
        o.flush.name(),
        if o.direct { "O_DIRECT" } else { "buffered" },
        plan.seed,
    ));
    if o.flush == FlushMethod::None {
        events::say(
            "--flush none is a control run: records are acknowledged without a flush and a cut is expected to lose some",
        );
    }
}

/// The run descriptor the witness keeps for `plan` on `device`.
pub fn run_descriptor(
    plan: &Plan,
    device: identity::DeviceIdentity,
    flush: FlushMethod,
    direct: bool,
) -> RunDescriptor {
    RunDescriptor::started_here(
        plan.run,
        device,
        WriterSettings {
            region_offset: plan.region_offset,
            region_bytes: plan.region_bytes,
            record_bytes_min: plan.record_min,
            record_bytes_max: plan.record_max,
            placement: plan.placement.name().into(),
            streams: plan.streams,
            flush,
            direct,
            seed: plan.seed,
            max_records_unacked: None,
        },
        None,
    )
}

fn describe(d: &identity::DeviceIdentity) -> String {
    let mut p = vec![d.kind.clone()];
    if let Some(disk) = &d.disk {
        p.push(format!("on {disk}"));
    }
    if let Some(m) = &d.model {
        p.push(m.clone());
    }
    if let Some(w) = &d.write_cache {
        p.push(format!("write cache: {w}"));
    }
    p.join(", ")
}

/// `plugpull write DIR`: the tree workload (`tree::write`) with this command's
/// Ctrl-C / SIGTERM handling.
pub fn tree_run(
    o: &crate::tree::write::TreeWriteOptions,
) -> Result<crate::tree::write::TreeWriteSummary, crate::tree::write::TreeWriteError> {
    install_stop_handler();
    crate::tree::write::run(o, &STOP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(errno: i32) -> engine::Failure {
        engine::Failure {
            during: "write",
            record: crate::record::RecordId {
                stream: 0,
                seq: 3,
                offset: 0,
                sectors: 8,
                write_time_ns: 1,
            },
            error: std::io::Error::from_raw_os_error(errno).to_string(),
            raw_os_error: Some(errno),
        }
    }

    /// Only the errors of a drive that is gone say "target failed" (cut evidence for
    /// verify); ENOSPC on a thin backing says the write failed, nothing more.
    #[test]
    fn only_a_gone_drive_is_a_failed_target_in_the_bye() {
        use crate::model::bye;
        for errno in crate::device::error::DRIVE_GONE_ERRNOS {
            assert!(bye_reason(Some(&failed(errno)), false).starts_with(bye::TARGET_FAILED));
        }
        for errno in [libc::ENOSPC, libc::EDQUOT, libc::EINVAL, libc::EROFS] {
            assert!(bye_reason(Some(&failed(errno)), false).starts_with(bye::WRITE_FAILED));
        }
        assert!(bye_reason(None, false).starts_with(bye::FINISHED));
    }
}
