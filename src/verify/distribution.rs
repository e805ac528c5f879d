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
    // The edges computed once: verify calls this for every ack, and `powi` per step
    // showed in its profile.
    static EDGES: std::sync::LazyLock<[f64; 60]> =
        std::sync::LazyLock::new(|| std::array::from_fn(edge_125));
    EDGES.iter().take_while(|&&e| v >= e).count()
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
    let mut t = Timeline::new(last);
    for (a, c) in acks.iter().zip(classes) {
        t.add(a, *c);
    }
    t.finish()
}

/// [`ack_timeline`] one ack at a time (verify at scale streams the acks: `verify::scale`).
pub struct Timeline {
    last_ns: u64,
    by: BTreeMap<usize, BTreeMap<&'static str, u64>>,
    /// Acks of one (bucket, class) in a row, not yet in `by`. Why: consecutive acks
    /// nearly always share both, and two map walks with string keys per ack showed in
    /// verify's profile with 512 B records.
    run: Option<(usize, RecordClass, u64)>,
}

impl Timeline {
    /// `last_ns`: the run's last ack (the largest `flushed_ns`).
    pub fn new(last_ns: u64) -> Timeline {
        Timeline {
            last_ns,
            by: BTreeMap::new(),
            run: None,
        }
    }

    pub fn add(&mut self, a: &Ack, c: RecordClass) {
        let ms = self.last_ns.saturating_sub(a.flushed_ns) as f64 / 1e6;
        let b = bucket_125(ms);
        match &mut self.run {
            Some((rb, rc, n)) if *rb == b && *rc == c => *n += 1,
            _ => {
                self.flush_run();
                self.run = Some((b, c, 1));
            }
        }
    }

    fn flush_run(&mut self) {
        if let Some((b, c, n)) = self.run.take() {
            *self.by.entry(b).or_default().entry(c.name()).or_default() += n;
        }
    }

    pub fn finish(mut self) -> Vec<TimelineBucket> {
        self.flush_run();
        self.by
            .into_iter()
            .map(|(i, counts)| TimelineBucket {
                from_ms: lower_edge(i),
                to_ms: edge_125(i),
                counts,
            })
            .collect()
    }
}

/// Write+flush latency of every ack; None when there are no acks.
pub fn flush_latency(acks: &[Ack]) -> Option<LatencySummary> {
    let mut coarse = LatencyCoarse::default();
    acks.iter().for_each(|a| coarse.add(a));
    let mut fine = coarse.fine();
    acks.iter().for_each(|a| fine.add(a));
    fine.finish()
}

fn latency_ns(a: &Ack) -> u64 {
    a.flushed_ns.saturating_sub(a.record.write_time_ns)
}

/// Order-preserving bucket of a latency: its top 16 significant bits (and their
/// position). Why: exact p50/p99 of 100 M acks without keeping 100 M values. A first
/// pass counts acks per bucket (a few thousand buckets), a second keeps the exact values
/// of only the two buckets that hold the wanted ranks (at most 2^(bits-16) distinct
/// values each).
fn coarse_key(ns: u64) -> u64 {
    let shift = (64 - ns.leading_zeros()).saturating_sub(16);
    ((shift as u64) << 56) | (ns >> shift)
}

/// First pass of [`flush_latency`]: acks per coarse bucket.
#[derive(Default)]
pub struct LatencyCoarse {
    count: u64,
    max_ns: u64,
    /// Acks per coarse key, flat: `pages[shift]` counts the keys of that shift (see
    /// `coarse_slot`), allocated when its first latency comes. Why not a map: below
    /// 65 µs every nanosecond is its own bucket, so a real run has thousands of keys,
    /// and a `BTreeMap` walk per ack was 12% of verify's CPU with 512 B records, a hash
    /// probe still 10% (perf, docs/performance.md "Verify read speed"). A run's
    /// latencies span a few shifts: 512 KiB for shift 0, 256 KiB for each other.
    pages: Vec<Vec<u64>>,
}

/// Where `coarse_key(ns)` is counted: (shift, index in its page). Shift 0 holds every
/// value below 2^16; a shift s > 0 holds top-16-bit values 2^15..2^16.
fn coarse_slot(ns: u64) -> (usize, usize) {
    let shift = (64 - ns.leading_zeros()).saturating_sub(16) as usize;
    let v = (ns >> shift) as usize;
    (shift, if shift == 0 { v } else { v - (1 << 15) })
}

