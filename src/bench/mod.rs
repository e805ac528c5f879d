//! `plugpull bench`: the flush-latency fingerprint of a target, in the shape of the tables
//! people already compare (diskinfo -wS, pg_test_fsync, iozone -e, SQLIO), plus a reading
//! in plain words. Latency cannot prove a drive honest, but it says what to expect and
//! whether a power-cut test is urgent.
//!
//! The core ([`run_with`]) works on [`Device`]s obtained from an [`Opener`], so tests run
//! it in-process against devices that sleep or count; [`run`] is the command: safety
//! checks, target preparation, identity, progress bar, output.

pub mod durability;
pub mod iops;
pub mod measure;
pub mod methods;
pub mod output;
pub mod reading;
pub mod stats;
pub mod sweep;
pub mod target;

use crate::commands::args::{BenchArgs, BenchTable};
use crate::device::identity::{DeviceIdentity, identify};
use crate::device::{Device, FlushMethod};
use crate::exit;
use crate::rng::Rng;
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::time::Duration;

/// The JSON format name and version; bump the number on any incompatible change.
pub const FORMAT: &str = "plugpull-bench/1";

/// Opens the target for a given flush method. Bench needs several opens (O_DSYNC is an
/// open flag), so it takes an opener rather than one device.
pub trait Opener {
    fn open(&self, flush: FlushMethod) -> Result<Box<dyn Device>>;
}

/// Everything the core needs to know; built from the command line by [`Config::new`].
#[derive(Debug, Clone)]
pub struct Config {
    /// Where bench data starts on the device.
    pub region_offset_bytes: u64,
    /// Bytes from there that bench may write.
    pub region_bytes: u64,
    /// The flush after each sweep write.
    pub sweep_flush: FlushMethod,
    /// Informational: whether the opener uses O_DIRECT.
    pub direct: bool,
    pub sweep_min_bytes: u64,
    pub sweep_max_bytes: u64,
    pub time_per_size: Duration,
    /// Every timed row does at least this many operations, however slow.
    pub min_ios: u64,
    pub method_write_bytes: u64,
    pub method_time: Duration,
    pub durability_record_bytes: u64,
    pub durability_total_bytes: u64,
    /// The flush-every-record row stops after this long.
    pub durability_max_time: Duration,
    /// Which tables run (the IOPS table runs when `iops` is set).
    pub run_sweep: bool,
    pub run_methods: bool,
    pub run_durability: bool,
    pub iops: Option<iops::IopsConfig>,
    pub seed: u64,
    pub quick: bool,
}

impl Config {
    /// Settings for the command line `a` on a region of `region_bytes` whose device
    /// accepts direct I/O in units of `sector_bytes`.
    pub fn new(a: &BenchArgs, region_bytes: u64, sector_bytes: u32, seed: u64) -> Config {
        let t = a.time_per_size.unwrap_or(if a.quick {
            Duration::from_millis(150)
        } else {
            Duration::from_secs(1)
        });
        let (min, max) = a
            .sweep_sizes
            .map(|r| (r.min, r.max))
            .unwrap_or((sector_bytes as u64, 8 << 20));
        let wants = |t: BenchTable| {
            if a.only.is_empty() {
                t != BenchTable::Iops || a.iops
            } else {
                a.only.contains(&t)
            }
        };
        Config {
            run_sweep: wants(BenchTable::Sweep),
            run_methods: wants(BenchTable::Methods),
            run_durability: wants(BenchTable::Durability),
            region_offset_bytes: target::REGION_OFFSET_BYTES,
            region_bytes,
            sweep_flush: a.flush,
            direct: !a.no_direct,
            sweep_min_bytes: min.max(sector_bytes as u64),
            sweep_max_bytes: max,
            time_per_size: t,
            min_ios: 3,
            method_write_bytes: 8 << 10,
            method_time: if a.quick && a.time_per_size.is_none() {
                Duration::from_millis(250)
            } else {
                t
            },
            durability_record_bytes: 1 << 20,
            durability_total_bytes: if a.quick { 32 << 20 } else { 256 << 20 },
            durability_max_time: (t * 2).max(Duration::from_millis(300)),
            iops: wants(BenchTable::Iops).then(|| iops::IopsConfig {
                block_sizes: a.block_sizes.clone(),
                ops: a.iops_ops.clone(),
                patterns: a.iops_patterns.clone(),
                threads: a.threads.max(1),
                time_per_cell: if a.quick && a.time_per_size.is_none() {
                    Duration::from_millis(100)
                } else {
                    t
                },
            }),
            seed,
            quick: a.quick,
        }
    }

    /// How many progress steps the whole run has.
    pub fn steps(&self, sector_bytes: u32) -> u64 {
        let cells = self
            .iops
            .as_ref()
            .map(|i| iops::cells(i).len())
            .unwrap_or(0);
        let on = |b: bool, n: usize| if b { n } else { 0 };
        (on(self.run_sweep, sweep::sizes(self, sector_bytes).len())
            + on(self.run_methods, methods::METHODS.len())
            + on(self.run_durability, durability::MODES.len())
            + cells) as u64
    }
}

