//! The arguments of the commands that run the simulated drive (`simdrive`, `demo`,
//! `soak`), kept apart so `args.rs` stays one screenful per command family.

use crate::units::{parse_duration as duration, parse_size as size};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct SimdriveArgs {
    /// Directory to mount the simulated drive on; it shows one file, `disk.img`.
    pub mountpoint: PathBuf,
    /// Backing file holding the drive's durable image (created if missing).
    #[arg(long)]
    pub backing: PathBuf,
    /// Size of the simulated drive (used when the backing file is created).
    #[arg(long, allow_hyphen_values = true, value_parser = size, default_value = "256M")]
    pub size: u64,
    /// Fault profile (see docs/fault-model.md).
    #[arg(long, default_value = "honest")]
    pub profile: String,
    /// Seed of the drive's faults (random if not given; printed at start).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to write the oracle log of injected faults (JSON lines).
    #[arg(long)]
    pub oracle: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Simulated drive profile: honest, lying, ... (see docs/fault-model.md).
    #[arg(long, default_value = "honest")]
    pub profile: String,
    /// How long the writer runs before the cut (default 3s; with --fleet, 1s a cut).
    #[arg(long, value_parser = duration)]
    pub duration: Option<Duration>,
    /// Seed of the writer and the drive's faults (random if not given; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the verify report of the cycle (with --fleet: the matrix) as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Three simulated drives (with power-loss protection, honest with a volatile cache,
    /// lying about flushes) cut together, cut after cut, and compared in one matrix
    /// (docs/fleet.md). Exit 1 when any drive lost acknowledged writes.
    #[arg(long, conflicts_with = "profile")]
    pub fleet: bool,
    /// With --fleet: the power cuts given to every drive.
    #[arg(long, requires = "fleet", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub cuts: u32,
}

#[derive(Args, Debug, Clone)]
pub struct SoakArgs {
    /// Cycles of each kind (honest and faulty).
    #[arg(long, default_value_t = 200)]
    pub cycles: u64,
    /// First seed; cycle i uses seed + i (random if not given; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run only honest or only faulty cycles.
    #[arg(long, value_name = "honest|faulty")]
    pub only: Option<String>,
    /// Print the expected and found findings of every failing cycle in full.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the totals as JSON on stdout (`plugpull-soak/1`, docs/fault-model.md).
    #[arg(long)]
    pub json: bool,
}
