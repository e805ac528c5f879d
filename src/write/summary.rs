//! What `write` says when it ends: the summary (text on stderr, or JSON on stdout), the
//! witness-lag warning, and, after a target failure, what happened and what to do next.
//! Why its own module: the run loop decides, this only words it, and the JSON shape is
//! a documented format (`plugpull-write/1`) that must not change by accident.

use super::clock::realtime_ns;
use super::engine::{Failure, Progress};
use super::plan::Plan;
use crate::device::FlushMethod;
use crate::units::{fmt_bytes, fmt_duration_s, fmt_duration_us, fmt_utc_ns, thousands};
use crate::witness::client::SenderStats;
use serde::Serialize;
use std::time::Duration;

/// What `write` prints at the end (and with --json).
#[derive(Debug, Serialize)]
pub struct WriteSummary {
    pub format: &'static str,
    pub run_id: String,
    pub target: String,
    /// "limit reached", "interrupted", "target failed" or "plugpull failed" (a bug: a
    /// stream thread panicked).
    pub stopped_because: String,
    pub records_acked: u64,
    pub bytes_acked: u64,
    /// Acks the witness confirmed durable.
    pub witness_durable: u64,
    pub seconds: f64,
    pub records_per_s: f64,
    pub flush_latency_us_p50: f64,
    pub flush_latency_us_p99: f64,
    pub flush_latency_us_max: f64,
    pub last_acked: Option<AckedRecord>,
    pub failure: Option<String>,
    pub seed: u64,
    /// Set when the target lives in RAM (tmpfs, ramfs, a RAM disk): the run tests no drive.
    pub ram_warning: Option<String>,
    #[serde(flatten)]
    pub engine: EngineUsed,
    /// Writes still in flight when a failure stopped the run: reaped (waited for) before
    /// the writer ended, never acknowledged. Always 0 for the `sync` engine.
    pub writes_reaped_after_failure: u64,
}

/// Which write loop ran and how deep (`write --iodepth`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EngineUsed {
    /// "sync" (one pwrite at a time per stream) or "io_uring".
    pub engine: &'static str,
    /// Writes in flight per stream (1 for `sync`).
    pub iodepth: u32,
    /// With io_uring and fdatasync/fsync: a flush once this many writes completed...
    pub flush_every: Option<u32>,
    /// ...or this long after the first of them, whichever came first.
    pub flush_within_us: Option<u64>,
}

impl EngineUsed {
    pub fn of(depth: Option<&super::uring::DepthSettings>, flush: FlushMethod) -> EngineUsed {
        let flushes = matches!(flush, FlushMethod::Fdatasync | FlushMethod::Fsync);
        match depth {
            None => EngineUsed {
                engine: "sync",
                iodepth: 1,
                flush_every: None,
                flush_within_us: None,
            },
            Some(d) => EngineUsed {
                engine: "io_uring",
                iodepth: d.iodepth,
                flush_every: flushes.then_some(d.flush_every),
                flush_within_us: flushes.then_some(d.flush_within.as_micros() as u64),
            },
        }
    }

    /// "io_uring, depth 32, a flush every 32 writes or 10 ms"; "sync" for the other.
    pub fn describe(&self) -> String {
        let mut t = self.engine.to_string();
        if self.engine != "sync" {
            t += &format!(", depth {}", thousands(self.iodepth as u64));
        }
        if let (Some(k), Some(us)) = (self.flush_every, self.flush_within_us) {
            t += &format!(
                ", a flush every {} writes or {}",
                thousands(k as u64),
                fmt_duration_us(us as f64)
            );
        }
        t
    }
}

#[derive(Debug, Serialize)]
pub struct AckedRecord {
    pub stream: u16,
    pub seq: u64,
    pub offset: u64,
    pub len_bytes: u64,
    pub flushed_ns: u64,
}

/// How the streams ended and what the witness confirmed.
pub(super) struct Ending {
    pub failure: Option<Failure>,
    pub interrupted: bool,
    pub elapsed: Duration,
    pub stats: SenderStats,
}

