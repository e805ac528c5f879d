//! Latency samples and their summary. Every bench table reports the same few figures
//! (mean, percentiles, extremes), computed the same way here, so the tables agree with one
//! another and with the JSON.

use serde::Serialize;
use std::time::Duration;

/// Per-operation latencies of one measurement, in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    ns: Vec<u64>,
}

impl Samples {
    pub fn with_capacity(n: usize) -> Samples {
        Samples {
            ns: Vec::with_capacity(n),
        }
    }
    pub fn push(&mut self, d: Duration) {
        self.ns.push(d.as_nanos().min(u64::MAX as u128) as u64);
    }
    pub fn len(&self) -> usize {
        self.ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ns.is_empty()
    }
    /// Merges another thread's samples into this one.
    pub fn extend(&mut self, other: Samples) {
        self.ns.extend(other.ns);
    }
    /// Summarises; an empty set gives all zeros.
    pub fn summary(mut self) -> LatencySummary {
        if self.ns.is_empty() {
            return LatencySummary::default();
        }
        self.ns.sort_unstable();
        let n = self.ns.len();
        let us = |ns: u64| ns as f64 / 1000.0;
        let sum: u128 = self.ns.iter().map(|&x| x as u128).sum();
        LatencySummary {
            latency_us_min: us(self.ns[0]),
            latency_us_mean: sum as f64 / n as f64 / 1000.0,
            latency_us_p50: us(percentile(&self.ns, 50.0)),
            latency_us_p99: us(percentile(&self.ns, 99.0)),
            latency_us_p999: us(percentile(&self.ns, 99.9)),
            latency_us_max: us(self.ns[n - 1]),
        }
    }
}

/// Nearest-rank percentile (`p` in percent) of sorted, non-empty data.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    crate::latency::nearest_rank(sorted, p / 100.0).expect("non-empty data")
}

/// Latency figures of one row, in microseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub latency_us_min: f64,
    pub latency_us_mean: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    pub latency_us_p999: f64,
    pub latency_us_max: f64,
}

/// Megabytes (10^6 bytes, as disk vendors and fio's "MB/s" count) per second.
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 { bytes as f64 / 1e6 / s } else { 0.0 }
}

/// Operations per second.
pub fn per_s(count: u64, elapsed: Duration) -> f64 {
    let s = elapsed.as_secs_f64();
    if s > 0.0 { count as f64 / s } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn percentiles_nearest_rank() {
        let mut s = Samples::default();
        for i in 1..=1000u64 {
            s.push(Duration::from_micros(i));
        }
        let m = s.summary();
        assert_eq!(m.latency_us_min, 1.0);
        assert_eq!(m.latency_us_p50, 500.0);
        assert_eq!(m.latency_us_p99, 990.0);
        assert_eq!(m.latency_us_p999, 999.0);
        assert_eq!(m.latency_us_max, 1000.0);
        assert!((m.latency_us_mean - 500.5).abs() < 1e-9);
    }
    #[test]
    fn empty_is_zero() {
        assert_eq!(Samples::default().summary(), LatencySummary::default());
    }
}
