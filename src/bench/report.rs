//! The bench result as one value: what was measured, on what, and the reading. Why its
//! own file: the text output and the JSON (docs/bench.md) both render it, and the run
//! builds it, so it sits below both.

use super::config::Config;
use super::{durability, iops, methods, reading, sweep};
use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use serde::Serialize;

/// The JSON format name and version; bump the number on any incompatible change.
pub const FORMAT: &str = "plugpull-bench/1";

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

impl Settings {
    /// The settings of `cfg` as the report states them.
    pub(super) fn of(cfg: &Config) -> Settings {
        Settings {
            flush_method: cfg.sweep_flush,
            direct: cfg.direct,
            quick: cfg.quick,
            region_offset_bytes: cfg.region_offset_bytes,
            region_bytes: cfg.region_bytes,
            time_per_size_s: cfg.time_per_size.as_secs_f64(),
            method_time_s: cfg.method_time.as_secs_f64(),
            iops_threads: cfg.iops.as_ref().map(|i| i.threads),
            seed: cfg.seed,
        }
    }
}

/// The whole result; serialised as is for `--json` (documented in docs/bench.md).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
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

impl BenchReport {
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
