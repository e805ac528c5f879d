//! `write --iodepth` and its flush interval, kept apart so `args.rs` stays within its
//! size: the io_uring engine's options (docs/depth.md).

use crate::units::parse_duration;
use clap::Args;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct DepthArgs {
    /// Writes in flight per stream, on io_uring (1 = one synchronous write at a time).
    /// A flush covers the writes that completed before it was submitted; see
    /// docs/depth.md.
    #[arg(long, value_name = "N", default_value_t = 1, conflicts_with = "batch",
          value_parser = clap::value_parser!(u32).range(1..=crate::write::uring::MAX_IODEPTH as i64))]
    pub iodepth: u32,
    /// With --iodepth: submit a flush once N writes completed since the last one was
    /// submitted [default: the depth].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub flush_every: Option<u32>,
    /// With --iodepth: submit a flush at the latest this long after the first write it
    /// will cover completed (e.g. 500us, 10ms) [default: 10ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub flush_within: Option<Duration>,
}
