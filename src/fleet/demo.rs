//! `plugpull demo --fleet`: the fleet's question answered with no hardware. Three
//! simulated drives in this process (one with power-loss protection, one honest with a
//! volatile cache, one that acknowledges flushes it never made, as the Intel X25-M did)
//! are written to at once, each by its own writer, with one witness for all, cut
//! together while the writers run, powered on and verified, cut after cut; then the
//! matrix compares them. One seed derives every drive's and writer's decisions.

use super::{CutResult, DriveRow, DriveSpec, Matrix};
use crate::cycle::fetched::fetch_run;
use crate::cycle::{AfterCut, write_until_cut};
use crate::demo::{
    DRIVE_BYTES, DemoError, demo_plan, drive_identity, quiet_witness, witness_error,
};
use crate::device::{Device, FlushMethod};
use crate::rng::Rng;
use crate::sim::drive::SimDrive;
use crate::sim::profile::Profile;
use crate::witness::client::{AckSender, ClientOptions};
use crate::write::run_descriptor;
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// What `plugpull demo --fleet` runs.
#[derive(Clone, Debug)]
pub struct FleetDemoOptions {
    /// Power cuts given to every drive.
    pub cuts: u32,
    /// Seed of everything; random when `None`.
    pub seed: Option<u64>,
    /// How long the writers run before each cut.
    pub duration: Duration,
    /// Say what happens on stderr as the cuts go.
    pub narrate: bool,
}

/// The fleet's drives: a name for people, the simulated drive's profile, and whether it
/// is sold with power-loss protection.
pub const DRIVES: [(&str, &str, bool); 3] = [
    ("candidate A", "honest-plp", true),
    ("candidate B", "honest", false),
    ("candidate C", "lying", false),
];

/// Runs the cuts and returns the matrix.
pub fn run(o: &FleetDemoOptions) -> Result<Matrix, DemoError> {
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let say = |s: String| {
        if o.narrate {
            eprintln!("{s}");
        }
    };
    say(format!(
        "plugpull demo --fleet: {} simulated drives, {} power cuts of all of them at once, in-process (seed {seed})",
        DRIVES.len(),
        o.cuts
    ));
    let (dir, witness) = quiet_witness()?;
    let addr = witness.addr.to_string();
    let mut rng = Rng::new(seed);
    let mut cuts: Vec<Vec<CutResult>> = vec![vec![]; DRIVES.len()];
    for cut in 0..o.cuts {
        let seeds: Vec<u64> = DRIVES.iter().map(|_| rng.next_u64()).collect();
        let results = one_cut(&addr, &seeds, o.duration)?;
        let line: Vec<String> = DRIVES
            .iter()
            .zip(&results)
            .map(|((name, _, _), r)| format!("{name} {}", r.outcome.name()))
            .collect();
        say(format!(
            "  cut {} of {}: {}",
            cut + 1,
            o.cuts,
            line.join(", ")
        ));
        for (all, r) in cuts.iter_mut().zip(results) {
            all.push(r);
        }
    }
    witness.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    let rows = DRIVES
        .iter()
        .zip(cuts)
        .map(|(&(name, profile, claims_plp), cuts)| {
            let id = drive_identity(profile);
            let spec = DriveSpec {
                name: name.into(),
                model: id.model.unwrap_or_default(),
                claims_plp,
                write_cache: id.write_cache,
                fua: id.fua,
            };
            DriveRow::new(spec, cuts)
        })
        .collect();
    Ok(Matrix::new(seed, rows))
}

/// One shared cut: a writer per drive (drive k's decisions and its writer's from
/// `seeds[k]`), all cut together after `duration`, then each powered on and verified
/// against the witness at `addr`.
fn one_cut(addr: &str, seeds: &[u64], duration: Duration) -> Result<Vec<CutResult>, DemoError> {
    let mut drives = vec![];
    for (&(_, profile, _), &seed) in DRIVES.iter().zip(seeds) {
        let p = Profile::parse(profile).expect("the fleet's profiles parse");
        let drive = SimDrive::create(DRIVE_BYTES, p, seed, None).map_err(DemoError::Drive)?;
        drives.push(Arc::new(drive));
    }
    // Every writer thread and this one meet here: the cut is one moment for all.
    let cut_now = Barrier::new(drives.len() + 1);
    let written = std::thread::scope(|s| {
        let writers: Vec<_> = drives
            .iter()
            .zip(seeds)
            .zip(DRIVES)
            .map(|((drive, &seed), (_, profile, _))| {
                let cut_now = &cut_now;
                s.spawn(move || write_then_cut(addr, drive, seed, profile, duration, cut_now))
            })
            .collect();
        std::thread::sleep(duration);
        cut_now.wait();
        writers
            .into_iter()
            .map(|w| w.join().expect("a fleet writer does not panic"))
            .collect::<Vec<_>>()
    });
    let mut results = vec![];
    for (drive, run) in drives.iter().zip(written) {
        let run = run?;
        let powered = drive.power_on();
        let fetched = fetch_run(addr, run).map_err(witness_error)?;
        let dev = powered
            .map(|()| drive.clone() as Arc<dyn Device>)
            .map_err(|e| e.to_string());
        results.push(CutResult::of(
            &fetched.judge(dev, Duration::from_secs(10)).report,
        ));
    }
    Ok(results)
}

/// Writes to `drive` with acks to the witness until every writer meets at `cut_now`,
/// cuts its power, and returns the run.
fn write_then_cut(
    addr: &str,
    drive: &SimDrive,
    seed: u64,
    profile: &str,
    duration: Duration,
    cut_now: &Barrier,
) -> Result<crate::record::RunId, DemoError> {
    // Longer than the cut comes: the writer is still running when it does.
    let plan = demo_plan(seed, duration.saturating_mul(4));
    let descriptor = run_descriptor(&plan, drive_identity(profile), FlushMethod::Fdatasync, true);
    let sender =
        AckSender::connect(addr, &descriptor, ClientOptions::default()).map_err(witness_error);
    let sender = match sender {
        Ok(s) => s,
        Err(e) => {
            // Still meet the others, or they would wait for this writer for ever.
            cut_now.wait();
            return Err(e);
        }
    };
    let written = write_until_cut(drive, &plan, &sender, |_| {
        cut_now.wait();
        drive.cut().ok();
        ((), AfterCut::StopWriter)
    });
    if written.is_err() {
        // No buffers: `write_until_cut` returned before meeting the others.
        cut_now.wait();
    }
    written?;
    sender
        .finish(Duration::from_secs(10))
        .map_err(witness_error)?;
    Ok(plan.run)
}
