//! Exhaustive small-trace check of verify itself.
//!
//! Why: the scenario tests and the simulated drive sample crash states at random, so a
//! rule of verify's decision table that is wrong for one rare combination (a torn record
//! under a newer unacknowledged one, a sector reverted two generations back) can hide
//! for ever. Here the traces are small enough to enumerate EVERY state a drive can leave
//! after a cut, and the real verify (`verify::verify_device`, reading an in-memory
//! device through the streaming engine `plugpull verify` ships) must agree with a small
//! oracle on every one of them.
//!
//! The state space. A trace is writes (stamped records of 1-3 sectors) and flushes. A cut
//! lands after some prefix of it; the acknowledged records are the writes before the
//! prefix's last flush. After the cut every sector of the region holds one generation:
//! what was there before the run (zeros or another run's record), or that sector of any
//! write of the prefix that covers it. Every combination is enumerated:
//! - legal (an honest drive may leave it): each sector holds its last flushed generation
//!   or any unflushed write covering it. Choosing freely per sector is exactly "any
//!   subset of the unflushed writes, applied in any order, each torn at any sector
//!   boundaries";
//! - every other combination is a lying drive's: acknowledged sectors lost, torn, or
//!   reverted to any older generation.
//!
//! Only the longest prefix for each set of acknowledged records is enumerated: a shorter
//! prefix with the same acks leaves a subset of the same states (its sectors have fewer
//! generations to choose from).
//!
//! The oracle knows the ground truth (which write each sector came from), never decodes
//! a stamp, and judges each acknowledged record on the sectors where no later
//! acknowledged record covers it (the design's "latest acknowledged record per sector").
//! Per state, verify's verdict, class counts, failing records (stream, seq, class) and
//! ordering holes must equal the oracle's, and a legal state must never FAIL.
//!
//! Flying writes are checked apart (`check_flying_writes`): after every write landed,
//! each acknowledged record lands whole at every other place instead of its own.
//! Not enumerated here: flipped bits (tests/integration/verify_damage.rs and the simulated drive's
//! scenarios cover them).

use crate::common;

use plugpull::device::mem::MemDevice;
use plugpull::model::Verdict;
use plugpull::model::{Ack, RunLog};
use plugpull::record::RunKey;
use plugpull::record::{RecordId, RunId, SECTOR, fill_record};
use plugpull::rng::Rng;
use plugpull::verify::distribution::bucket_125;
use plugpull::verify::report::Report;
use plugpull::verify::verify_device;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SECTOR_U64: u64 = SECTOR as u64;
/// Writer clock of the first operation; operations are 1 ms apart.
const T0_NS: u64 = 1_700_000_000_000_000_000;
const OP_NS: u64 = 1_000_000;

/// One step of a trace, as the test writes it.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A record of `len` sectors at sector `at` of the region, by `stream`.
    W { stream: u16, at: u64, len: u64 },
    /// A flush that succeeds: every earlier write is acknowledged.
    F,
}

/// A trace and the region it writes.
struct Trace {
    name: String,
    /// Region size in sectors; the region starts at byte 0 of the device.
    sectors: u64,
    ops: Vec<Op>,
}

/// One write of a trace, numbered in trace order.
#[derive(Clone, Copy, Debug)]
struct Write {
    rec: RecordId,
    /// Sector range [first, end) of the region.
    first: u64,
    end: u64,
    /// The flush that acknowledged it (writer clock), if the prefix has one after it.
    flushed_ns: Option<u64>,
}

/// What a sector holds after the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gen {
    /// What was there before the run.
    Before,
    /// This sector of write number `.0` (trace order).
    Write(usize),
    /// Sector `.1` of write `.0`, landed here instead of at its own address (a flying
    /// write).
    Flying(usize, usize),
}

/// What was on the region before the run: even sectors zeros, odd sectors a record of
/// another run (so both "lost" and "stale" records arise).
fn before_sector(s: u64) -> Vec<u8> {
    let mut b = vec![0u8; SECTOR];
    if s % 2 == 1 {
        let other = RunId([0xee; 16]);
        let rec = RecordId {
            stream: 0,
            seq: 1000 + s,
            offset: s * SECTOR_U64,
            sectors: 1,
            write_time_ns: 1,
        };
        fill_record(&mut b, &RunKey::new(other), other, &rec);
    }
    b
}

