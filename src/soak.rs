//! `plugpull soak`: hundreds of seeded power-cut cycles in one process, to show that
//! verify never raises a false alarm on an honest drive and never misses a fault a lying
//! one injected.
//!
//! Why in-process: a FUSE cycle costs about a second and needs root; this one costs
//! milliseconds and needs nothing, yet runs the same code that matters: the real writer
//! engine, the drive model, the real verify, and the oracle comparison of
//! `sim::compare`. The FUSE path is covered by tests/integration/scenarios.rs.
//!
//! Why fully deterministic: one seed fixes the profile and its knobs, the placement, the
//! record size, the drive size and the cut point. The cut is not a timer but an operation
//! count: the drive loses power just before the writer's N-th write or flush, so a
//! failing seed replays exactly with `plugpull soak --seed S --cycles 1`.

use crate::cycle::{AfterCut, judge, write_until_cut};
use crate::device::identity::DeviceIdentity;
use crate::device::{Device, FlushMethod};
use crate::model::{Ack, Placement, RunLog, Verdict};
use crate::record::RunId;
use crate::rng::Rng;
use crate::sim::compare::{Findings, diff, expected, found};
use crate::sim::{Kind, Profile, SimDrive};
use crate::write::plan::Plan;
use crate::write::run_descriptor;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Honest cycles use the honest profiles; faulty cycles every other one.
const FAULTY: [Kind; 8] = [
    Kind::Lying,
    Kind::LoseRecent,
    Kind::Shorn,
    Kind::Corrupt,
    Kind::Misdirected,
    Kind::Reorder,
    Kind::MetadataLoss,
    Kind::Dead,
];

/// Everything one seed decides.
#[derive(Clone, Debug)]
pub struct CycleSpec {
    pub seed: u64,
    pub profile: Profile,
    pub placement: Placement,
    pub record_bytes: u64,
    pub drive_bytes: u64,
    /// The drive loses power just before the writer's operation number `cut_op` (1-based:
    /// writes and flushes alternate, so odd numbers cut before a write, even ones between
    /// a write and its flush).
    pub cut_op: u64,
}

impl CycleSpec {
    /// The cycle of `seed`: honest or faulty profile, every knob drawn from the seed.
    pub fn new(seed: u64, faulty: bool) -> CycleSpec {
        let mut rng = Rng::new(seed);
        let kind = if faulty {
            FAULTY[rng.below(FAULTY.len() as u64) as usize]
        } else if rng.chance(0.5) {
            Kind::Honest
        } else {
            Kind::HonestPlp
        };
        let mut p = Profile::new(kind);
        // No simulated latency: the soak is about outcomes, not timing.
        p.flush_latency_us = 0;
        p.early_destage_p = rng.range(0, 50) as f64 / 100.0;
        p.tear_p = rng.range(0, 50) as f64 / 100.0;
        p.fault_p = rng.range(1, 20) as f64 / 100.0;
        p.lose_recent_n = rng.range(1, 32) as usize;
        p.cache_writes = rng.range(4, 256) as usize;
        p.hold_flushes = rng.range(3, 300);
        p.corrupt_bits_max = rng.range(1, 8) as u32;
        p.unreadable_fraction = rng.range(5, 30) as f64 / 100.0;
        // Records on a fixed grid: a later record covers an earlier one whole, the case
        // in which the oracle's supersede rule and verify's agree (sim::compare, rule 2).
        let record_bytes = [4096u64, 8192, 16384][rng.below(3) as usize];
        let slots = rng.range(16, 512);
        let placement = if rng.chance(0.5) {
            Placement::Sequential
        } else {
            Placement::Random
        };
        CycleSpec {
            seed,
            profile: p,
            placement,
            record_bytes,
            drive_bytes: slots * record_bytes,
            cut_op: rng.range(3, 3000),
        }
    }
}

