//! The witness's storage cut at every operation: proves the durability claim of the ack
//! log and journal the way plugpull proves drives.
//!
//! Each case is a seeded sequence of runs, acks (appends, resends, commits), events,
//! journal rotations and checkpoints, driven through the real `AckLog`, `Journal` and
//! recovery code (`journal_replay::replay`, `Journal::open`, `AckLog::open` of every log: what
//! `plugpull listen` does at start) over a simulated disk (`witness::store::storage::sim`) that
//! loses power at operation N: unsynced writes dropped, a random subset kept, the last
//! one torn at a sector boundary, unsynced name changes cut to a prefix. After every cut
//! the disk boots again and the checks run:
//!
//! - every ack ever reported durable (a commit's return value, or the durable count a
//!   recovered log reports, which `listen` sends writers in its Welcome) is still served:
//!   by verify's read of the witness directory before replay (log + journal overlay) and
//!   by the recovered log after it;
//! - nothing was invented: ack i of a run is the i-th ack appended to that run, never
//!   one that was not appended, never out of order, never another run's;
//! - a run whose creation returned is still there, with its descriptor.
//!
//! Short sequences are cut at every operation of their first boot (then at a random
//! operation of the next boot, which includes the recovery itself); long ones at random
//! operations of several boots in a row. The count of cut points checked is printed.
//!
//! Environment:
//! - `PLUGPULL_WITNESS_CUTS=N`: check at least N cut points (default 10,000; the soak
//!   figure in docs/performance.md is 1,000,000 with a release build);
//! - `PLUGPULL_WITNESS_CASE="SEED:STEPS:C1,C2,..."`: replay one case (printed on
//!   failure);
//! - `PLUGPULL_WITNESS_TEARS=scattered`: a torn write keeps any subset of its sectors,
//!   not only a prefix (beyond the simulated drive's fault model; see docs/protocol.md).

use plugpull::model::{Ack, RunDescriptor, RunLog, WitnessEvent};
use plugpull::record::{RecordId, RunId};
use plugpull::rng::Rng;
use plugpull::witness::store::checker::DAMAGE_EVENT;
use plugpull::witness::store::error::StoreError;
use plugpull::witness::store::journal::{Journal, JournalOptions};
use plugpull::witness::store::layout::{LOG_EXTENSION, log_path};
use plugpull::witness::store::log::{self, AckLog, Recovery};
use plugpull::witness::store::storage::Storage;
use plugpull::witness::store::storage::sim::{CutStats, SimDisk};
use plugpull::witness::store::{journal_replay, reader};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::common;

const DIR: &str = "/witness";
/// Runs a case may create.
const MAX_RUNS: u64 = 4;

/// Ack `i` of run number `run`: what a writer would send, different for every run and
/// index, so a lost, invented, reordered or misplaced ack is seen. The times jitter and
/// odd runs place records at random, as real runs do: perfectly regular acks pack into
/// a few bytes a frame (PackedAcks), and logs that small never span the sectors a cut
/// can keep out of order.
fn ack_of(run: u64, i: u64) -> Ack {
    let mix = plugpull::rng::Rng::new(run << 32 ^ i).next_u64();
    let slot = if run % 2 == 1 { mix % 4096 } else { i % 4096 };
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: slot * 4096,
            sectors: 8,
            write_time_ns: 1_000_000_000 + i * 1_000_000 + (mix >> 44) + run,
        },
        flushed_ns: 2_000_000_000 + i * 1_000_000 + (mix >> 40 & 0xf_ffff) + run,
    }
}

fn descriptor(seed: u64, run: u64) -> RunDescriptor {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&seed.to_le_bytes());
    id[8..].copy_from_slice(&(run + 1).to_le_bytes());
    common::test_descriptor(RunId(id))
}

/// What the test knows about one run across boots.
#[derive(Clone, Debug, Default)]
struct RunModel {
    /// `AckLog::open_or_create` returned for it once: it must exist from then on.
    created: bool,
    /// Most acks ever reported durable.
    durable: u64,
    /// Most acks ever handed to `append_acks` (durable or not).
    appended: u64,
}

/// One case: a seed (workload and faults) and the operation to cut at in each boot
/// (`None`: the boot runs to its end, then power is cut while idle).
#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    cuts: Vec<Option<u64>>,
    /// Workload steps per boot.
    steps: u32,
}

