//! The live status line: records acked, rate, flush latency, witness lag. Drawn by
//! indicatif, which hides it when stderr is not a terminal.

use super::engine::Progress;
use crate::witness::client::AckSender;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct StatusLine {
    bar: ProgressBar,
    done: AtomicBool,
}

impl StatusLine {
    pub fn start() -> StatusLine {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").unwrap());
        StatusLine {
            bar,
            done: AtomicBool::new(false),
        }
    }

    pub fn run(&self, p: &Progress, sender: &AckSender, t0: Instant) {
        let (mut last_n, mut last_t) = (0u64, Instant::now());
        while !self.done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let n = p.records_acked.load(Ordering::Relaxed);
            let now = Instant::now();
            let rate = (n - last_n) as f64 / now.duration_since(last_t).as_secs_f64();
            (last_n, last_t) = (n, now);
            let s = sender.stats();
            let h = &p.flush_latency;
            self.bar.set_message(format!(
                "acked {n} ({:.0}/s, {:.1} MiB/s)  flush p50 {:.0} µs p99 {:.0} µs  witness lag {} {}",
                rate,
                p.bytes_acked.load(Ordering::Relaxed) as f64 / t0.elapsed().as_secs_f64() / 1048576.0,
                h.quantile_ns(0.5) as f64 / 1e3,
                h.quantile_ns(0.99) as f64 / 1e3,
                s.pushed.saturating_sub(s.durable),
                if s.connected { "" } else { "(witness disconnected, reconnecting)" }
            ));
            self.bar.tick();
        }
        self.bar.finish_and_clear();
    }

    pub fn stop(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}