/// What one cycle showed.
#[derive(Debug)]
pub struct CycleOutcome {
    pub spec: CycleSpec,
    pub faulty: bool,
    pub acked: usize,
    pub verdict: Verdict,
    pub expected: Findings,
    /// `None` when the report was truncated (cannot happen at these sizes).
    pub found: Option<Findings>,
}

impl CycleOutcome {
    /// An honest drive judged anything but PASS.
    pub fn false_alarm(&self) -> bool {
        !self.faulty && self.verdict != Verdict::Pass
    }
    /// The oracle says an acknowledged record was damaged and verify did not FAIL.
    pub fn miss(&self) -> bool {
        !self.expected.is_empty() && self.verdict != Verdict::Fail
    }
    /// Verify's findings differ from the oracle's, record by record.
    pub fn mismatch(&self) -> bool {
        self.found.as_ref() != Some(&self.expected)
    }
    pub fn ok(&self) -> bool {
        !self.false_alarm() && !self.miss() && !self.mismatch()
    }
    pub fn describe(&self) -> String {
        let s = &self.spec;
        let mut what = vec![];
        if self.false_alarm() {
            what.push("FALSE ALARM");
        }
        if self.miss() {
            what.push("MISS");
        }
        if self.mismatch() {
            what.push("findings differ from the oracle");
        }
        let mut out = format!(
            "seed {} ({} cycle): {}; profile {}, {:?} {}-byte records on a {}-byte drive, cut before op {}; {} acked, verdict {}",
            s.seed,
            if self.faulty { "faulty" } else { "honest" },
            if what.is_empty() {
                "ok".to_string()
            } else {
                what.join(", ")
            },
            s.profile,
            s.placement,
            s.record_bytes,
            s.drive_bytes,
            s.cut_op,
            self.acked,
            self.verdict.name()
        );
        if self.mismatch() {
            let f = self.found.clone().unwrap_or_default();
            out.push('\n');
            out.push_str(&diff(&self.expected, &f));
        }
        out
    }
}

/// The simulated drive with a power switch that trips before the writer's N-th
/// operation (writes and flushes count; reads do not). One writer stream issues one
/// operation at a time, so the cut lands at the same point of the same workload every
/// time. Public for the tests that cut the real writer engine the same way.
pub struct CutAt<'a> {
    drive: &'a SimDrive,
    ops: AtomicU64,
    cut_op: u64,
}

impl<'a> CutAt<'a> {
    /// `drive`, to lose power just before operation `cut_op` (1 = the first).
    pub fn new(drive: &'a SimDrive, cut_op: u64) -> CutAt<'a> {
        CutAt {
            drive,
            ops: AtomicU64::new(0),
            cut_op,
        }
    }

    fn tick(&self) -> io::Result<()> {
        if self.ops.fetch_add(1, Ordering::SeqCst) + 1 == self.cut_op {
            self.drive.cut()?;
        }
        Ok(())
    }
}

impl Device for CutAt<'_> {
    fn size_bytes(&self) -> u64 {
        self.drive.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        self.drive.logical_block_bytes()
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.tick()?;
        self.drive.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.tick()?;
        self.drive.flush()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.drive.read_at(buf, offset)
    }
}

/// Runs one cycle: write until the cut, power on, verify, compare with the oracle.
pub fn run_cycle(seed: u64, faulty: bool) -> io::Result<CycleOutcome> {
    run_cycle_on(seed, faulty).map(|(o, _)| o)
}