impl Case {
    fn id(&self) -> String {
        let cuts: Vec<String> = self
            .cuts
            .iter()
            .map(|c| c.map_or("-".into(), |n| n.to_string()))
            .collect();
        format!("{}:{}:{}", self.seed, self.steps, cuts.join(","))
    }

    fn parse(s: &str) -> Case {
        let parts: Vec<&str> = s.split(':').collect();
        assert_eq!(parts.len(), 3, "PLUGPULL_WITNESS_CASE is SEED:STEPS:CUTS");
        Case {
            seed: parts[0].parse().expect("seed"),
            steps: parts[1].parse().expect("steps"),
            cuts: parts[2]
                .split(',')
                .map(|c| (c != "-").then(|| c.parse().expect("cut")))
                .collect(),
        }
    }
}

/// What running one case saw.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    /// Boots that ended in a cut at an operation (each followed by recovery and checks).
    cut_points: u64,
    /// Operations of the first boot (for the cases that cut at each of them).
    first_boot_ops: u64,
    /// Whether the first boot ended in its cut.
    first_boot_cut: bool,
    durable_acks_checked: u64,
    faults: CutStats,
    /// Logs found after a cut with data after a hole past their valid frames: later
    /// writes that survived earlier ones, which replay must repair.
    out_of_order_logs: u64,
}

/// How a boot ended when no check failed.
enum BootEnd {
    Cut,
    Completed,
}

/// A failed check: what broke (a bug in the witness's storage code, not a test error).
type Failure = String;

/// The witness after recovery: its journal and every run's open log.
type Recovered = (Arc<Journal>, HashMap<u64, AckLog>);

struct Boot<'a> {
    case: &'a Case,
    disk: &'a Arc<SimDisk>,
    storage: Arc<dyn Storage>,
    dir: PathBuf,
    rng: Rng,
    rotate_bytes: u64,
    out_of_order_logs: u64,
}

