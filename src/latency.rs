//! A lock-free latency histogram: writers record from their own threads, the status line
//! reads percentiles while they run. Log-linear buckets (8 per power of two) give ~6%
//! resolution from 1 µs to hours in 512 counters, with no allocation per sample.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const SUB: usize = 8;
const BUCKETS: usize = 64 * SUB;

pub struct Histogram {
    counts: Vec<AtomicU64>,
    total: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let log = 63 - ns.leading_zeros() as usize; // >= 3
    let sub = ((ns >> (log - 3)) & (SUB as u64 - 1)) as usize;
    (log - 2) * SUB + sub
}

/// A histogram kept by one thread and added to a shared [`Histogram`] now and then, so
/// that a sample costs no atomic operation on memory other threads write too (the
/// writer's streams each keep one: `write::engine`).
pub struct LocalHistogram {
    counts: Vec<u64>,
    total: u64,
    max_ns: u64,
}

impl Default for LocalHistogram {
    fn default() -> Self {
        LocalHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max_ns: 0,
        }
    }
}

impl LocalHistogram {
    pub fn record_ns(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds every sample to `into`, and starts empty.
    pub fn drain_into(&mut self, into: &Histogram) {
        if self.total == 0 {
            return;
        }
        for (c, shared) in self.counts.iter_mut().zip(&into.counts) {
            if *c > 0 {
                shared.fetch_add(std::mem::take(c), Relaxed);
            }
        }
        into.total
            .fetch_add(std::mem::take(&mut self.total), Relaxed);
        into.max_ns
            .fetch_max(std::mem::take(&mut self.max_ns), Relaxed);
    }
}

/// Upper edge of a bucket, so percentiles never understate latency.
fn bucket_high(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let log = b / SUB + 2;
    let sub = (b % SUB) as u64;
    ((SUB as u64 + sub + 1) << (log - 3)) - 1
}

impl Histogram {
    pub fn record_ns(&self, ns: u64) {
        self.counts[bucket(ns)].fetch_add(1, Relaxed);
        self.total.fetch_add(1, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
    }
    pub fn count(&self) -> u64 {
        self.total.load(Relaxed)
    }
    pub fn max_ns(&self) -> u64 {
        self.max_ns.load(Relaxed)
    }
    /// The latency below which `q` (0..=1) of samples fall; 0 when empty.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let want = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c.load(Relaxed);
            if seen >= want {
                return bucket_high(b).min(self.max_ns());
            }
        }
        self.max_ns()
    }
}

/// Nearest-rank quantile (`q` in 0..=1) of sorted data; None when empty. The one
/// definition bench, verify and campaign summaries share. The epsilon keeps e.g. the
/// 99.9th of 1000 samples at rank 999 despite binary floating point.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64 - 1e-9).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn buckets_are_monotonic_and_cover() {
        let mut last = 0;
        for ns in [0u64, 1, 7, 8, 9, 15, 16, 100, 1000, 123_456, 10_000_000_000] {
            let b = bucket(ns);
            assert!(b >= last);
            last = b;
            assert!(
                bucket_high(b) >= ns,
                "bucket {b} high {} < {ns}",
                bucket_high(b)
            );
            assert!(
                bucket_high(b) as f64 <= ns as f64 * 1.13 + 1.0,
                "too coarse at {ns}"
            );
        }
    }
    #[test]
    fn nearest_rank_is_exact() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 0.5), Some(500));
        assert_eq!(nearest_rank(&v, 0.999), Some(999));
        assert_eq!(nearest_rank(&v, 1.0), Some(1000));
        assert_eq!(nearest_rank(&v, 0.0), Some(1));
        assert_eq!(nearest_rank::<u64>(&[], 0.5), None);
    }

    #[test]
    fn percentiles() {
        let h = Histogram::default();
        for i in 1..=1000u64 {
            h.record_ns(i * 1000);
        }
        let p50 = h.quantile_ns(0.5) as f64;
        assert!((480_000.0..=540_000.0).contains(&p50), "{p50}");
        let p99 = h.quantile_ns(0.99) as f64;
        assert!((960_000.0..=1_000_000.0).contains(&p99), "{p99}");
        assert_eq!(h.quantile_ns(1.0), 1_000_000);
        assert_eq!(Histogram::default().quantile_ns(0.5), 0);
    }

    #[test]
    fn a_local_histogram_drained_twice_adds_up_to_the_shared_one() {
        let (direct, shared) = (Histogram::default(), Histogram::default());
        let mut local = LocalHistogram::default();
        for i in 1..=1000u64 {
            direct.record_ns(i * 997);
            local.record_ns(i * 997);
            if i == 400 {
                local.drain_into(&shared);
                assert_eq!(shared.count(), 400);
            }
        }
        local.drain_into(&shared);
        local.drain_into(&shared);
        assert_eq!(shared.count(), 1000);
        assert_eq!(shared.max_ns(), direct.max_ns());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(shared.quantile_ns(q), direct.quantile_ns(q), "q {q}");
        }
    }
}
