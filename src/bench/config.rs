//! What a bench run measures: the options (what the user asks for, with the command
//! line's defaults) and the [`Config`] the tables run with (the options resolved against
//! the target's size and sector size). Why two: tests and other callers build options
//! directly, without a command line, and the resolution (quick mode, which tables, the
//! sweep's range) is written once.

use super::target;
use crate::device::FlushMethod;
use crate::units::SizeRange;
use std::path::PathBuf;
use std::time::Duration;

/// The tables of `plugpull bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Sync-write sweep (diskinfo -wS).
    Sweep,
    /// Flush-method table (pg_test_fsync).
    Methods,
    /// Durability cost (iozone -e).
    Durability,
    /// IOPS table (SQLIO).
    Iops,
}

/// How the IOPS table picks offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Sequential,
    Random,
}

/// What the IOPS table does at each offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Read,
    Write,
}

impl Pattern {
    /// Every pattern, in table order.
    pub const ALL: [Pattern; 2] = [Pattern::Sequential, Pattern::Random];
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 2] = [Op::Read, Op::Write];
}

/// Settings of the IOPS table.
#[derive(Debug, Clone)]
pub struct IopsConfig {
    pub block_sizes: Vec<u64>,
    /// Which operations and patterns to run (all four combinations by default).
    pub ops: Vec<Op>,
    pub patterns: Vec<Pattern>,
    /// Threads, each with one synchronous I/O in flight.
    pub threads: usize,
    pub time_per_cell: Duration,
}

/// Everything `bench` is asked to do; [`Default`] is what the command line defaults to.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// A block device, a file, or a directory (bench then uses its own file in it).
    pub target: PathBuf,
    /// Bytes of the target to use for random offsets [default: 1G, 128M with quick].
    pub size_bytes: Option<u64>,
    /// The flush after each write of the sweep.
    pub flush: FlushMethod,
    /// O_DIRECT (true) or through the page cache.
    pub direct: bool,
    /// Time per size in the sweep (and per row of the other tables).
    pub time_per_size: Option<Duration>,
    /// Sizes of the sweep, smallest-largest, doubling [default: sector size-8M].
    pub sweep_sizes: Option<SizeRange>,
    /// Whole run in about 10 seconds.
    pub quick: bool,
    /// Also run the IOPS table.
    pub iops: bool,
    /// Run only these tables; empty: sweep, methods, durability and, with `iops`, iops.
    pub only: Vec<Table>,
    pub block_sizes: Vec<u64>,
    pub iops_ops: Vec<Op>,
    pub iops_patterns: Vec<Pattern>,
    /// Threads (queue depth) for the IOPS table.
    pub threads: usize,
    /// Seed for offsets and data (random if None).
    pub seed: Option<u64>,
    /// The path the user named for destruction (must be the target itself).
    pub destroy_data_on: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    pub json: bool,
    /// No progress bar.
    pub quiet: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            target: PathBuf::new(),
            size_bytes: None,
            flush: FlushMethod::Fdatasync,
            direct: true,
            time_per_size: None,
            sweep_sizes: None,
            quick: false,
            iops: false,
            only: vec![],
            block_sizes: vec![4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10],
            iops_ops: Op::ALL.to_vec(),
            iops_patterns: Pattern::ALL.to_vec(),
            threads: 1,
            seed: None,
            destroy_data_on: None,
            json: false,
            quiet: false,
        }
    }
}

/// Everything the core needs to know; built from [`BenchOptions`] by [`Config::new`].
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
    pub iops: Option<IopsConfig>,
    pub seed: u64,
    pub quick: bool,
}

impl Config {
    /// Settings for the options `a` on a region of `region_bytes` whose device accepts
    /// direct I/O in units of `sector_bytes`.
    pub fn new(a: &BenchOptions, region_bytes: u64, sector_bytes: u32, seed: u64) -> Config {
        let t = a.time_per_size.unwrap_or(if a.quick {
            Duration::from_millis(150)
        } else {
            Duration::from_secs(1)
        });
        let (min, max) = a
            .sweep_sizes
            .map(|r| (r.min, r.max))
            .unwrap_or((sector_bytes as u64, 8 << 20));
        let wants = |t: Table| {
            if a.only.is_empty() {
                t != Table::Iops || a.iops
            } else {
                a.only.contains(&t)
            }
        };
        Config {
            run_sweep: wants(Table::Sweep),
            run_methods: wants(Table::Methods),
            run_durability: wants(Table::Durability),
            region_offset_bytes: target::REGION_OFFSET_BYTES,
            region_bytes,
            sweep_flush: a.flush,
            direct: a.direct,
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
            iops: wants(Table::Iops).then(|| IopsConfig {
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
}