impl Boot<'_> {
    /// An error from the code under test: fine (expected) if the power is off, a failure
    /// if it is on.
    fn error(&self, what: &str, e: StoreError) -> Result<BootEnd, Failure> {
        if self.disk.is_off() {
            Ok(BootEnd::Cut)
        } else {
            Err(format!("{what} failed with the power on: {e:#}"))
        }
    }

    fn log_path(&self, run: u64) -> PathBuf {
        log_path(&self.dir, descriptor(self.case.seed, run).run_id)
    }

    /// Checks what a read of run `run` returned: its descriptor, every durable ack,
    /// nothing that was not appended, and no damage reported (a power cut is not damage:
    /// calling it that would make verify say INCONCLUSIVE about an honest drive).
    fn check_log(&self, view: &str, run: u64, model: &RunModel, l: &RunLog) -> Result<(), Failure> {
        if let Some(e) = l.events.iter().find(|e| e.kind == DAMAGE_EVENT) {
            return Err(format!(
                "{view}: run {run}: a power cut was reported as damage: {}",
                e.detail
            ));
        }
        let acks = &l.acks;
        let n = acks.len() as u64;
        if l.descriptor != descriptor(self.case.seed, run) {
            return Err(format!("{view}: run {run} has another run's descriptor"));
        }
        if n < model.durable {
            return Err(format!(
                "{view}: run {run} LOST durable acks: {n} served, {} were reported durable",
                model.durable
            ));
        }
        if n > model.appended {
            return Err(format!(
                "{view}: run {run} INVENTED acks: {n} served, only {} were ever appended",
                model.appended
            ));
        }
        if let Some(i) = (0..n).find(|&i| acks[i as usize] != ack_of(run, i)) {
            return Err(format!(
                "{view}: run {run} ack {i} is not the ack appended there (reordered or \
                 invented): {:?}",
                acks[i as usize]
            ));
        }
        Ok(())
    }

    /// Verify's view before the witness restarts: logs read with the journals overlaid.
    fn check_overlay(&mut self, models: &[RunModel]) -> Result<Option<BootEnd>, Failure> {
        let runs: Vec<u64> = (0..MAX_RUNS)
            .filter(|&r| models[r as usize].created)
            .collect();
        let paths: Vec<PathBuf> = runs.iter().map(|&r| self.log_path(r)).collect();
        for path in &paths {
            if let Some(bytes) = self.disk.peek(path) {
                self.out_of_order_logs += data_after_a_hole(&bytes) as u64;
            }
        }
        let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let read = match reader::read_log_files_from(&*self.storage, &paths) {
            Ok(r) => r,
            Err(e) => return self.error("reading the logs before replay", e).map(Some),
        };
        for (&run, l) in runs.iter().zip(&read) {
            self.check_log("before replay", run, &models[run as usize], l)?;
        }
        Ok(None)
    }

    /// What `Witness::start` does, in its order: replay the journals, open a fresh
    /// journal, open every log (cutting torn tails).
    fn recover(&self, models: &mut [RunModel]) -> Result<Result<Recovered, BootEnd>, Failure> {
        if let Err(e) = journal_replay::replay(&*self.storage, &self.dir) {
            return self.error("journal replay", e).map(Err);
        }
        let opts = JournalOptions {
            rotate_bytes: self.rotate_bytes,
            checkpoint_inline: true,
        };
        let j = match Journal::open(self.storage.clone(), &self.dir, opts) {
            Ok(j) => Arc::new(j),
            Err(e) => return self.error("opening the journal", e).map(Err),
        };
        let entries = match self.storage.list(&self.dir) {
            Ok(e) => e,
            Err(e) => return self.error("listing the directory", e.into()).map(Err),
        };
        let mut opened: HashMap<PathBuf, Result<(AckLog, Recovery), StoreError>> = HashMap::new();
        for path in entries {
            if path.extension().and_then(|x| x.to_str()) == Some(LOG_EXTENSION) {
                let r = AckLog::open(&*self.storage, &path);
                if r.is_err() && self.disk.is_off() {
                    return Ok(Err(BootEnd::Cut));
                }
                opened.insert(path, r);
            }
        }
        // What fetch and verify read from the recovered logs, all at once.
        let recovered: Vec<PathBuf> = (0..MAX_RUNS)
            .map(|r| self.log_path(r))
            .filter(|p| opened.get(p).is_some_and(Result::is_ok))
            .collect();
        let paths: Vec<&Path> = recovered.iter().map(PathBuf::as_path).collect();
        let mut read = match reader::read_log_files_from(&*self.storage, &paths) {
            Ok(r) => recovered.iter().cloned().zip(r).collect::<HashMap<_, _>>(),
            Err(e) => return self.error("reading the recovered logs", e).map(Err),
        };
        let mut logs = HashMap::new();
        for (run, m) in models.iter_mut().enumerate() {
            let run = run as u64;
            let path = self.log_path(run);
            match opened.remove(&path) {
                Some(Ok((l, _))) => {
                    // Nothing invented even in a run whose creation never returned.
                    let n = l.durable_acks();
                    let read = read.remove(&path).expect("read with the others");
                    if read.acks.len() as u64 != n {
                        return Err(format!(
                            "run {run}: recovery reports {n} durable acks but the log \
                             reads {}",
                            read.acks.len()
                        ));
                    }
                    self.check_log("after recovery", run, m, &read)?;
                    // The Welcome reports this count durable from now on.
                    m.durable = n;
                    m.created = true;
                    logs.insert(run, l.with_journal(j.clone()));
                }
                Some(Err(e)) if m.created => {
                    return Err(format!(
                        "run {run}: its log was created, but recovery refuses it: {e:#}"
                    ));
                }
                None if m.created => {
                    return Err(format!("run {run}: its log was created, now it is gone"));
                }
                // A log whose creation never returned may be gone or refused (the
                // witness skips it and rewrites it when the writer comes back).
                Some(Err(_)) | None => {}
            }
        }
        if let Some((path, _)) = opened.into_iter().next() {
            return Err(format!("{} appeared from nowhere", path.display()));
        }
        Ok(Ok((j, logs)))
    }

    /// The workload: writers come and go, append (and resend) acks and commit.
    fn work(
        &mut self,
        models: &mut [RunModel],
        j: &Arc<Journal>,
        logs: &mut HashMap<u64, AckLog>,
    ) -> Result<BootEnd, Failure> {
        for _ in 0..self.case.steps {
            let run = self.rng.below(MAX_RUNS);
            if let Entry::Vacant(slot) = logs.entry(run) {
                // A writer (re)connects: Hello opens or creates its run's log.
                let d = descriptor(self.case.seed, run);
                match AckLog::open_or_create(&*self.storage, &self.dir, &d) {
                    Ok((l, _)) => {
                        let m = &mut models[run as usize];
                        m.created = true;
                        m.durable = m.durable.max(l.durable_acks());
                        slot.insert(l.with_journal(j.clone()));
                    }
                    Err(e) => return self.error("opening a run's log", e),
                }
                continue;
            }
            if self.rng.chance(0.1) {
                logs.remove(&run); // the writer disconnects
                continue;
            }
            let l = logs.get_mut(&run).expect("open");
            let have = l.appended_acks();
            // Sometimes a resend overlapping what the witness has.
            let first = have.saturating_sub(self.rng.below(3) * self.rng.below(8));
            let count = self.rng.range(1, 40);
            let acks: Vec<Ack> = (first..first + count).map(|i| ack_of(run, i)).collect();
            if let Err(e) = l.append_acks(first, &acks) {
                return Err(format!("append_acks refused a contiguous batch: {e:#}"));
            }
            if self.rng.chance(0.2) {
                l.append_event(&WitnessEvent {
                    at_ns: first,
                    kind: "connect".into(),
                    peer: "sim".into(),
                    durable_acks: l.durable_acks(),
                    last_ack_at_ns: None,
                    last_frame_at_ns: None,
                    detail: String::new(),
                });
            }
            let m = &mut models[run as usize];
            m.appended = m.appended.max(l.appended_acks());
            match l.commit() {
                Ok(n) => m.durable = m.durable.max(n),
                Err(e) => return self.error("commit", e),
            }
        }
        Ok(BootEnd::Completed)
    }
}

