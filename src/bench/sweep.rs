//! The sync-write sweep, after FreeBSD's `diskinfo -wS`: for each size from the sector
//! size doubling to 8 MiB, writes at random size-aligned offsets, each followed by the
//! chosen flush. At small sizes the flush dominates, so the first rows are the drive's
//! flush floor; at large sizes the rows become its sustained durable bandwidth.

use super::config::Config;
use super::data::fill_random;
use super::measure::{Failure, Limits, Status, timed};
use super::progress::Progress;
use super::stats::{LatencySummary, mb_per_s, per_s};
use crate::device::{AlignedBuf, Device, FlushMethod};
use crate::rng::Rng;
use serde::Serialize;
use std::io;

/// One size of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub size_bytes: u64,
    /// Write+flush pairs completed.
    pub ios: u64,
    pub elapsed_s: f64,
    /// Latency of one write plus its flush.
    #[serde(flatten)]
    pub latency: LatencySummary,
    pub ios_per_s: f64,
    pub throughput_mb_per_s: f64,
    pub status: Status,
    pub error: Option<String>,
}

/// The sizes of the sweep: from `max(min, sector)` doubling up to `max`, never above the
/// region.
pub fn sizes(cfg: &Config, sector_bytes: u32) -> Vec<u64> {
    let mut s = cfg.sweep_min_bytes.max(sector_bytes as u64).max(1);
    let top = cfg.sweep_max_bytes.min(cfg.region_bytes);
    let mut out = vec![];
    while s <= top {
        out.push(s);
        s *= 2;
    }
    out
}

/// Runs the sweep on `dev`, flushing after every write with `cfg.sweep_flush` (the device
/// must have been opened for that method; `None` means no flush call at all).
/// Err only when a size's buffer cannot be allocated: there is nothing to measure with.
pub fn run(dev: &dyn Device, cfg: &Config, pb: &Progress) -> io::Result<Vec<SweepRow>> {
    let mut rng = Rng::new(cfg.seed).fork(1);
    let flush = cfg.sweep_flush != FlushMethod::None;
    let mut rows = vec![];
    for size in sizes(cfg, dev.logical_block_bytes()) {
        if super::measure::stopped() {
            break; // interrupted: no empty rows
        }
        pb.start(format!("sweep {}", crate::units::fmt_bytes(size)));
        let mut buf = AlignedBuf::try_new(size as usize)?;
        fill_random(&mut buf, &mut rng);
        let slots = cfg.region_bytes / size;
        let limits = Limits {
            time: cfg.time_per_size,
            min_ios: cfg.min_ios,
            max_ios: u64::MAX,
        };
        let m = timed(limits, |_| {
            let off = cfg.region_offset_bytes + rng.below(slots) * size;
            dev.write_at(&buf, off).map_err(Failure::write)?;
            if flush {
                dev.flush().map_err(Failure::flush)?;
            }
            Ok(())
        });
        rows.push(SweepRow {
            size_bytes: size,
            ios: m.ios,
            elapsed_s: m.elapsed.as_secs_f64(),
            latency: m.samples.summary(),
            ios_per_s: per_s(m.ios, m.elapsed),
            throughput_mb_per_s: mb_per_s(m.ios * size, m.elapsed),
            status: m.status,
            error: m.error,
        });
        pb.done();
    }
    Ok(rows)
}