/// The settings as reported.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub flush_method: FlushMethod,
    pub direct: bool,
    pub quick: bool,
    pub region_offset_bytes: u64,
    pub region_bytes: u64,
    pub time_per_size_s: f64,
    pub method_time_s: f64,
    pub iops_threads: Option<usize>,
    pub seed: u64,
}

/// The whole result; serialised as is for `--json` (documented in docs/bench.md).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Always [`FORMAT`].
    pub format: &'static str,
    pub tool_version: &'static str,
    pub started_at: String,
    /// What the user gave.
    pub target: String,
    /// The file or device bench wrote to.
    pub bench_path: String,
    pub device: DeviceIdentity,
    pub settings: Settings,
    pub sweep: Vec<sweep::SweepRow>,
    pub methods: Vec<methods::MethodRow>,
    /// Null when the table was not run (`--only`).
    pub durability: Option<durability::Durability>,
    pub iops: Option<Vec<iops::IopsRow>>,
    pub reading: reading::Reading,
}

impl Report {
    /// True if every row of every table completed without an error.
    pub fn all_ok(&self) -> bool {
        self.sweep.iter().all(|r| r.status.is_ok())
            && self.methods.iter().all(|r| r.status.is_ok())
            && self
                .durability
                .iter()
                .flat_map(|d| &d.rows)
                .all(|r| r.status.is_ok())
            && self.iops.iter().flatten().all(|r| r.status.is_ok())
    }
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
    opener: &dyn Opener,
    id: &DeviceIdentity,
    cfg: &Config,
    info: &TargetInfo,
    pb: &ProgressBar,
) -> Result<Report> {
    let started_at = chrono::Local::now().to_rfc3339();
    let sweep = if cfg.run_sweep {
        let dev = opener
            .open(cfg.sweep_flush)
            .with_context(|| format!("opening the target for {}", cfg.sweep_flush.name()))?;
        sweep::run(dev.as_ref(), cfg, pb)
    } else {
        vec![]
    };
    let methods = if cfg.run_methods {
        methods::run(opener, cfg, pb)
    } else {
        vec![]
    };
    let durability = if cfg.run_durability {
        let method = match cfg.sweep_flush {
            FlushMethod::Fsync => FlushMethod::Fsync,
            _ => FlushMethod::Fdatasync,
        };
        let dev = opener.open(method)?;
        Some(durability::run(dev.as_ref(), method, cfg, pb))
    } else {
        None
    };

    let iops = match &cfg.iops {
        Some(ic) => {
            let dev = opener.open(FlushMethod::None)?;
            Some(iops::run(dev.as_ref(), cfg, ic, pb))
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
    Ok(Report {
        format: FORMAT,
        tool_version: env!("CARGO_PKG_VERSION"),
        started_at,
        target: info.target.clone(),
        bench_path: info.bench_path.clone(),
        device: id.clone(),
        settings: Settings {
            flush_method: cfg.sweep_flush,
            direct: cfg.direct,
            quick: cfg.quick,
            region_offset_bytes: cfg.region_offset_bytes,
            region_bytes: cfg.region_bytes,
            time_per_size_s: cfg.time_per_size.as_secs_f64(),
            method_time_s: cfg.method_time.as_secs_f64(),
            iops_threads: cfg.iops.as_ref().map(|i| i.threads),
            seed: cfg.seed,
        },
        sweep,
        methods,
        durability,
        iops,
        reading,
    })
}

/// The `plugpull bench` command.
pub fn run(a: BenchArgs) -> Result<i32> {
    let size = a.size.unwrap_or(if a.quick { 128 << 20 } else { 1 << 30 });
    install_stop_handler();
    let t = target::prepare(&a.target, size, a.destroy_data_on.as_deref())?;
    if measure::stopped() {
        anyhow::bail!("interrupted while preparing {}", t.path.display());
    }
    let id = identify(&t.path);
    let sector = id.logical_sector_bytes.unwrap_or(512).max(512);
    let seed = a.seed.unwrap_or_else(crate::rng::random_seed);
    let cfg = Config::new(&a, t.region_bytes, sector, seed);
    if !a.quiet && !a.json {
        eprintln!(
            "plugpull bench: {} ({}), seed {seed}",
            t.path.display(),
            crate::units::fmt_bytes(t.region_bytes)
        );
    }
    let pb = progress_bar(cfg.steps(sector), a.quiet);
    let opener = target::FileOpener {
        path: t.path.clone(),
        direct: !a.no_direct,
    };
    let info = TargetInfo {
        target: a.target.display().to_string(),
        bench_path: t.path.display().to_string(),
        is_dir: t.is_dir,
    };
    let report = run_with(&opener, &id, &cfg, &info, &pb);
    pb.finish_and_clear();
    drop(t); // removes bench's own file from a directory target
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", output::text(&report));
    }
    if measure::stopped() {
        anyhow::bail!("interrupted: the tables above are partial");
    }
    Ok(if report.all_ok() {
        exit::PASS
    } else {
        exit::TARGET_FAILED
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

/// A progress bar on stderr, hidden when stderr is not a terminal or with --quiet.
fn progress_bar(steps: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    pb
}

/// Fills `buf` with incompressible bytes, so a compressing controller cannot cheat.
pub(crate) fn fill_random(buf: &mut [u8], rng: &mut Rng) {
    for chunk in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}
