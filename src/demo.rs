//! `plugpull demo`: one whole power-cut cycle with no hardware: a real witness on
//! loopback, the real writer against a simulated drive in this process, a cut, power
//! back on, and the real verify. The honest profile passes; `--profile lying` fails and
//! shows what a drive that acknowledges flushes it has not done loses.

use crate::cycle::fetched::fetch_run;
use crate::cycle::{AfterCut, write_until_cut};
use crate::device::identity::DeviceIdentity;
use crate::device::{Device, FlushMethod};
use crate::model::{Placement, RunDescriptor, Verdict};
use crate::record::RunId;
use crate::sim::drive::SimDrive;
use crate::sim::profile::Profile;
use crate::verify::report::Report;
use crate::witness::client::{AckSender, ClientOptions};
use crate::witness::server::{Witness, WitnessOptions};
use crate::write::plan::Plan;
use crate::write::run_descriptor;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub(crate) const DRIVE_BYTES: u64 = 64 << 20;

/// Why the demo could not run its cycle.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("creating {}", path.display())]
    TempDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating the simulated drive")]
    Drive(#[source] std::io::Error),
    /// The witness, the ack sender or the fetch failed; their modules' errors, whole.
    #[error(transparent)]
    Witness(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The writer's record buffers could not be allocated: nothing was written.
    #[error(transparent)]
    NoBufferMemory(#[from] crate::write::engine::NoBufferMemory),
}

type Result<T, E = DemoError> = std::result::Result<T, E>;

/// Keeps a witness-side error whole (its causes included) as a [`DemoError`].
pub(crate) fn witness_error(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> DemoError {
    DemoError::Witness(e.into())
}

/// What `plugpull demo` runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// The simulated drive's behaviour.
    pub profile: Profile,
    /// The profile as the user named it (printed back, and in the replay command).
    pub profile_name: String,
    /// Seed of the drive's decisions and the writer's; random when `None`.
    pub seed: Option<u64>,
    /// How long the writer runs before the cut.
    pub duration: Duration,
    /// Print the verify report as JSON instead of the narrated cycle.
    pub json: bool,
}

/// Runs the demo cycle and prints it; the verdict decides the exit status.
pub fn run(o: DemoOptions) -> Result<Verdict> {
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let say = |s: String| {
        if !o.json {
            eprintln!("{s}");
        }
    };
    say("plugpull demo: one power-cut cycle on a simulated drive, in-process (no root, FUSE or hardware needed)".into());
    say(format!(
        "  drive:   simulated, {} MiB, profile {} (seed {seed})",
        DRIVE_BYTES >> 20,
        o.profile_name
    ));

    let (dir, witness) = quiet_witness()?;
    let addr = witness.addr.to_string();
    say(format!("  witness: {addr}, ack logs in {}", dir.display()));

    let drive = Arc::new(
        SimDrive::create(DRIVE_BYTES, o.profile.clone(), seed, None).map_err(DemoError::Drive)?,
    );
    let plan = demo_plan(seed, o.duration);
    let descriptor = run_descriptor(
        &plan,
        drive_identity(&o.profile_name),
        FlushMethod::Fdatasync,
        true,
    );
    let mut report = cut_and_verify(&o, &drive, &plan, &descriptor, &addr, &say)?;
    report.target = "simdrive (in-process)".into();
    report.device = Some(descriptor.device.clone());
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_outcome(&o, seed, &report, drive.oracle().len());
    }
    witness.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report.verdict)
}

/// 4 KiB records, one stream, front to back over the whole drive, for `duration`.
pub(crate) fn demo_plan(seed: u64, duration: Duration) -> Plan {
    Plan {
        run: RunId::random(),
        region_offset: 0,
        region_bytes: DRIVE_BYTES,
        record_min: 4096,
        record_max: 4096,
        placement: Placement::Sequential,
        streams: 1,
        seed,
        align: 512,
        count: None,
        duration: Some(duration),
    }
}