/// [`run_cycle`], also returning the drive (its oracle events, for debugging a seed).
pub fn run_cycle_on(seed: u64, faulty: bool) -> io::Result<(CycleOutcome, Arc<SimDrive>)> {
    let spec = CycleSpec::new(seed, faulty);
    let drive = Arc::new(SimDrive::create(
        spec.drive_bytes,
        spec.profile.clone(),
        seed,
        None,
    )?);
    let plan = soak_plan(&spec);
    let sink: Mutex<Vec<Ack>> = Mutex::new(Vec::new());
    let dev = CutAt::new(&drive, spec.cut_op);
    // The cut is inside the device; the writer stops at its first failed operation,
    // which the cut guarantees.
    write_until_cut(&dev, &plan, &sink, |_| ((), AfterCut::LetItRun)).map_err(io::Error::other)?;
    let acks = sink.into_inner().unwrap_or_else(|e| e.into_inner());
    let descriptor = run_descriptor(
        &plan,
        DeviceIdentity {
            target: "soak".into(),
            kind: "simulated".into(),
            size_bytes: spec.drive_bytes,
            ..Default::default()
        },
        FlushMethod::Fdatasync,
        true,
    );
    let log = RunLog {
        files: Default::default(),
        descriptor,
        acks,
        events: vec![],
    };
    let powered = drive
        .power_on()
        .map(|()| drive.clone() as Arc<dyn Device>)
        .map_err(|e| e.to_string());
    let report = judge(powered, &log, Duration::from_secs(10))?;
    let oracle = drive.oracle();
    let exp = expected(&plan.run.hex(), &log.acks, &oracle);
    Ok((
        CycleOutcome {
            acked: log.acks.len(),
            verdict: report.verdict,
            found: found(&report),
            expected: exp,
            faulty,
            spec,
        },
        drive,
    ))
}

/// The writer of one soak cycle: one stream of fixed-size records over the whole drive,
/// under a run id made from the seed (so a cycle replays byte for byte).
fn soak_plan(spec: &CycleSpec) -> Plan {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&spec.seed.to_le_bytes());
    id[8..].copy_from_slice(b"soakcycl");
    Plan {
        run: RunId(id),
        region_offset: 0,
        region_bytes: spec.drive_bytes,
        record_min: spec.record_bytes,
        record_max: spec.record_bytes,
        placement: spec.placement,
        streams: 1,
        seed: spec.seed,
        // Random placement on the record grid (see CycleSpec::new).
        align: spec.record_bytes,
        count: None,
        duration: None,
    }
}

/// Totals of a soak (`--json` prints them as `plugpull-soak/1`).
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub honest: u64,
    pub faulty: u64,
    /// Faulty cycles in which a fault hit an acknowledged record (the rest had nothing
    /// to find: the cut came before the fault, or the fault hit only unacked writes).
    pub faulty_with_damage: u64,
    pub false_alarms: u64,
    pub misses: u64,
    pub mismatches: u64,
    /// The command that replays each failing cycle.
    pub failing: Vec<String>,
}

/// Runs `cycles` honest and `cycles` faulty cycles with seeds `seed`, `seed + 1`, ...
/// `report` sees every failing cycle as it happens.
pub fn soak(
    seed: u64,
    cycles: u64,
    honest: bool,
    faulty: bool,
    mut report: impl FnMut(&CycleOutcome),
) -> io::Result<Summary> {
    let mut s = Summary::default();
    for i in 0..cycles {
        let cs = seed.wrapping_add(i);
        for (want, is_faulty) in [(honest, false), (faulty, true)] {
            if !want {
                continue;
            }
            let o = run_cycle(cs, is_faulty)?;
            if is_faulty {
                s.faulty += 1;
                s.faulty_with_damage += !o.expected.is_empty() as u64;
            } else {
                s.honest += 1;
            }
            s.false_alarms += o.false_alarm() as u64;
            s.misses += o.miss() as u64;
            s.mismatches += o.mismatch() as u64;
            if !o.ok() {
                report(&o);
                s.failing.push(format!(
                    "plugpull soak --seed {cs} --cycles 1 --only {}",
                    if is_faulty { "faulty" } else { "honest" }
                ));
            }
        }
    }
    Ok(s)
}

/// Which kinds of cycle a soak runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kinds {
    Both,
    HonestOnly,
    FaultyOnly,
}

/// What `plugpull soak` runs.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// First seed; random when `None` (printed either way).
    pub seed: Option<u64>,
    /// Cycles of each kind.
    pub cycles: u64,
    pub kinds: Kinds,
    /// Print the expected and found findings of every failing cycle.
    pub verbose: bool,
    /// Print the totals as JSON on stdout instead of text.
    pub json: bool,
}