/// Whether `log` holds data after a zero sector that lies past its valid frames.
fn data_after_a_hole(log: &[u8]) -> bool {
    let valid = log::scan_frames(log, |_| Ok(())).map_or(0, |e| e.valid_len_bytes) as usize;
    let first_sector = valid.div_ceil(512) * 512;
    let hole = (first_sector..log.len().saturating_sub(512))
        .step_by(512)
        .find(|&s| log[s..s + 512].iter().all(|&b| b == 0));
    hole.is_some_and(|s| log[s + 512..].iter().any(|&b| b != 0))
}

/// Runs one case; `Err` names the first broken promise.
fn run_case(case: &Case) -> Result<Outcome, Failure> {
    let disk = SimDisk::new(case.seed);
    disk.set_scattered_tears(std::env::var("PLUGPULL_WITNESS_TEARS").as_deref() == Ok("scattered"));
    let mut rng = Rng::new(case.seed);
    // Small journals rotate and checkpoint every few commits; large ones leave the logs
    // with many unsynced writes when the power goes.
    let rotate_bytes = rng.range(600, 40_000);
    let mut models = vec![RunModel::default(); MAX_RUNS as usize];
    let mut out = Outcome::default();
    // Every boot of the case, then one more that only recovers and checks.
    for (k, cut_at) in case.cuts.iter().chain([&None]).enumerate() {
        let last = k == case.cuts.len();
        let mut boot = Boot {
            case,
            disk: &disk,
            storage: disk.boot(*cut_at),
            dir: PathBuf::from(DIR),
            rng: rng.fork(k as u64),
            rotate_bytes,
            out_of_order_logs: 0,
        };
        let end = run_boot(&mut boot, &mut models, last)?;
        out.out_of_order_logs += boot.out_of_order_logs;
        if k == 0 {
            out.first_boot_ops = disk.ops();
            out.first_boot_cut = matches!(end, BootEnd::Cut);
        }
        match end {
            BootEnd::Cut => out.cut_points += 1,
            BootEnd::Completed if cut_at.is_some() => {
                // The cut point lay past the end of this boot: cut it while idle.
            }
            BootEnd::Completed => {}
        }
    }
    out.durable_acks_checked = models.iter().map(|m| m.durable).sum();
    out.faults = disk.stats();
    Ok(out)
}

fn run_boot(boot: &mut Boot<'_>, models: &mut [RunModel], last: bool) -> Result<BootEnd, Failure> {
    if let Some(end) = boot.check_overlay(models)? {
        return Ok(end);
    }
    let (j, mut logs) = match boot.recover(models)? {
        Ok(x) => x,
        Err(end) => return Ok(end),
    };
    if last {
        return Ok(BootEnd::Completed);
    }
    let end = boot.work(models, &j, &mut logs)?;
    drop(logs);
    drop(j);
    // A cut on the journal's own thread (a checkpoint after the last commit) may have
    // ended the boot without the workload seeing an error.
    Ok(if boot.disk.is_off() {
        BootEnd::Cut
    } else {
        end
    })
}

