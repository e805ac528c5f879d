//! Compact distributions over *all* acknowledged records, for charts (`plugpull report`).
//!
//! Why here: `findings` lists failing records only, so a chart of "what happened around
//! the cut" could not draw the intact ones. Verify already holds every ack and its class,
//! so it summarises them in two small histograms that add a few hundred bytes to the
//! report instead of one entry per record:
//! - the ack timeline: records by how long before the run's last ack they were
//!   acknowledged, on 1-2-5 bucket edges in ms (fine near the cut, coarse far from it),
//!   counted per class;
//! - the write+flush latency: `flushed_ns - submitted_ns` of every ack (writer clock), on
//!   1-2-5 bucket edges in µs. No writer change needed: the acks carry both times.

use crate::model::{Ack, RecordClass};
use serde::Serialize;
use std::collections::BTreeMap;

/// 1, 2, 5, 10, 20, 50, ...: the upper edge of bucket `i` (bucket 0 is [0, 1)).
pub fn edge_125(i: usize) -> f64 {
    let decade = 10f64.powi((i / 3) as i32);
    decade * [1.0, 2.0, 5.0][i % 3]
}

/// Index of the 1-2-5 bucket holding `v` (>= 0): [0,1) -> 0, [1,2) -> 1, [2,5) -> 2, ...
pub fn bucket_125(v: f64) -> usize {
    let mut i = 0;
    while v >= edge_125(i) && i < 60 {
        i += 1;
    }
    i
}

fn lower_edge(i: usize) -> f64 {
    if i == 0 { 0.0 } else { edge_125(i - 1) }
}

/// Records acknowledged between `from_ms` and `to_ms` before the last ack, by class
/// (non-zero classes only).
#[derive(Clone, Debug, Serialize)]
pub struct TimelineBucket {
    pub from_ms: f64,
    pub to_ms: f64,
    pub counts: BTreeMap<&'static str, u64>,
}

/// Write+flush latencies between `from_us` and `to_us`.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyBucket {
    pub from_us: f64,
    pub to_us: f64,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Non-empty buckets only, in order.
    pub buckets: Vec<LatencyBucket>,
}

/// Non-empty timeline buckets, nearest the cut first.
pub fn ack_timeline(acks: &[Ack], classes: &[RecordClass]) -> Vec<TimelineBucket> {
    let last = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
    let mut by: BTreeMap<usize, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for (a, c) in acks.iter().zip(classes) {
        let ms = last.saturating_sub(a.flushed_ns) as f64 / 1e6;
        *by.entry(bucket_125(ms))
            .or_default()
            .entry(c.name())
            .or_default() += 1;
    }
    by.into_iter()
        .map(|(i, counts)| TimelineBucket {
            from_ms: lower_edge(i),
            to_ms: edge_125(i),
            counts,
        })
        .collect()
}

/// Write+flush latency of every ack; None when there are no acks.
pub fn flush_latency(acks: &[Ack]) -> Option<LatencySummary> {
    if acks.is_empty() {
        return None;
    }
    let mut us: Vec<f64> = acks
        .iter()
        .map(|a| a.flushed_ns.saturating_sub(a.record.write_time_ns) as f64 / 1e3)
        .collect();
    us.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| crate::latency::nearest_rank(&us, p).expect("acks are not empty");
    let mut by: BTreeMap<usize, u64> = BTreeMap::new();
    for v in &us {
        *by.entry(bucket_125(*v)).or_default() += 1;
    }
    Some(LatencySummary {
        count: us.len() as u64,
        p50_us: q(0.5),
        p99_us: q(0.99),
        max_us: *us.last().unwrap(),
        buckets: by
            .into_iter()
            .map(|(i, count)| LatencyBucket {
                from_us: lower_edge(i),
                to_us: edge_125(i),
                count,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_1_2_5() {
        assert_eq!(bucket_125(0.0), 0);
        assert_eq!(bucket_125(0.99), 0);
        assert_eq!(bucket_125(1.0), 1);
        assert_eq!(bucket_125(4.9), 2);
        assert_eq!(bucket_125(5.0), 3);
        assert_eq!(bucket_125(10.0), 4);
        assert_eq!(edge_125(4), 20.0);
        assert_eq!(lower_edge(3), 5.0);
    }
}
