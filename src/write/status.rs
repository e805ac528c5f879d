//! The live status line: records flushed (and acked by the writer), how many of them are
//! durable at the witness, rate, flush latency. Drawn by indicatif, on a terminal only
//! (elsewhere `events` prints a line per change). Both counts are named for what they
//! are: "acked 69759" beside a witness holding 9262 read as a contradiction.

use super::engine::Progress;
use crate::units::{fmt_duration_us, thousands};
use crate::witness::client::{AckSender, SenderStats};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct StatusLine {
    bar: ProgressBar,
    done: AtomicBool,
    /// `--max-unconfirmed`: at this many unconfirmed acks the streams wait.
    max_unconfirmed: u64,
}

impl StatusLine {
    pub fn start(max_unconfirmed: usize) -> StatusLine {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").unwrap());
        StatusLine {
            bar,
            done: AtomicBool::new(false),
            max_unconfirmed: max_unconfirmed as u64,
        }
    }

    pub fn run(&self, p: &Progress, sender: &AckSender, t0: Instant) {
        let (mut last_n, mut last_t) = (0u64, Instant::now());
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let n = p.records_acked();
            let now = Instant::now();
            let rate = (n - last_n) as f64 / now.duration_since(last_t).as_secs_f64();
            (last_n, last_t) = (n, now);
            let s = sender.stats();
            let h = &p.flush_latency;
            self.bar.set_message(status_message(
                n,
                rate,
                p.bytes_acked() as f64 / t0.elapsed().as_secs_f64(),
                (h.quantile_ns(0.5), h.quantile_ns(0.99)),
                &s,
                self.max_unconfirmed,
            ));
            self.bar.tick();
        }
        self.bar.finish_and_clear();
    }

    pub fn stop(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// The status line's text: `flushed` records written and flushed, `bytes_per_s` of them,
/// the flush latency quantiles (p50, p99) in ns, the sender's view of the witness, and
/// whether writes are paused because `max_unconfirmed` acks wait for the witness.
fn status_message(
    flushed: u64,
    rate: f64,
    bytes_per_s: f64,
    (p50_ns, p99_ns): (u64, u64),
    s: &SenderStats,
    max_unconfirmed: u64,
) -> String {
    let waiting = s.pushed.saturating_sub(s.durable);
    format!(
        "{} flushed ({}/s, {:.1} MiB/s), {} durable at the witness ({} waiting){}{}  flush p50 {} p99 {}",
        thousands(flushed),
        thousands(rate.round() as u64),
        bytes_per_s / 1048576.0,
        thousands(s.durable),
        thousands(waiting),
        if s.connected {
            ""
        } else {
            ", witness disconnected, reconnecting"
        },
        if waiting >= max_unconfirmed {
            ", writes paused until the witness confirms"
        } else {
            ""
        },
        fmt_duration_us(p50_ns as f64 / 1e3),
        fmt_duration_us(p99_ns as f64 / 1e3),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_counts_are_named_for_what_they_are() {
        let s = SenderStats {
            pushed: 69759,
            durable: 9262,
            connected: false,
            ..SenderStats::default()
        };
        let m = status_message(
            69759,
            1000.0,
            4.0 * 1048576.0,
            (50_000, 90_000),
            &s,
            100_000,
        );
        assert_eq!(
            m,
            "69,759 flushed (1,000/s, 4.0 MiB/s), 9,262 durable at the witness (60,497 waiting), witness disconnected, reconnecting  flush p50 50 µs p99 90 µs"
        );
        assert!(!m.contains("acked"), "{m}");
        assert!(!m.contains("paused"), "{m}");
        // At the limit the line says the writer is waiting, as the off-terminal log does.
        let m = status_message(69759, 0.0, 0.0, (50_000, 90_000), &s, 60497);
        assert!(
            m.contains("(60,497 waiting), witness disconnected, reconnecting, writes paused until the witness confirms"),
            "{m}"
        );
    }
}