/// The simulated drive as the run descriptor names it.
pub(crate) fn drive_identity(profile_name: &str) -> DeviceIdentity {
    DeviceIdentity {
        target: "simdrive".into(),
        kind: "simulated".into(),
        model: Some(format!("plugpull simdrive ({profile_name})")),
        size_bytes: DRIVE_BYTES,
        logical_sector_bytes: Some(512),
        physical_sector_bytes: Some(4096),
        write_cache: Some("write back".into()),
        ..Default::default()
    }
}

/// The cycle, narrated: write with acks to the witness at `addr`, cut while the writer
/// still runs, power on, verify against the witness's acks.
fn cut_and_verify(
    o: &DemoOptions,
    drive: &Arc<SimDrive>,
    plan: &Plan,
    descriptor: &RunDescriptor,
    addr: &str,
    say: &dyn Fn(String),
) -> Result<Report> {
    let sender =
        AckSender::connect(addr, descriptor, ClientOptions::default()).map_err(witness_error)?;
    say(format!(
        "1/4 writing 4 KiB records with a flush after each, for {:?} ...",
        o.duration
    ));
    // The cut comes while the writer is still running, as a real one would.
    let ((), progress) = write_until_cut(drive.as_ref(), plan, &sender, |_| {
        std::thread::sleep(o.duration.saturating_sub(Duration::from_millis(50)));
        say("2/4 cutting power (the writer is still writing)".into());
        drive.cut().ok();
        ((), AfterCut::StopWriter)
    })?;
    let acked = progress.records_acked();
    let stats = sender
        .finish(Duration::from_secs(10))
        .map_err(witness_error)?;
    say(format!(
        "    {acked} records acknowledged, {} of them durable at the witness",
        stats.durable
    ));
    if let Some(f) = progress.failure() {
        say(format!(
            "    the writer saw the cut: {} failed ({}) and acknowledged nothing after it",
            f.during, f.error
        ));
    }

    say("3/4 power restored".into());
    let powered = drive.power_on();
    say("4/4 verifying against the witness's acks".into());
    let fetched = fetch_run(addr, plan.run).map_err(witness_error)?;
    let drive = powered
        .map(|()| drive.clone() as Arc<dyn Device>)
        .map_err(|e| e.to_string());
    Ok(fetched.judge(drive, Duration::from_secs(10)).report)
}

fn print_outcome(o: &DemoOptions, seed: u64, report: &Report, oracle_faults: usize) {
    println!();
    print!("{}", report.to_text());
    println!();
    println!("The simulated drive's own log (its oracle) lists {oracle_faults} injected fault(s).");
    println!(
        "Mode: in-process simulated drive. For the same cycle through real syscalls on a FUSE mount, see docs/GUIDE-simdrive.md in the source tree (installed: /usr/share/doc/plugpull/docs/GUIDE-simdrive.md)."
    );
    println!(
        "Same drive decisions again (the cut moment is timed, so counts vary): plugpull demo --profile {} --seed {seed} --duration {:?}",
        o.profile_name, o.duration
    );
}

/// A new directory of its own in TMPDIR. Why a random name and create_dir (not
/// create_dir_all): a name from the pid alone could be planted first by another user (a
/// directory of theirs, or a symlink to one), which the demo would then write its logs
/// into and remove with all it holds; a name taken fails here instead.
/// A witness on loopback, quiet, its logs in a new directory of its own (`tempfile_dir`).
pub(crate) fn quiet_witness() -> Result<(PathBuf, Witness)> {
    let dir = tempfile_dir()?;
    let witness = Witness::start(
        "127.0.0.1:0",
        &dir,
        WitnessOptions {
            quiet: true,
            ..Default::default()
        },
    )
    .map_err(witness_error)?;
    Ok((dir, witness))
}

fn tempfile_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!(
        "plugpull-demo-{}-{:016x}",
        std::process::id(),
        crate::rng::random_seed()
    ));
    std::fs::create_dir(&d).map_err(|source| DemoError::TempDir {
        path: d.clone(),
        source,
    })?;
    Ok(d)
}