/// Builds the summary of a finished run from its counters.
pub(super) fn summarize(
    plan: &Plan,
    target: &str,
    progress: &Progress,
    end: &Ending,
    ram_warning: Option<String>,
    engine: EngineUsed,
) -> WriteSummary {
    let Ending {
        failure,
        interrupted,
        elapsed,
        stats,
    } = end;
    let acked = progress.records_acked();
    let h = &progress.flush_latency;
    WriteSummary {
        format: "plugpull-write/1",
        run_id: plan.run.hex(),
        target: target.to_string(),
        stopped_because: if failure.as_ref().is_some_and(Failure::is_internal) {
            "plugpull failed".into()
        } else if failure.is_some() {
            "target failed".into()
        } else if *interrupted {
            "interrupted".into()
        } else {
            "limit reached".into()
        },
        records_acked: acked,
        bytes_acked: progress.bytes_acked(),
        witness_durable: stats.durable,
        seconds: elapsed.as_secs_f64(),
        records_per_s: acked as f64 / elapsed.as_secs_f64().max(1e-9),
        flush_latency_us_p50: h.quantile_ns(0.5) as f64 / 1e3,
        flush_latency_us_p99: h.quantile_ns(0.99) as f64 / 1e3,
        flush_latency_us_max: h.max_ns() as f64 / 1e3,
        last_acked: progress.last_ack().map(|k| AckedRecord {
            stream: k.record.stream,
            seq: k.record.seq,
            offset: k.record.offset,
            len_bytes: k.record.len_bytes(),
            flushed_ns: k.flushed_ns,
        }),
        failure: failure.as_ref().map(|f| {
            format!(
                "{} of stream {} seq {} at offset {} failed: {}",
                f.during, f.record.stream, f.record.seq, f.record.offset, f.error
            )
        }),
        seed: plan.seed,
        ram_warning,
        engine,
        writes_reaped_after_failure: progress.writes_reaped_after_failure(),
    }
}

/// The summary line on stderr (unless quiet), or the JSON on stdout.
pub(super) fn print_summary(
    summary: &WriteSummary,
    json: bool,
    quiet: bool,
) -> Result<(), serde_json::Error> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
    } else if !quiet {
        super::events::say(&summary_line(summary));
    }
    Ok(())
}

/// The summary in one line for people: counts with separators, spans in the units of
/// every other report; the JSON keeps the exact figures.
fn summary_line(s: &WriteSummary) -> String {
    let engine = if s.engine.engine == "sync" {
        String::new()
    } else {
        format!(" ({})", s.engine.describe())
    };
    format!(
        "stopped ({}): {} records flushed and acked ({}) in {}{engine}, {} records/s, flush p50 {} p99 {}; {} of them durable at the witness",
        s.stopped_because,
        thousands(s.records_acked),
        fmt_bytes(s.bytes_acked),
        fmt_duration_s(s.seconds),
        thousands(s.records_per_s.round() as u64),
        fmt_duration_us(s.flush_latency_us_p50),
        fmt_duration_us(s.flush_latency_us_p99),
        thousands(s.witness_durable)
    )
}

/// Warns when the witness confirmed fewer acks than the writer made: verify judges only
/// what the witness holds.
pub(super) fn warn_witness_behind(stats: &SenderStats, acked: u64) {
    if stats.durable < acked {
        super::events::say(&format!(
            "warning: only {} of {} acks are durable at the witness ({}); verify judges only what the witness holds",
            thousands(stats.durable),
            thousands(acked),
            stats.last_error.as_deref().unwrap_or("witness unreachable")
        ));
    }
}

/// Says that Ctrl-C stopped the run, the last record acknowledged, how much of it the
/// witness holds (all, or only part when it was away), and the verify command.
pub(super) fn explain_interruption(
    summary: &WriteSummary,
    stats: &SenderStats,
    target: &str,
    witness: &str,
) {
    let held = if stats.durable >= stats.pushed {
        "durable at the witness".to_string()
    } else {
        format!(
            "but the witness confirmed only {} of {} acks before the writer gave up waiting ({}); verify judges only those",
            thousands(stats.durable),
            thousands(stats.pushed),
            stats.last_error.as_deref().unwrap_or("witness unreachable")
        )
    };
    super::events::say(&format!(
        "interrupted (Ctrl-C): stopped writing. Last acknowledged record: {}, {held}. To check the drive: `plugpull verify {target} --witness {witness} --run {}`",
        describe_last(summary, realtime_ns()),
        summary.run_id
    ));
}

/// The last acknowledged record in words, or "none": where it is, when its flush
/// returned (UTC, to the second) and how long before `now_ns` that was. The JSON
/// keeps the exact `flushed_ns`; a person reads a time.
fn describe_last(summary: &WriteSummary, now_ns: u64) -> String {
    summary
        .last_acked
        .as_ref()
        .map(|l| {
            // A clock stepped back since the flush gives no age rather than a wrong one.
            let age = now_ns
                .checked_sub(l.flushed_ns)
                .map(|ns| format!(", {} ago", fmt_duration_s(ns as f64 / 1e9)))
                .unwrap_or_default();
            format!(
                "stream {} seq {} at offset {} (flushed {}{age})",
                l.stream,
                l.seq,
                l.offset,
                fmt_utc_ns(l.flushed_ns)
            )
        })
        .unwrap_or_else(|| "none".into())
}

