//! `plugpull bench`: the flush-latency fingerprint of a target, in the shape of the tables
//! people already compare (diskinfo -wS, pg_test_fsync, iozone -e, SQLIO), plus a reading
//! in plain words. Latency cannot prove a drive honest, but it says what to expect and
//! whether a power-cut test is urgent.
//!
//! The core ([`run_with`]) works on [`Device`](crate::device::Device)s obtained from a
//! [`TargetOpener`], so tests run it in-process against devices that sleep or count;
//! [`run`] is the command: safety checks, target preparation, identity, progress,
//! output.

pub mod config;
mod data;
pub mod durability;
pub mod iops;
pub mod measure;
pub mod methods;
pub mod output;
pub mod progress;
pub mod reading;
pub mod report;
pub mod stats;
pub mod sweep;
pub mod target;
pub mod tree;

use crate::device::identity::{DeviceIdentity, identify};
use crate::device::{DeviceError, FlushMethod};
pub use config::{BenchOptions, Config, Table};
pub use progress::Progress;
pub use report::{BenchReport, FORMAT, Settings};
pub use target::TargetOpener;

/// How a bench run that produced its tables ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchOutcome {
    /// Every row of every table completed.
    AllRowsOk,
    /// Some row's write or flush failed (marked in the tables).
    SomeRowsFailed,
}

/// Why bench produced no (or only partial) tables.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Target(#[from] target::BenchTargetError),
    #[error("opening the target for {}", .flush.name())]
    Opening {
        flush: FlushMethod,
        #[source]
        source: DeviceError,
    },
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("interrupted while preparing {}", .0.display())]
    InterruptedPreparing(std::path::PathBuf),
    #[error("interrupted: the tables above are partial")]
    Interrupted,
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The memory for the I/O buffers could not be had; the error says how much.
    #[error("allocating the benchmark's I/O buffers")]
    Buffers(#[source] std::io::Error),
}

/// How many progress steps the whole run of `cfg` has.
pub fn steps(cfg: &Config, sector_bytes: u32) -> u64 {
    let cells = cfg.iops.as_ref().map(|i| iops::cells(i).len()).unwrap_or(0);
    let on = |b: bool, n: usize| if b { n } else { 0 };
    (on(cfg.run_sweep, sweep::sizes(cfg, sector_bytes).len())
        + on(cfg.run_methods, methods::METHODS.len())
        + on(cfg.run_durability, durability::MODES.len())
        + cells) as u64
}

/// Where the report came from: for the report header and the reading's commands.
#[derive(Debug, Clone)]
pub struct TargetInfo {
    pub target: String,
    pub bench_path: String,
    pub is_dir: bool,
}

/// Runs every table against devices from `opener` and reads the result.
pub fn run_with(
    opener: &dyn TargetOpener,
    id: &DeviceIdentity,
    cfg: &Config,
    info: &TargetInfo,
    pb: &Progress,
) -> Result<BenchReport, BenchError> {
    let started_at = chrono::Local::now().to_rfc3339();
    let sweep = if cfg.run_sweep {
        let dev = opener
            .open(cfg.sweep_flush)
            .map_err(|source| BenchError::Opening {
                flush: cfg.sweep_flush,
                source,
            })?;
        sweep::run(dev.as_ref(), cfg, pb).map_err(BenchError::Buffers)?
    } else {
        vec![]
    };
    let methods = if cfg.run_methods {
        methods::run(opener, cfg, pb).map_err(BenchError::Buffers)?
    } else {
        vec![]
    };
    let durability = if cfg.run_durability {
        let method = match cfg.sweep_flush {
            FlushMethod::Fsync => FlushMethod::Fsync,
            _ => FlushMethod::Fdatasync,
        };
        let dev = opener.open(method)?;
        Some(durability::run(dev.as_ref(), method, cfg, pb).map_err(BenchError::Buffers)?)
    } else {
        None
    };

    let iops = match &cfg.iops {
        Some(ic) => {
            let dev = opener.open(FlushMethod::None)?;
            Some(iops::run(dev.as_ref(), cfg, ic, pb).map_err(BenchError::Buffers)?)
        }
        None => None,
    };
    let reading = reading::read(
        id,
        cfg.sweep_flush,
        &sweep,
        &methods,
        &info.target,
        info.is_dir,
    );
    Ok(BenchReport {
        format: FORMAT,
        tool_version: env!("CARGO_PKG_VERSION"),
        started_at,
        target: info.target.clone(),
        bench_path: info.bench_path.clone(),
        device: id.clone(),
        settings: Settings::of(cfg),
        sweep,
        methods,
        durability,
        iops,
        reading,
    })
}

/// The `plugpull bench` command: prepares the target, runs the tables, prints them.
pub fn run(o: &BenchOptions) -> Result<BenchReport, BenchError> {
    let size = o
        .size_bytes
        .unwrap_or(if o.quick { 128 << 20 } else { 1 << 30 });
    install_stop_handler();
    let t = target::prepare(&o.target, size, o.destroy_data_on.as_deref())?;
    if measure::stopped() {
        return Err(BenchError::InterruptedPreparing(t.path.clone()));
    }
    let id = identify(&t.path);
    let sector = id.logical_sector_bytes.unwrap_or(512).max(512);
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let cfg = Config::new(o, t.region_bytes, sector, seed);
    if !o.quiet && !o.json {
        eprintln!(
            "plugpull bench: {} ({}), seed {seed}",
            t.path.display(),
            crate::units::fmt_bytes(t.region_bytes)
        );
    }
    let pb = Progress::on_stderr(steps(&cfg, sector), o.quiet, o.json);
    let opener = t.opener(o.direct)?;
    let info = TargetInfo {
        target: o.target.display().to_string(),
        bench_path: t.path.display().to_string(),
        is_dir: t.is_dir,
    };
    let report = run_with(&opener, &id, &cfg, &info, &pb);
    pb.finish();
    drop(t); // removes bench's own file from a directory target
    report
}

/// The outcome of a bench whose report was shown: stopped by a signal (the rows done
/// are in the report), or whether every row completed.
pub fn outcome(report: &BenchReport) -> Result<BenchOutcome, BenchError> {
    if measure::stopped() {
        return Err(BenchError::Interrupted);
    }
    Ok(if report.all_ok() {
        BenchOutcome::AllRowsOk
    } else {
        BenchOutcome::SomeRowsFailed
    })
}

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    measure::STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Makes Ctrl-C (and SIGTERM) end the timed loops instead of the process, so a directory
/// target's file is still removed. A second Ctrl-C during cleanup is not special-cased.
fn install_stop_handler() {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(on_stop_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe, and
        // replaces no handler another part of this process relies on (bench is the
        // whole process).
        if let Err(e) = unsafe { sigaction(sig, &action) } {
            eprintln!("plugpull: warning: cannot catch {sig}: {e}");
        }
    }
}
