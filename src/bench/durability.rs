//! Durability cost, after `iozone -e`: the same sequential large-record stream timed
//! without any flush, with one flush at the end inside the timing (iozone's `-e`), and
//! with a flush after every record. Without a flush the drive may only have the data in
//! its cache; the ratios say what durability costs on this target.

use super::config::Config;
use super::data::fill_random;
use super::measure::{Failure, Limits, Status, timed};
use super::progress::Progress;
use super::stats::mb_per_s;
use crate::device::{AlignedBuf, Device, FlushMethod};
use crate::rng::Rng;
use serde::Serialize;
use std::io;
use std::time::{Duration, Instant};

/// Where the flush goes in the timed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlushMode {
    /// Writes only: what the drive's cache (or the page cache, with --no-direct) accepts.
    NoFlush,
    /// One flush after the last record, inside the timing (iozone -e).
    FlushAtEnd,
    /// A flush after every record (what a database log or plugpull's writer pays).
    FlushEveryRecord,
}

pub const MODES: [FlushMode; 3] = [
    FlushMode::NoFlush,
    FlushMode::FlushAtEnd,
    FlushMode::FlushEveryRecord,
];

#[derive(Debug, Clone, Serialize)]
pub struct DurabilityRow {
    pub mode: FlushMode,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub throughput_mb_per_s: f64,
    /// Throughput of this mode over the no-flush throughput (1.0 = durability is free).
    pub ratio_to_no_flush: f64,
    pub status: Status,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Durability {
    /// The explicit flush used (fdatasync unless the sweep asked for fsync).
    pub flush_method: FlushMethod,
    pub record_bytes: u64,
    pub rows: Vec<DurabilityRow>,
}

/// Runs the three modes on `dev`, which must have been opened with `flush_method`, an
/// explicit flush (fdatasync or fsync: with O_DSYNC no write would be flush-free). Each mode writes the same records from the start
/// of the region; `FlushEveryRecord` also stops at `cfg.durability_max_time`.
pub fn run(
    dev: &dyn Device,
    flush_method: FlushMethod,
    cfg: &Config,
    pb: &Progress,
) -> io::Result<Durability> {
    let mut rng = Rng::new(cfg.seed).fork(3);
    let record = cfg.durability_record_bytes.min(cfg.region_bytes);
    let records = (cfg.durability_total_bytes.min(cfg.region_bytes) / record).max(1);
    let mut buf = AlignedBuf::try_new(record as usize)?;
    fill_random(&mut buf, &mut rng);
    let mut rows: Vec<DurabilityRow> = vec![];
    for mode in MODES {
        if super::measure::stopped() {
            break; // interrupted: no empty rows
        }
        pb.start(format!("durability {mode:?}"));
        let limits = Limits {
            time: if mode == FlushMode::FlushEveryRecord {
                cfg.durability_max_time
            } else {
                Duration::MAX
            },
            min_ios: 1,
            max_ios: records,
        };
        // Start each mode with an empty drive cache, so one mode's flush does not pay for
        // the previous mode's writes. A failing flush shows in the flushing modes' rows.
        let _ = dev.flush();
        let start = Instant::now();
        let mut m = timed(limits, |i| {
            dev.write_at(&buf, cfg.region_offset_bytes + i * record)
                .map_err(Failure::write)?;
            if mode == FlushMode::FlushEveryRecord {
                dev.flush().map_err(Failure::flush)?;
            }
            Ok(())
        });
        if mode == FlushMode::FlushAtEnd && m.status.is_ok() {
            if let Err(e) = dev.flush() {
                let f = Failure::flush(e);
                m.status = f.status;
                m.error = Some(f.message());
            }
        }
        let elapsed = start.elapsed();
        let bytes = m.ios * record;
        let throughput = mb_per_s(bytes, elapsed);
        let base = rows
            .first()
            .map(|r| r.throughput_mb_per_s)
            .unwrap_or(throughput);
        rows.push(DurabilityRow {
            mode,
            bytes,
            elapsed_s: elapsed.as_secs_f64(),
            throughput_mb_per_s: throughput,
            ratio_to_no_flush: if base > 0.0 { throughput / base } else { 0.0 },
            status: m.status,
            error: m.error,
        });
        pb.done();
    }
    Ok(Durability {
        flush_method,
        record_bytes: record,
        rows,
    })
}
