//! The IOPS table, after SQLIO: block sizes 4–64 KiB, sequential and random, read and
//! write, with `threads` synchronous I/Os in flight (one per thread, so the thread count
//! is the queue depth). Writes here carry no flush: this table is the drive's plain
//! throughput, the context for the flush figures, not a durability figure.

use super::config::{Config, IopsConfig, Op, Pattern};
use super::data::fill_random;
use super::measure::{Failure, Limits, Measured, Status, timed};
use super::progress::Progress;
use super::stats::{Samples, mb_per_s, per_s};
use crate::device::{AlignedBuf, Device};
use crate::rng::Rng;
use serde::Serialize;
use std::io;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct IopsRow {
    pub op: Op,
    pub pattern: Pattern,
    pub block_bytes: u64,
    pub threads: usize,
    pub ios: u64,
    pub elapsed_s: f64,
    pub ios_per_s: f64,
    pub throughput_mb_per_s: f64,
    pub latency_us_min: f64,
    pub latency_us_avg: f64,
    pub latency_us_max: f64,
    pub status: Status,
    pub error: Option<String>,
}

/// The cells in table order.
pub fn cells(ic: &IopsConfig) -> Vec<(Op, Pattern, u64)> {
    let mut out = vec![];
    for op in Op::ALL.into_iter().filter(|o| ic.ops.contains(o)) {
        for pattern in Pattern::ALL.into_iter().filter(|p| ic.patterns.contains(p)) {
            for &bs in &ic.block_sizes {
                out.push((op, pattern, bs));
            }
        }
    }
    out
}

/// Runs every cell on `dev`.
/// Err only when a thread's buffer cannot be allocated (all are, before a cell starts).
pub fn run(
    dev: &dyn Device,
    cfg: &Config,
    ic: &IopsConfig,
    pb: &Progress,
) -> io::Result<Vec<IopsRow>> {
    let threads = ic.threads.max(1);
    let mut rows = vec![];
    for (n, (op, pattern, bs)) in cells(ic).into_iter().enumerate() {
        if super::measure::stopped() {
            break; // interrupted: no empty rows
        }
        pb.start(format!(
            "iops {op:?} {pattern:?} {}",
            crate::units::fmt_bytes(bs)
        ));
        let bufs = (0..threads)
            .map(|_| AlignedBuf::try_new(bs as usize))
            .collect::<io::Result<Vec<_>>>()?;
        let start = Instant::now();
        let results: Vec<Measured> = std::thread::scope(|s| {
            let handles: Vec<_> = bufs
                .into_iter()
                .enumerate()
                .map(|(t, buf)| {
                    let seed = cfg.seed ^ ((n as u64) << 32 | t as u64);
                    s.spawn(move || one_thread(dev, cfg, ic, (op, pattern, bs), t, seed, buf))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an IOPS thread panicked"))
                .collect()
        });
        let elapsed = start.elapsed();
        let mut samples = Samples::default();
        let mut ios = 0;
        let mut status = Status::Ok;
        let mut error = None;
        for m in results {
            ios += m.ios;
            samples.extend(m.samples);
            if !m.status.is_ok() && status.is_ok() {
                status = m.status;
                error = m.error;
            }
        }
        let lat = samples.summary();
        rows.push(IopsRow {
            op,
            pattern,
            block_bytes: bs,
            threads,
            ios,
            elapsed_s: elapsed.as_secs_f64(),
            ios_per_s: per_s(ios, elapsed),
            throughput_mb_per_s: mb_per_s(ios * bs, elapsed),
            latency_us_min: lat.latency_us_min,
            latency_us_avg: lat.latency_us_mean,
            latency_us_max: lat.latency_us_max,
            status,
            error,
        });
        pb.done();
    }
    Ok(rows)
}

/// One thread of one cell. Sequential threads each walk their own equal share of the
/// region front to back (wrapping); random threads pick block-aligned offsets anywhere.
fn one_thread(
    dev: &dyn Device,
    cfg: &Config,
    ic: &IopsConfig,
    (op, pattern, bs): (Op, Pattern, u64),
    t: usize,
    seed: u64,
    mut buf: AlignedBuf,
) -> Measured {
    let threads = ic.threads.max(1) as u64;
    let mut rng = Rng::new(seed);
    if op == Op::Write {
        fill_random(&mut buf, &mut rng);
    }
    let blocks = (cfg.region_bytes / bs).max(1);
    let share = (blocks / threads).max(1);
    let first = (t as u64 * share).min(blocks - 1);
    let limits = Limits {
        time: ic.time_per_cell,
        min_ios: 1,
        max_ios: u64::MAX,
    };
    timed(limits, |i| {
        let block = match pattern {
            Pattern::Sequential => first + i % share,
            Pattern::Random => rng.below(blocks),
        };
        let off = cfg.region_offset_bytes + block * bs;
        match op {
            Op::Read => dev.read_at(&mut buf, off).map_err(Failure::read),
            Op::Write => dev.write_at(&buf, off).map_err(Failure::write),
        }
    })
}