/// Says what failed, that a cut explains it, the last acknowledged record, and the
/// verify command to run next.
pub(super) fn explain_target_failure(
    f: &Failure,
    summary: &WriteSummary,
    target: &str,
    witness: &str,
) {
    let last = describe_last(summary, realtime_ns());
    let reaped = match summary.writes_reaped_after_failure {
        0 => String::new(),
        n => format!(
            " {} more write(s) in flight with it were reaped, none acknowledged.",
            thousands(n)
        ),
    };
    super::events::say(&format!(
        "the target failed: {} of stream {} seq {} returned \"{}\". If you cut the power, this is expected. Nothing more was acknowledged.{reaped} Last acknowledged record: {last}. Next: restore power and run `plugpull verify {} --witness {}`",
        f.during, f.record.stream, f.record.seq, f.error, target, witness
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(last_acked: Option<AckedRecord>) -> WriteSummary {
        WriteSummary {
            format: "plugpull-write/1",
            run_id: "00ff".into(),
            target: "/dev/x".into(),
            stopped_because: "interrupted".into(),
            records_acked: 42,
            bytes_acked: 42 * 4096,
            witness_durable: 42,
            seconds: 1.0,
            records_per_s: 42.0,
            flush_latency_us_p50: 1.0,
            flush_latency_us_p99: 1.0,
            flush_latency_us_max: 1.0,
            last_acked,
            failure: None,
            seed: 1,
            ram_warning: None,
            engine: EngineUsed::of(None, FlushMethod::Fdatasync),
            writes_reaped_after_failure: 0,
        }
    }

    /// The last record reads as a UTC time and an age, never as a count of nanoseconds.
    #[test]
    fn the_last_record_reads_as_a_time_not_nanoseconds() {
        // 2026-12-02 17:38:48.123456789 UTC.
        let flushed_ns = 1_796_233_128_123_456_789;
        let s = summary(Some(AckedRecord {
            stream: 0,
            seq: 41,
            offset: 167_936,
            len_bytes: 4096,
            flushed_ns,
        }));
        let text = describe_last(&s, flushed_ns + 340_000_000);
        assert_eq!(
            text,
            "stream 0 seq 41 at offset 167936 (flushed 2026-12-02 17:38:48 UTC, 340 ms ago)"
        );
        assert!(!text.contains(" ns"), "{text}");
        // A clock that stepped back: the time, no age.
        let text = describe_last(&s, flushed_ns - 1);
        assert_eq!(
            text,
            "stream 0 seq 41 at offset 167936 (flushed 2026-12-02 17:38:48 UTC)"
        );
        assert_eq!(describe_last(&summary(None), flushed_ns), "none");
    }

    /// The last line groups every count by thousands and gives latencies and the run's
    /// length in the span units of every other report.
    #[test]
    fn the_summary_line_separates_thousands_and_reads_spans() {
        let mut s = summary(None);
        s.stopped_because = "target failed".into();
        s.records_acked = 1_234_567;
        s.bytes_acked = 1_234_567 * 4096;
        s.seconds = 12.34;
        s.records_per_s = 100_047.6;
        s.flush_latency_us_p50 = 87.2;
        s.flush_latency_us_p99 = 6816.0;
        s.witness_durable = 1_234_000;
        assert_eq!(
            summary_line(&s),
            "stopped (target failed): 1,234,567 records flushed and acked (4.7 GiB) in 12 s, 100,048 records/s, flush p50 87 µs p99 6.8 ms; 1,234,000 of them durable at the witness"
        );
    }

    /// An io_uring run's line names the engine, the depth and the flush interval; the
    /// synchronous one's stays as it was.
    #[test]
    fn the_summary_line_names_the_io_uring_engine_and_its_flush_interval() {
        let mut s = summary(None);
        let sync = summary_line(&s);
        assert!(!sync.contains("io_uring"), "{sync}");
        let d = crate::write::uring::DepthSettings {
            iodepth: 32,
            flush_every: 1000,
            flush_within: std::time::Duration::from_millis(10),
        };
        s.engine = EngineUsed::of(Some(&d), FlushMethod::Fdatasync);
        assert!(
            summary_line(&s)
                .contains(" (io_uring, depth 32, a flush every 1,000 writes or 10 ms),"),
            "{}",
            summary_line(&s)
        );
        s.engine = EngineUsed::of(Some(&d), FlushMethod::Dsync);
        assert_eq!(s.engine.describe(), "io_uring, depth 32");
    }
}