/// `plugpull soak`: runs the cycles and prints the totals and how to replay each failing
/// cycle. The soak passed when `failing` is empty.
pub fn run(o: SoakOptions) -> io::Result<Summary> {
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let (honest, faulty) = match o.kinds {
        Kinds::Both => (true, true),
        Kinds::HonestOnly => (true, false),
        Kinds::FaultyOnly => (false, true),
    };
    eprintln!(
        "plugpull soak: {} cycle(s) per kind from seed {seed} (in-process simulated drive, cut at a seeded operation)",
        o.cycles
    );
    let t0 = Instant::now();
    let s = soak(seed, o.cycles, honest, faulty, |c| {
        eprintln!("FAILED {}", c.describe());
        if o.verbose {
            eprintln!(
                "  expected: {:?}\n  found:    {:?}",
                named(&c.expected),
                c.found.as_ref().map(named)
            );
        }
    })?;
    let last_seed = seed.wrapping_add(o.cycles.saturating_sub(1));
    let secs = t0.elapsed().as_secs_f64();
    if o.json {
        let v = serde_json::json!({
            "format": "plugpull-soak/1",
            "first_seed": seed,
            "last_seed": last_seed,
            "secs": secs,
            "totals": &s,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(io::Error::other)?
        );
        return Ok(s);
    }
    println!(
        "soak: seeds {seed}..{last_seed}: {} honest cycles, {} false alarm(s); {} faulty cycles ({} with damage to acknowledged records), {} miss(es); {} cycle(s) whose findings differ from the oracle; {secs:.1} s",
        s.honest, s.false_alarms, s.faulty, s.faulty_with_damage, s.misses, s.mismatches,
    );
    for f in &s.failing {
        println!("  reproduce: {f}");
    }
    Ok(s)
}

/// Findings with their classes by name, as the verbose dump has always printed them
/// (`(1, 7): ("lost", 0)`).
fn named(
    f: &crate::sim::compare::Findings,
) -> std::collections::BTreeMap<(u16, u64), (&'static str, u64)> {
    f.iter().map(|(k, (c, n))| (*k, (c.name(), *n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The switch trips just before the N-th write or flush, whichever it is; reads do
    /// not count towards it.
    #[test]
    fn the_switch_trips_before_the_nth_write_or_flush() {
        let drive = SimDrive::create(1 << 20, Profile::parse("honest").unwrap(), 1, None).unwrap();
        let dev = CutAt::new(&drive, 3);
        let block = vec![0u8; 4096];
        let mut back = vec![0u8; 4096];
        dev.write_at(&block, 0).unwrap();
        dev.read_at(&mut back, 0).unwrap();
        dev.flush().unwrap();
        assert!(
            dev.write_at(&block, 4096).is_err(),
            "operation 3 meets a dead drive"
        );
        assert!(dev.flush().is_err(), "and the drive stays off");
    }

    #[test]
    fn a_seed_replays_exactly() {
        for seed in [3, 4, 5] {
            for faulty in [false, true] {
                let a = run_cycle(seed, faulty).unwrap();
                let b = run_cycle(seed, faulty).unwrap();
                assert_eq!(
                    (a.acked, a.verdict, &a.expected, &a.found),
                    (b.acked, b.verdict, &b.expected, &b.found),
                    "seed {seed} faulty {faulty}"
                );
            }
        }
    }

    #[test]
    fn the_cut_lands_before_the_chosen_operation() {
        // An odd cut_op cuts before a write: every write before it was flushed and
        // acknowledged, so acked = (cut_op - 1) / 2.
        let mut n = 0;
        for seed in 0..40 {
            let spec = CycleSpec::new(seed, false);
            if spec.cut_op % 2 == 1 {
                let o = run_cycle(seed, false).unwrap();
                assert_eq!(o.acked as u64, (spec.cut_op - 1) / 2, "seed {seed}");
                n += 1;
            }
        }
        assert!(n > 0);
    }
}
