//! `plugpull demo`: one whole power-cut cycle with no hardware: a real witness on
//! loopback, the real writer against a simulated drive in this process, a cut, power
//! back on, and the real verify. The honest profile passes; `--profile lying` fails and
//! shows what a drive that acknowledges flushes it has not done loses.

use crate::commands::args::DemoArgs;
use crate::device::identity::DeviceIdentity;
use crate::device::{Device, FlushMethod};
use crate::model::Placement;
use crate::model::RunSelector;
use crate::record::RunId;
use crate::sim::drive::SimDrive;
use crate::sim::profile::Profile;
use crate::verify::verify_device;
use crate::witness::client::{AckSender, ClientOptions, fetch};
use crate::witness::server::{Witness, WitnessOptions};
use crate::write::engine::{Progress, run_streams};
use crate::write::plan::Plan;
use crate::write::run_descriptor;
use anyhow::{Context, Result};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const DRIVE_BYTES: u64 = 64 << 20;

pub fn run(a: DemoArgs) -> Result<i32> {
    let profile = Profile::parse(&a.profile)
        .map_err(|e| crate::exit::ExitCode(crate::exit::ERROR, e.to_string()))?;
    let seed = a.seed.unwrap_or_else(crate::rng::random_seed);
    let say = |s: String| {
        if !a.json {
            eprintln!("{s}");
        }
    };
    say("plugpull demo: one power-cut cycle on a simulated drive, in-process (no root, FUSE or hardware needed)".into());
    say(format!(
        "  drive:   simulated, {} MiB, profile {} (seed {seed})",
        DRIVE_BYTES >> 20,
        a.profile
    ));

    let dir = tempfile_dir()?;
    let witness = Witness::start(
        "127.0.0.1:0",
        &dir,
        WitnessOptions {
            quiet: true,
            ..Default::default()
        },
    )?;
    let addr = witness.addr.to_string();
    say(format!("  witness: {addr}, ack logs in {}", dir.display()));

    let drive = Arc::new(
        SimDrive::create(DRIVE_BYTES, profile, seed, None)
            .context("creating the simulated drive")?,
    );
    let plan = Plan {
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
        duration: Some(a.duration),
    };
    let device = DeviceIdentity {
        target: "simdrive".into(),
        kind: "simulated".into(),
        model: Some(format!("plugpull simdrive ({})", a.profile)),
        size_bytes: DRIVE_BYTES,
        logical_sector_bytes: Some(512),
        physical_sector_bytes: Some(4096),
        write_cache: Some("write back".into()),
        ..Default::default()
    };
    let descriptor = run_descriptor(&plan, device, FlushMethod::Fdatasync, true);
    let sender = AckSender::connect(&addr, &descriptor, ClientOptions::default())?;

    say(format!(
        "1/4 writing 4 KiB records with a flush after each, for {:?} ...",
        a.duration
    ));
    let progress = Progress::default();
    let stop = AtomicBool::new(false);
    // The cut comes while the writer is still running, as a real one would.
    std::thread::scope(|s| {
        s.spawn(|| run_streams(drive.as_ref(), &plan, &sender, &stop, &progress));
        std::thread::sleep(a.duration.saturating_sub(Duration::from_millis(50)));
        say("2/4 cutting power (the writer is still writing)".into());
        drive.cut().ok();
        stop.store(true, Ordering::SeqCst);
    });
    let acked = progress.records_acked.load(Ordering::Relaxed);
    let stats = sender.finish(Duration::from_secs(10))?;
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
    let log = fetch(&addr, &RunSelector::Run(plan.run))?;
    let mut report = match powered {
        Ok(()) => verify_device(
            drive.clone() as Arc<dyn Device>,
            &log,
            Duration::from_secs(10),
        ),
        Err(e) => crate::verify::dead_device_report(&log, e.to_string()),
    };
    report.target = "simdrive (in-process)".into();
    report.device = Some(descriptor.device.clone());
    let oracle = drive.oracle();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!();
        print!("{}", report.to_text());
        println!();
        println!(
            "The simulated drive's own log (its oracle) lists {} injected fault(s).",
            oracle.len()
        );
        println!(
            "Mode: in-process simulated drive. For the same cycle through real syscalls on a FUSE mount, see docs/GUIDE-simdrive.md."
        );
        println!(
            "Same drive decisions again (the cut moment is timed, so counts vary): plugpull demo --profile {} --seed {seed} --duration {:?}",
            a.profile, a.duration
        );
    }
    witness.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report.verdict.exit_code())
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let d = std::env::temp_dir().join(format!("plugpull-demo-{}", std::process::id()));
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}
