//! One summary over all cycles, so a campaign of hundreds of runs reads as one page: the
//! overall verdict, summed counts, and the per-run histograms merged bucket by bucket (the
//! buckets share 1-2-5 edges, so merging is adding).

use super::input::{Cycle, LatencyBucket, TimelineBucket};
use crate::model::{ClassCounts, RecordClass, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// The order classes are listed and stacked in: survivors first, then failures.
pub const CLASSES: [RecordClass; 8] = [
    RecordClass::Intact,
    RecordClass::Superseded,
    RecordClass::Lost,
    RecordClass::Shorn,
    RecordClass::Corrupt,
    RecordClass::Stale,
    RecordClass::Misdirected,
    RecordClass::Unreadable,
];

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    /// FAIL if any cycle failed, else INCONCLUSIVE if any was, else PASS.
    pub verdict: Verdict,
    pub cycles: usize,
    /// Keyed by verdict name, so they list in name order.
    pub cycles_by_verdict: BTreeMap<&'static str, usize>,
    pub counts: ClassCounts,
    pub acked_records: u64,
    pub failing_records: u64,
    #[serde(skip)]
    pub timeline: Vec<TimelineBucket>,
    #[serde(skip)]
    pub latency: Vec<LatencyBucket>,
    /// Worst (largest) loss window over all cycles, ms.
    pub loss_window_ms_max: Option<f64>,
    /// Whether every cycle carried the chart data (`ack_timeline`, `flush_latency`).
    pub has_timeline: bool,
    pub has_latency: bool,
}

pub fn summarise(cycles: &[Cycle]) -> Summary {
    let mut by_verdict: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut counts = ClassCounts::zero();
    let mut timeline: BTreeMap<u64, TimelineBucket> = BTreeMap::new();
    let mut latency: BTreeMap<u64, LatencyBucket> = BTreeMap::new();
    let (mut acked, mut loss_max) = (0u64, None::<f64>);
    for c in cycles {
        let r = &c.report;
        *by_verdict.entry(r.summary.verdict.name()).or_default() += 1;
        for (k, v) in r.summary.counts.iter() {
            counts.add(k, v);
        }
        acked += r.acked_records;
        if let Some(w) = &r.summary.loss_window {
            loss_max = Some(loss_max.map_or(w.ms, |m: f64| m.max(w.ms)));
        }
        for b in &r.ack_timeline {
            // Keyed by the upper edge in µs: exact for 1-2-5 edges.
            let t = timeline
                .entry((b.to_ms * 1e3).round() as u64)
                .or_insert_with(|| TimelineBucket {
                    from_ms: b.from_ms,
                    to_ms: b.to_ms,
                    counts: ClassCounts::default(),
                });
            for (k, v) in b.counts.iter() {
                t.counts.add(k, v);
            }
        }
        if let Some(l) = &r.flush_latency {
            for b in &l.buckets {
                latency
                    .entry((b.to_us * 1e3).round() as u64)
                    .or_insert_with(|| LatencyBucket {
                        from_us: b.from_us,
                        to_us: b.to_us,
                        count: 0,
                    })
                    .count += b.count;
            }
        }
    }
    let any = |v: Verdict| cycles.iter().any(|c| c.report.summary.verdict == v);
    let verdict = if any(Verdict::Fail) {
        Verdict::Fail
    } else if any(Verdict::Inconclusive) || cycles.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    let failing = counts.failing();
    Summary {
        verdict,
        cycles: cycles.len(),
        cycles_by_verdict: by_verdict,
        counts,
        acked_records: acked,
        failing_records: failing,
        timeline: timeline.into_values().collect(),
        latency: latency.into_values().collect(),
        loss_window_ms_max: loss_max,
        has_timeline: cycles.iter().all(|c| !c.report.ack_timeline.is_empty()),
        has_latency: cycles.iter().all(|c| c.report.flush_latency.is_some()),
    }
}

/// Latency percentile over merged buckets: the upper edge of the bucket holding it (so it
/// never understates), in µs.
pub fn latency_quantile_us(buckets: &[LatencyBucket], q: f64) -> Option<f64> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return None;
    }
    let want = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for b in buckets {
        seen += b.count;
        if seen >= want {
            return Some(b.to_us);
        }
    }
    buckets.last().map(|b| b.to_us)
}