/// The key whose slot is (shift, i): the inverse of `coarse_slot`.
fn slot_key(shift: usize, i: usize) -> u64 {
    let v = if shift == 0 { i } else { i + (1 << 15) };
    ((shift as u64) << 56) | v as u64
}

impl LatencyCoarse {
    pub fn add(&mut self, a: &Ack) {
        let ns = latency_ns(a);
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        let (shift, i) = coarse_slot(ns);
        if self.pages.len() <= shift {
            self.pages.resize_with(shift + 1, Vec::new);
        }
        let page = &mut self.pages[shift];
        if page.is_empty() {
            *page = vec![0; if shift == 0 { 1 << 16 } else { 1 << 15 }];
        }
        page[i] += 1;
    }

    /// (coarse key, acks) of every non-empty bucket, in key order.
    fn sorted(&self) -> Vec<(u64, u64)> {
        let mut out = vec![];
        for (shift, page) in self.pages.iter().enumerate() {
            let counted = page.iter().enumerate().filter(|(_, n)| **n > 0);
            out.extend(counted.map(|(i, &n)| (slot_key(shift, i), n)));
        }
        out
    }

    /// The second pass, which must see the same acks.
    pub fn fine(&self) -> LatencyFine {
        // The 1-based ranks `latency::nearest_rank` picks, found in the coarse buckets.
        let rank = |q: f64| ((q * self.count as f64 - 1e-9).ceil() as u64).clamp(1, self.count);
        let sorted = self.sorted();
        let mut wanted = vec![];
        for q in [0.5, 0.99] {
            if self.count == 0 {
                break;
            }
            let r = rank(q);
            let mut below = 0;
            for &(k, n) in &sorted {
                if below + n >= r {
                    wanted.push(Wanted {
                        key: k,
                        rank_in: r - below,
                        values: BTreeMap::new(),
                    });
                    break;
                }
                below += n;
            }
        }
        LatencyFine {
            count: self.count,
            max_ns: self.max_ns,
            wanted,
            by: [0; 61],
        }
    }
}

struct Wanted {
    key: u64,
    /// 1-based rank inside the bucket.
    rank_in: u64,
    /// Exact latency -> acks.
    values: BTreeMap<u64, u64>,
}

/// Second pass of [`flush_latency`]: the 1-2-5 buckets and the exact quantiles.
pub struct LatencyFine {
    count: u64,
    max_ns: u64,
    wanted: Vec<Wanted>,
    /// Acks per 1-2-5 bucket (`bucket_125` gives at most 60).
    by: [u64; 61],
}

impl LatencyFine {
    pub fn add(&mut self, a: &Ack) {
        let ns = latency_ns(a);
        self.by[bucket_125(ns as f64 / 1e3)] += 1;
        let k = coarse_key(ns);
        for w in &mut self.wanted {
            if w.key == k {
                *w.values.entry(ns).or_default() += 1;
            }
        }
    }

    pub fn finish(self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let q: Vec<f64> = self
            .wanted
            .iter()
            .map(|w| {
                let mut below = 0;
                for (&ns, &n) in &w.values {
                    if below + n >= w.rank_in {
                        return ns as f64 / 1e3;
                    }
                    below += n;
                }
                unreachable!("the second pass saw the first pass's acks")
            })
            .collect();
        Some(LatencySummary {
            count: self.count,
            p50_us: q[0],
            p99_us: q[1],
            max_us: self.max_ns as f64 / 1e3,
            buckets: (self.by.into_iter().enumerate())
                .filter(|&(_, count)| count > 0)
                .map(|(i, count)| LatencyBucket {
                    from_us: lower_edge(i),
                    to_us: edge_125(i),
                    count,
                })
                .collect(),
        })
    }
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

    #[test]
    fn the_bucket_table_gives_the_loop_s_buckets() {
        let by_loop = |v: f64| {
            let mut i = 0;
            while v >= edge_125(i) && i < 60 {
                i += 1;
            }
            i
        };
        let mut rng = crate::rng::Rng::new(3);
        let mut vs = vec![f64::NAN, f64::INFINITY, 0.0, 1e300];
        vs.extend((0..60).map(edge_125));
        vs.extend((0..60).map(|i| edge_125(i) - 1e-9));
        vs.extend((0..10_000).map(|_| (rng.next_u64() % (1 << 40)) as f64 / 1e3));
        for v in vs {
            assert_eq!(bucket_125(v), by_loop(v), "{v}");
        }
    }