fn run_or_panic(case: &Case) -> Outcome {
    run_case(case).unwrap_or_else(|why| {
        panic!(
            "witness storage broke a promise in case {}: {why}\nreplay it with \
             PLUGPULL_WITNESS_CASE='{}' cargo test --test integration witness_crash::",
            case.id(),
            case.id()
        )
    })
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

/// Short sequences, cut at each operation of the first boot and then at a random
/// operation of the second; long ones, cut at random operations of four boots in a row.
#[test]
fn witness_storage_keeps_every_durable_ack_across_cuts_at_every_operation() {
    if let Ok(one) = std::env::var("PLUGPULL_WITNESS_CASE") {
        let case = Case::parse(&one);
        let out = run_or_panic(&case);
        println!(
            "case {}: {} cut points checked, 0 lost, 0 invented",
            case.id(),
            out.cut_points
        );
        assert!(out.cut_points > 0 || case.cuts.iter().all(Option::is_none));
        return;
    }
    let target = env_u64("PLUGPULL_WITNESS_CUTS").unwrap_or(10_000);
    let t0 = Instant::now();
    let (mut points, mut exhaustive, mut random, mut cases, mut durable) = (0, 0, 0, 0, 0);
    let mut faults = CutStats::default();
    let mut out_of_order = 0;
    let mut add = |f: &CutStats| {
        faults.writes_dropped += f.writes_dropped;
        faults.writes_kept += f.writes_kept;
        faults.writes_torn += f.writes_torn;
        faults.name_changes_dropped += f.name_changes_dropped;
    };
    let mut seed = 1u64;
    while points < target {
        // A short sequence: count its operations, then cut at each one.
        let steps = 12;
        let probe_case = Case {
            seed,
            cuts: vec![None],
            steps,
        };
        let probe = run_or_panic(&probe_case);
        // One seed must replay one case exactly, or a printed seed reproduces nothing.
        assert_eq!(
            run_or_panic(&probe_case),
            probe,
            "case {}: two runs of one seed differ",
            probe_case.id()
        );
        let mut pick = Rng::new(seed ^ 0xC075);
        for n in 1..=probe.first_boot_ops {
            let case = Case {
                seed,
                cuts: vec![Some(n), Some(pick.range(1, probe.first_boot_ops))],
                steps,
            };
            let out = run_or_panic(&case);
            assert!(
                out.first_boot_cut,
                "case {}: the cut at operation {n} never happened: the workload is not \
                 deterministic, so seeds would not replay",
                case.id()
            );
            exhaustive += 1;
            random += out.cut_points - 1;
            points += out.cut_points;
            durable += out.durable_acks_checked;
            out_of_order += out.out_of_order_logs;
            add(&out.faults);
            cases += 1;
        }
        // A long sequence, cut at random operations of several boots in a row.
        let steps = 200;
        let mut cuts = Vec::new();
        for _ in 0..4 {
            cuts.push(Some(pick.range(1, 1200)));
        }
        let out = run_or_panic(&Case { seed, cuts, steps });
        random += out.cut_points;
        points += out.cut_points;
        durable += out.durable_acks_checked;
        out_of_order += out.out_of_order_logs;
        add(&out.faults);
        cases += 1;
        seed += 1;
    }
    let summary = format!(
        "witness storage: {points} cut points checked ({exhaustive} at every operation of \
         short sequences, {random} at random operations), {cases} cases, seeds 1..{seed}, \
         {durable} durable acks checked after the last cut of each case: 0 lost, 0 \
         invented, {:.1} s; unsynced changes at the cuts: {} dropped, {} kept ({} of them \
         torn), {} name changes dropped; {out_of_order} times a log held data after a \
         hole (later writes survived earlier ones) and every check still held",
        t0.elapsed().as_secs_f64(),
        faults.writes_dropped,
        faults.writes_kept,
        faults.writes_torn,
        faults.name_changes_dropped
    );
    // Straight to stderr: the test harness captures println!, and CI logs must show the count.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{summary}\n").as_bytes());
    assert!(faults.writes_dropped > 0 && faults.writes_kept > 0 && faults.writes_torn > 0);
    // Rare per cut (it needs several unsynced log writes and a cut that keeps only a
    // later one), but in every run of 10,000 cuts it happened dozens of times.
    if target >= 10_000 {
        assert!(
            out_of_order > 0,
            "no cut left a log with later writes kept and earlier lost"
        );
    }
    assert!(points >= target);
}