/// The writes of the first `prefix` ops, numbered, with their acks as of the prefix's end.
fn writes_of(t: &Trace, prefix: usize) -> Vec<Write> {
    let mut seq = BTreeMap::<u16, u64>::new();
    let mut out: Vec<Write> = vec![];
    let mut unacked_from = 0;
    for (i, op) in t.ops[..prefix].iter().enumerate() {
        let now = T0_NS + i as u64 * OP_NS;
        match *op {
            Op::W { stream, at, len } => {
                assert!(at + len <= t.sectors, "{}: write past the region", t.name);
                let s = seq.entry(stream).or_insert(0);
                *s += 1;
                out.push(Write {
                    rec: RecordId {
                        stream,
                        seq: *s,
                        offset: at * SECTOR_U64,
                        sectors: len as u32,
                        write_time_ns: now,
                    },
                    first: at,
                    end: at + len,
                    flushed_ns: None,
                });
            }
            Op::F => {
                for w in &mut out[unacked_from..] {
                    w.flushed_ns = Some(now);
                }
                unacked_from = out.len();
            }
        }
    }
    out
}

/// Per sector of the region: every generation it may hold after the cut, the one that
/// was there first.
fn generations(t: &Trace, writes: &[Write]) -> Vec<Vec<Gen>> {
    (0..t.sectors)
        .map(|s| {
            let mut g = vec![Gen::Before];
            g.extend(
                (0..writes.len())
                    .filter(|&w| writes[w].first <= s && s < writes[w].end)
                    .map(Gen::Write),
            );
            g
        })
        .collect()
}

/// The oracle's view of one sector of one acknowledged record.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Truth {
    /// The record's own bytes.
    Own,
    /// A later write (acknowledged or not), or a later acknowledged record covers the
    /// sector and takes over its promise.
    Later,
    /// An earlier write of this run: the record's write never landed.
    Earlier,
    /// Zeros: nothing.
    Zeros,
    /// Another run's record.
    OtherRun,
    /// A sector of this run whose home is elsewhere (a flying write landed here).
    Misplaced,
}

/// The class the oracle gives one acknowledged record, from its sectors' truths and
/// whether a copy of it landed elsewhere in the span verify reads.
fn oracle_class(truths: &[Truth], landed_elsewhere: bool) -> &'static str {
    let own = truths.iter().filter(|&&t| t == Truth::Own).count();
    let bad = truths
        .iter()
        .filter(|&&t| matches!(t, Truth::Earlier | Truth::Zeros | Truth::OtherRun))
        .count();
    if truths.contains(&Truth::Misplaced) {
        // Another record's flying write landed on it.
        "misdirected"
    } else if bad == 0 {
        if own == truths.len() {
            "intact"
        } else {
            "superseded"
        }
    } else if own > 0 {
        // Part of the record landed, part did not.
        "shorn"
    } else if landed_elsewhere {
        // Nothing of it at home, but it is on the drive: at the wrong address.
        "misdirected"
    } else if truths.contains(&Truth::OtherRun) {
        // Nothing of it landed and another run's data is where it should be.
        "stale"
    } else {
        "lost"
    }
}

/// What the oracle expects verify to report for one state.
#[derive(Debug, PartialEq)]
struct Expected {
    verdict: Verdict,
    counts: BTreeMap<String, u64>,
    /// (stream, seq, class) of every failing record.
    failing: Vec<(u16, u64, String)>,
    ordering_holes: u64,
    /// Records per (ack-timeline bucket, class): the report's only per-record trace of
    /// intact and superseded records, so they are checked per flush, not just in total.
    timeline: BTreeMap<(usize, String), u64>,
}