    /// The flat counts' slots give back every latency's coarse key, and keep the keys'
    /// order, so the first pass's buckets come out sorted as the map gave them.
    #[test]
    fn coarse_slots_round_trip_in_key_order() {
        let mut rng = crate::rng::Rng::new(11);
        let mut ns: Vec<u64> = vec![0, 1, 65_535, 65_536, 65_537, 131_071, 131_072, u64::MAX];
        ns.extend((0..64).flat_map(|b| [1u64 << b, (1u64 << b) - 1, (1u64 << b) + 1]));
        ns.extend((0..20_000).map(|_| rng.next_u64() >> (rng.next_u64() % 64)));
        for &v in &ns {
            let (shift, i) = coarse_slot(v);
            assert_eq!(slot_key(shift, i), coarse_key(v), "{v}");
            assert!(i < if shift == 0 { 1 << 16 } else { 1 << 15 }, "{v}");
        }
        ns.sort_unstable();
        let keys: Vec<u64> = ns.iter().map(|&v| coarse_key(v)).collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]));
        let slots: Vec<(usize, usize)> = ns.iter().map(|&v| coarse_slot(v)).collect();
        assert!(slots.windows(2).all(|w| w[0] <= w[1]));
    }

    /// The timeline's counts, kept a run of equal (bucket, class) at a time, are the
    /// counts of every ack put in its bucket one by one.
    #[test]
    fn the_timeline_counts_every_ack_in_its_bucket_and_class() {
        use crate::record::RecordId;
        let classes = [RecordClass::Intact, RecordClass::Lost, RecordClass::Shorn];
        let mut rng = crate::rng::Rng::new(5);
        for n in [0usize, 1, 2, 50, 3000] {
            let mut t_ns = 1_000_000_000u64;
            let (mut acks, mut cs) = (vec![], vec![]);
            for i in 0..n {
                t_ns += rng.next_u64() % [10, 1000, 5_000_000][i % 3];
                acks.push(Ack {
                    record: RecordId {
                        stream: 0,
                        seq: i as u64,
                        offset: 0,
                        sectors: 1,
                        write_time_ns: t_ns,
                    },
                    flushed_ns: t_ns,
                });
                // Runs of one class, broken now and then.
                let c = if rng.next_u64() % 7 == 0 {
                    i % 3
                } else {
                    (i / 40) % 3
                };
                cs.push(classes[c]);
            }
            let last = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
            let mut want: BTreeMap<usize, BTreeMap<&str, u64>> = BTreeMap::new();
            for (a, c) in acks.iter().zip(&cs) {
                let b = bucket_125((last - a.flushed_ns) as f64 / 1e6);
                *want.entry(b).or_default().entry(c.name()).or_default() += 1;
            }
            let got = ack_timeline(&acks, &cs);
            assert_eq!(got.len(), want.len(), "n {n}");
            for (g, (b, counts)) in got.iter().zip(want) {
                assert_eq!(g.to_ms, edge_125(b));
                assert_eq!(g.counts, counts, "n {n}, bucket {b}");
            }
        }
    }

    /// The two-pass quantiles equal `latency::nearest_rank` over the sorted values.
    #[test]
    fn streamed_quantiles_are_the_exact_ones() {
        use crate::record::RecordId;
        let mut rng = crate::rng::Rng::new(7);
        for n in [1usize, 2, 3, 10, 99, 100, 1000, 5000] {
            for spread in [1u64, 100, 1 << 20, 1 << 40, 1 << 62] {
                let acks: Vec<Ack> = (0..n)
                    .map(|i| Ack {
                        record: RecordId {
                            stream: 0,
                            seq: i as u64,
                            offset: 0,
                            sectors: 1,
                            write_time_ns: 1000,
                        },
                        flushed_ns: 1000 + rng.next_u64() % spread,
                    })
                    .collect();
                let got = flush_latency(&acks).unwrap();
                let mut us: Vec<f64> = acks
                    .iter()
                    .map(|a| (a.flushed_ns - a.record.write_time_ns) as f64 / 1e3)
                    .collect();
                us.sort_by(|a, b| a.total_cmp(b));
                let q = |p| crate::latency::nearest_rank(&us, p).unwrap();
                assert_eq!(got.p50_us, q(0.5), "n {n} spread {spread}");
                assert_eq!(got.p99_us, q(0.99), "n {n} spread {spread}");
                assert_eq!(got.max_us, *us.last().unwrap());
                assert_eq!(got.count, n as u64);
                assert_eq!(got.buckets.iter().map(|b| b.count).sum::<u64>(), n as u64);
            }
        }
        assert!(flush_latency(&[]).is_none());
    }
}
