//! The flush-method table, after PostgreSQL's `pg_test_fsync`: one 8 KiB write in place,
//! made durable by each method in turn, with "write, no flush" as the reference. A method
//! that is barely slower than the reference is not reaching the drive's media (or the
//! drive has power-loss protection); see `reading`.

use super::config::Config;
use super::data::fill_random;
use super::measure::{Failure, Limits, Status, timed};
use super::progress::Progress;
use super::stats::per_s;
use super::target::TargetOpener;
use crate::device::{AlignedBuf, FlushMethod};
use crate::rng::Rng;
use serde::Serialize;
use std::io;

/// The methods in table order: the ones that flush, then the reference.
pub const METHODS: [FlushMethod; 4] = [
    FlushMethod::Dsync,
    FlushMethod::Fdatasync,
    FlushMethod::Fsync,
    FlushMethod::None,
];

/// One method of the table.
#[derive(Debug, Clone, Serialize)]
pub struct MethodRow {
    /// "dsync" (O_DSYNC open), "fdatasync", "fsync", or "none" (write only: the reference).
    pub method: FlushMethod,
    pub write_bytes: u64,
    pub ops: u64,
    pub elapsed_s: f64,
    pub ops_per_s: f64,
    /// Mean time of one write plus its flush (pg_test_fsync's "usecs/op").
    pub latency_us_per_op: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub status: Status,
    pub error: Option<String>,
}

/// Opens the target once per method and times `cfg.method_write_bytes` writes at the start
/// of the region, each followed by one flush call (none for the reference; for O_DSYNC the
/// flush is in the write and the call is a no-op on a real file).
/// Err only when the buffer cannot be allocated.
pub fn run(opener: &dyn TargetOpener, cfg: &Config, pb: &Progress) -> io::Result<Vec<MethodRow>> {
    let mut rng = Rng::new(cfg.seed).fork(2);
    let mut buf = AlignedBuf::try_new(cfg.method_write_bytes as usize)?;
    fill_random(&mut buf, &mut rng);
    let mut rows = vec![];
    for method in METHODS {
        if super::measure::stopped() {
            break; // interrupted: no empty rows
        }
        pb.start(format!("method {}", method.name()));
        let row = match opener.open(method) {
            Ok(dev) => {
                let limits = Limits {
                    time: cfg.method_time,
                    min_ios: cfg.min_ios,
                    max_ios: u64::MAX,
                };
                let m = timed(limits, |_| {
                    dev.write_at(&buf, cfg.region_offset_bytes)
                        .map_err(Failure::write)?;
                    if method != FlushMethod::None {
                        dev.flush().map_err(Failure::flush)?;
                    }
                    Ok(())
                });
                let ops = m.ios;
                let elapsed = m.elapsed;
                let lat = m.samples.summary();
                MethodRow {
                    method,
                    write_bytes: cfg.method_write_bytes,
                    ops,
                    elapsed_s: elapsed.as_secs_f64(),
                    ops_per_s: per_s(ops, elapsed),
                    latency_us_per_op: lat.latency_us_mean,
                    latency_us_p50: lat.latency_us_p50,
                    latency_us_p99: lat.latency_us_p99,
                    status: m.status,
                    error: m.error,
                }
            }
            Err(e) => MethodRow {
                method,
                write_bytes: cfg.method_write_bytes,
                ops: 0,
                elapsed_s: 0.0,
                ops_per_s: 0.0,
                latency_us_per_op: 0.0,
                latency_us_p50: 0.0,
                latency_us_p99: 0.0,
                status: Status::OpenFailed,
                error: Some(format!("{e:#}")),
            },
        };
        rows.push(row);
        pb.done();
    }
    Ok(rows)
}