/// What acknowledged record `r`'s sectors hold, as the oracle sees them.
fn truths_of(writes: &[Write], acked: &[usize], r: usize, state: &[Gen]) -> Vec<Truth> {
    let w = &writes[r];
    (w.first..w.end)
        .map(|s| {
            let covered_later = acked
                .iter()
                .any(|&l| l > r && writes[l].first <= s && s < writes[l].end);
            if covered_later {
                return Truth::Later;
            }
            match state[s as usize] {
                Gen::Write(x) if x == r => Truth::Own,
                Gen::Write(x) if x > r => Truth::Later,
                Gen::Write(_) => Truth::Earlier,
                Gen::Before if s % 2 == 1 => Truth::OtherRun,
                Gen::Before => Truth::Zeros,
                Gen::Flying(..) => Truth::Misplaced,
            }
        })
        .collect()
}

fn oracle(writes: &[Write], state: &[Gen]) -> Expected {
    let acked: Vec<usize> = (0..writes.len())
        .filter(|&w| writes[w].flushed_ns.is_some())
        .collect();
    // Verify reads from the first acknowledged sector to the last.
    let span = acked.iter().map(|&r| writes[r].first).min().unwrap_or(0) as usize
        ..acked.iter().map(|&r| writes[r].end).max().unwrap_or(0) as usize;
    let landed_elsewhere = |r: usize| {
        state[span.clone()]
            .iter()
            .any(|g| matches!(*g, Gen::Flying(x, _) if x == r))
    };
    let classes: Vec<(usize, &str)> = acked
        .iter()
        .map(|&r| {
            let truths = truths_of(writes, &acked, r, state);
            (r, oracle_class(&truths, landed_elsewhere(r)))
        })
        .collect();
    let flushed = |r: usize| writes[r].flushed_ns.expect("acknowledged");
    let last_ack = acked.iter().map(|&r| flushed(r)).max().unwrap_or(0);
    let newest_survivor = classes
        .iter()
        .filter(|(_, c)| *c == "intact")
        .map(|&(r, _)| writes[r].rec.write_time_ns)
        .max();
    let mut e = Expected {
        verdict: Verdict::Inconclusive,
        counts: BTreeMap::new(),
        failing: vec![],
        ordering_holes: 0,
        timeline: BTreeMap::new(),
    };
    for &(r, c) in &classes {
        *e.counts.entry(c.to_string()).or_default() += 1;
        let ms = (last_ack - flushed(r)) as f64 / 1e6;
        *e.timeline
            .entry((bucket_125(ms), c.to_string()))
            .or_default() += 1;
        if !matches!(c, "intact" | "superseded") {
            e.failing
                .push((writes[r].rec.stream, writes[r].rec.seq, c.to_string()));
            e.ordering_holes += newest_survivor.is_some_and(|t| t > flushed(r)) as u64;
        }
    }
    e.failing.sort();
    // No record read back intact (all of them overwritten later): nothing says whether
    // the drive kept them, so no PASS.
    let read_back = classes.iter().any(|&(_, c)| c == "intact");
    e.verdict = if acked.is_empty() || (e.failing.is_empty() && !read_back) {
        Verdict::Inconclusive
    } else if e.failing.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    e
}

/// Verify's report in the oracle's terms.
fn observed(r: &Report) -> Expected {
    let mut failing: Vec<(u16, u64, String)> = r
        .findings
        .iter()
        .map(|f| (f.stream, f.seq, f.class.name().to_string()))
        .collect();
    failing.sort();
    let mut timeline = BTreeMap::new();
    for b in &r.ack_timeline {
        for (c, n) in &b.counts {
            timeline.insert((bucket_125(b.from_ms), c.to_string()), *n);
        }
    }
    Expected {
        verdict: r.verdict,
        counts: r
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.to_string(), *n))
            .collect(),
        failing,
        ordering_holes: r.ordering_holes.count,
        timeline,
    }
}

/// Whether an honest drive may leave `state`: every sector holds its last flushed
/// generation or a write that was not flushed yet.
fn is_legal(writes: &[Write], state: &[Gen]) -> bool {
    state.iter().enumerate().all(|(s, g)| {
        let s = s as u64;
        let last_flushed = (0..writes.len())
            .rev()
            .find(|&w| writes[w].flushed_ns.is_some() && writes[w].first <= s && s < writes[w].end)
            .map_or(Gen::Before, Gen::Write);
        *g == last_flushed || matches!(*g, Gen::Write(w) if writes[w].flushed_ns.is_none())
    })
}

/// The varying sectors of a state, e.g. "s0=w3 s1=- s2=w1" (- = what was there before).
fn describe(varying: &[usize], state: &[Gen]) -> String {
    varying
        .iter()
        .map(|&s| match state[s] {
            Gen::Before => format!("s{s}=-"),
            Gen::Write(w) => format!("s{s}=w{w}"),
            Gen::Flying(w, i) => format!("s{s}=w{w}[{i}]"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What checking one trace found.
#[derive(Default)]
struct Tally {
    states: u64,
    legal: u64,
    /// States where the oracle says an acknowledged record was lost.
    failing: u64,
    mismatches: u64,
    /// The first few mismatches, described.
    examples: Vec<String>,
    /// How often each class was expected (all records of all states).
    classes: BTreeMap<String, u64>,
}

/// The prefixes to cut at: the longest one for each set of acknowledged records (just
/// before every flush, and the whole trace).
fn cut_points(t: &Trace) -> Vec<usize> {
    let mut cuts: Vec<usize> = (0..t.ops.len())
        .filter(|&i| matches!(t.ops[i], Op::F))
        .collect();
    cuts.push(t.ops.len());
    cuts
}

/// The run as the witness holds it after a cut: the acknowledged writes.
fn run_log(t: &Trace, run: RunId, writes: &[Write]) -> RunLog {
    let mut descriptor = common::test_descriptor(run);
    descriptor.settings.region_bytes = t.sectors * SECTOR_U64;
    descriptor.settings.record_bytes_min = SECTOR_U64;
    // The writer's settings must allow every record (a log holding a record no writer
    // of the run could write is refused as impossible): `random_overlaps` draws up to 4.
    let longest = writes
        .iter()
        .map(|w| w.rec.sectors as u64)
        .max()
        .unwrap_or(1);
    descriptor.settings.record_bytes_max = longest.max(3) * SECTOR_U64;
    descriptor.settings.streams = 1 + writes.iter().map(|w| w.rec.stream).max().unwrap_or(0);
    RunLog {
        files: Default::default(),
        descriptor,
        acks: writes
            .iter()
            .filter_map(|w| {
                w.flushed_ns.map(|f| Ack {
                    record: w.rec,
                    flushed_ns: f,
                })
            })
            .collect(),
        events: vec![],
    }
}

const RUN: RunId = RunId([0x5a; 16]);

/// The in-memory drive of one cut point, and the bytes each generation puts on it.
struct Image {
    dev: Arc<MemDevice>,
    before: Vec<Vec<u8>>,
    /// Each write's record, as the writer would have written it.
    bytes: Vec<Vec<u8>>,
}

impl Image {
    /// A drive holding what was there before the run.
    fn new(t: &Trace, writes: &[Write]) -> Image {
        let key = RunKey::new(RUN);
        let dev = Arc::new(MemDevice::new((t.sectors * SECTOR_U64) as usize));
        let before: Vec<Vec<u8>> = (0..t.sectors).map(before_sector).collect();
        dev.edit(|img| {
            for (s, b) in before.iter().enumerate() {
                img[s * SECTOR..(s + 1) * SECTOR].copy_from_slice(b);
            }
        });
        let bytes = writes
            .iter()
            .map(|w| {
                let mut b = vec![0u8; w.rec.len_bytes() as usize];
                fill_record(&mut b, &key, RUN, &w.rec);
                b
            })
            .collect();
        Image { dev, before, bytes }
    }

    /// Puts `state`'s generations on `sectors` of the drive.
    fn paint(&self, state: &[Gen], sectors: &[usize], writes: &[Write]) {
        self.dev.edit(|img| {
            for &s in sectors {
                let (src, k) = match state[s] {
                    Gen::Before => (&self.before[s], 0),
                    Gen::Write(w) => (&self.bytes[w], (s as u64 - writes[w].first) as usize),
                    Gen::Flying(w, i) => (&self.bytes[w], i),
                };
                img[s * SECTOR..(s + 1) * SECTOR]
                    .copy_from_slice(&src[k * SECTOR..(k + 1) * SECTOR]);
            }
        });
    }
}

/// Runs verify on every state of every cut point of `t`.
fn check_trace(t: &Trace, tally: &mut Tally) {
    for prefix in cut_points(t) {
        let writes = writes_of(t, prefix);
        let img = Image::new(t, &writes);
        let log = run_log(t, RUN, &writes);
        // The witness keeps acks in arrival order; verify must not depend on how the
        // streams' acks interleave, so every other state is judged from the acks with
        // the streams in reverse order (each stream's own acks stay in seq order, as a
        // writer sends them: a log where they go back is refused as impossible).
        let mut reversed = log.clone();
        reversed
            .acks
            .sort_by_key(|a| std::cmp::Reverse(a.record.stream));
        let logs = [&log, &reversed];
        let gens = generations(t, &writes);
        // Only sectors some write covers can differ between states.
        let varying: Vec<usize> = (0..gens.len()).filter(|&s| gens[s].len() > 1).collect();
        let radix: Vec<usize> = varying.iter().map(|&s| gens[s].len()).collect();
        let mut pick = vec![0usize; varying.len()];
        let mut state = vec![Gen::Before; gens.len()];
        loop {
            for (&s, &k) in varying.iter().zip(&pick) {
                state[s] = gens[s][k];
            }
            img.paint(&state, &varying, &writes);
            let order = tally.states as usize % 2;
            let log = logs[order];
            let report = verify_device(img.dev.clone(), log, Duration::from_secs(30));
            let what = || {
                format!(
                    "{} cut after op {prefix}, acks {}, {}",
                    t.name,
                    ["in order", "reversed"][order],
                    describe(&varying, &state)
                )
            };
            tally.record(&writes, &state, &report, what);
            if !next_state(&mut pick, &radix) {
                break;
            }
        }
    }
}

impl Tally {
    fn absorb(&mut self, other: Tally) {
        self.states += other.states;
        self.legal += other.legal;
        self.failing += other.failing;
        self.mismatches += other.mismatches;
        self.examples.extend(other.examples);
        for (c, n) in other.classes {
            *self.classes.entry(c).or_default() += n;
        }
    }

    /// Judges one state: verify's report against the oracle's, and never a FAIL for a
    /// state an honest drive may leave.
    fn record(
        &mut self,
        writes: &[Write],
        state: &[Gen],
        report: &Report,
        what: impl Fn() -> String,
    ) {
        let want = oracle(writes, state);
        let got = observed(report);
        let legal = is_legal(writes, state);
        self.states += 1;
        self.legal += legal as u64;
        self.failing += (want.verdict == Verdict::Fail) as u64;
        for (c, n) in &want.counts {
            *self.classes.entry(c.clone()).or_default() += n;
        }
        let honest_accused = legal && got.verdict == Verdict::Fail;
        if got != want || honest_accused {
            self.mismatches += 1;
            if self.examples.len() < 5 {
                self.examples.push(format!(
                    "{} (legal: {legal}):\n  oracle {want:?}\n  verify {got:?}",
                    what()
                ));
            }
        }
    }
}

/// Flying writes, after every write of `t` landed: one acknowledged record lands whole
/// at another place of the region instead of its own, whose sectors keep what the other
/// writes left there. Every acknowledged record, every other landing place.
fn check_flying_writes(t: &Trace, tally: &mut Tally) {
    let writes = writes_of(t, t.ops.len());
    let img = Image::new(t, &writes);
    let log = run_log(t, RUN, &writes);
    let all: Vec<usize> = (0..t.sectors as usize).collect();
    // The newest write at each sector, leaving out write `skip`.
    let newest = |s: usize, skip: Option<usize>| {
        (0..writes.len())
            .rev()
            .find(|&w| Some(w) != skip && writes[w].first <= s as u64 && (s as u64) < writes[w].end)
            .map_or(Gen::Before, Gen::Write)
    };
    for x in (0..writes.len()).filter(|&x| writes[x].flushed_ns.is_some()) {
        let (first, len) = (
            writes[x].first as usize,
            (writes[x].end - writes[x].first) as usize,
        );
        for at in (0..=all.len() - len).filter(|&at| at != first) {
            let mut state: Vec<Gen> = all.iter().map(|&s| newest(s, Some(x))).collect();
            for i in 0..len {
                state[at + i] = Gen::Flying(x, i);
            }
            img.paint(&state, &all, &writes);
            let report = verify_device(img.dev.clone(), &log, Duration::from_secs(30));
            let what = || {
                format!(
                    "{}: w{x} landed at s{at}, {}",
                    t.name,
                    describe(&all, &state)
                )
            };
            tally.record(&writes, &state, &report, what);
        }
    }
}

/// Steps `pick` to the next combination, counting in mixed radix; false once every
/// combination was visited.
fn next_state(pick: &mut [usize], radix: &[usize]) -> bool {
    for (k, &r) in pick.iter_mut().zip(radix) {
        *k += 1;
        if *k < r {
            return true;
        }
        *k = 0;
    }
    false
}

fn w(stream: u16, at: u64, len: u64) -> Op {
    Op::W { stream, at, len }
}

/// One stream writing a ring of `sectors` sectors sequentially, records of the given
/// lengths; a record that would cross the end starts again at 0. Flushes after the
/// writes numbered in `flush_after` (1-based counts of writes so far).
fn ring(name: &str, sectors: u64, lens: &[u64], flush_after: &[usize]) -> Trace {
    let mut ops = vec![];
    let mut at = 0;
    for (i, &len) in lens.iter().enumerate() {
        if at + len > sectors {
            at = 0;
        }
        ops.push(w(0, at, len));
        at += len;
        if flush_after.contains(&(i + 1)) {
            ops.push(Op::F);
        }
    }
    Trace {
        name: name.to_string(),
        sectors,
        ops,
    }
}

/// Random overlapping writes of 1-3 sectors by one stream, a flush after each write with
/// probability 1/3.
fn random_overlaps(seed: u64, sectors: u64, writes: usize) -> Trace {
    let mut rng = Rng::new(seed);
    let mut ops = vec![];
    for _ in 0..writes {
        let len = rng.range(1, 4);
        let at = rng.below(sectors - len + 1);
        ops.push(w(0, at, len));
        if rng.below(3) == 0 {
            ops.push(Op::F);
        }
    }
    Trace {
        name: format!("random overlaps (seed {seed})"),
        sectors,
        ops,
    }
}

/// Two streams, each a ring in its own half of the region, interleaved, shared flushes.
fn two_streams() -> Trace {
    let ops = vec![
        w(0, 0, 2),
        w(1, 3, 2),
        Op::F,
        w(0, 2, 1),
        w(1, 5, 1),
        w(0, 0, 1),
        Op::F,
        w(1, 3, 3),
        w(0, 1, 2),
        w(1, 4, 1),
    ];
    Trace {
        name: "two streams".into(),
        sectors: 6,
        ops,
    }
}

fn traces() -> Vec<Trace> {
    vec![
        // A ring wrapping twice, flushed every few writes.
        ring("ring wrap", 6, &[2, 3, 1, 3, 2, 1, 2, 3, 1], &[2, 5, 7]),
        // Ten writes between two flushes: the honest drive's freedom at its largest.
        ring(
            "ten writes between flushes",
            5,
            &[2, 1, 3, 1, 2, 1, 2, 1, 1, 1, 2],
            &[1, 11],
        ),
        // Ten writes after the last flush, all over the same 4 sectors.
        ring(
            "ten unflushed writes on 4 sectors",
            4,
            &[1, 2, 3, 1, 2, 2, 1, 3, 1, 2, 1, 2],
            &[2],
        ),
        random_overlaps(11, 6, 9),
        random_overlaps(12, 5, 9),
        two_streams(),
        across_read_chunks(),
    ]
}

/// Records that straddle the boundary between verify's 2 MiB read chunks (read by its
/// two reader threads): a record at sector 0 stretches the span past one chunk.
fn across_read_chunks() -> Trace {
    let chunk = (2 << 20) / SECTOR_U64;
    // Few states: each verify here reads (and allocates buffers for) two 2 MiB chunks.
    let ops = vec![
        w(0, 0, 1),
        w(0, chunk - 1, 2),
        Op::F,
        w(0, chunk - 2, 3),
        w(0, chunk, 1),
        Op::F,
        w(0, chunk - 1, 2),
    ];
    Trace {
        name: "across verify's read chunks".into(),
        sectors: chunk + 3,
        ops,
    }
}

#[test]
fn verify_agrees_with_the_oracle_on_every_crash_state_of_small_traces() {
    let t0 = Instant::now();
    let mut total = Tally::default();
    for t in traces() {
        let t1 = Instant::now();
        let (mut tally, mut flying) = (Tally::default(), Tally::default());
        check_trace(&t, &mut tally);
        // Every landing place of every record: too many verifies of 2 MiB chunks.
        if t.sectors <= 64 {
            check_flying_writes(&t, &mut flying);
        }
        let line = format!(
            "  {}: {} states ({} legal, {} failing) and {} with a flying write, {} mismatches, {:.1} s\n",
            t.name,
            tally.states,
            tally.legal,
            tally.failing,
            flying.states,
            tally.mismatches + flying.mismatches,
            t1.elapsed().as_secs_f64()
        );
        std::io::stderr().write_all(line.as_bytes()).unwrap();
        total.absorb(tally);
        total.absorb(flying);
    }
    let msg = format!(
        "verify_exhaustive: {} crash states checked ({} legal, {} with a lost acknowledged record), {} mismatches, {:.1} s; records expected per class: {:?}\n",
        total.states,
        total.legal,
        total.failing,
        total.mismatches,
        t0.elapsed().as_secs_f64(),
        total.classes,
    );
    std::io::stderr().write_all(msg.as_bytes()).unwrap();
    assert_eq!(
        total.mismatches,
        0,
        "verify disagrees with the oracle:\n{}",
        total.examples.join("\n")
    );
    // The enumeration must have reached every outcome it claims to cover.
    assert!(total.legal > 0 && total.failing > 0);
    for c in [
        "intact",
        "superseded",
        "lost",
        "shorn",
        "stale",
        "misdirected",
    ] {
        assert!(
            total.classes.get(c).copied().unwrap_or(0) > 0,
            "no state made a record {c}: the traces do not cover it"
        );
    }
}

/// The check can fail: a state where the oracle sees a lost record, judged by the real
/// verify (no mismatch), then the same report with every record called intact and the
/// verdict PASS (a mismatch).
#[test]
fn a_wrong_judgment_is_caught() {
    let t = ring("ring", 4, &[2, 2], &[2]);
    let writes = writes_of(&t, t.ops.len());
    let img = Image::new(&t, &writes);
    let log = run_log(&t, RUN, &writes);
    // Every sector as before the run: both acknowledged records lost.
    let state = vec![Gen::Before; t.sectors as usize];
    let all: Vec<usize> = (0..state.len()).collect();
    img.paint(&state, &all, &writes);
    let report = verify_device(img.dev.clone(), &log, Duration::from_secs(30));
    let mut tally = Tally::default();
    tally.record(&writes, &state, &report, String::new);
    assert_eq!(
        (tally.states, tally.mismatches),
        (1, 0),
        "{:?}",
        tally.examples
    );
    assert_eq!(report.verdict, Verdict::Fail, "{}", report.to_text());
    let mut wrong = report.clone();
    wrong.verdict = Verdict::Pass;
    wrong.findings.clear();
    for n in wrong.counts.values_mut() {
        *n = 0;
    }
    wrong.counts.insert("intact", report.acked_records);
    tally.record(&writes, &state, &wrong, || "a wrong judgment".into());
    assert_eq!(tally.mismatches, 1, "a wrong judgment went unseen");
}
