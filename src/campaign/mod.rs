//! `plugpull campaign`: many unattended power cuts, each verified and recorded.
//!
//! Why: drives fail probabilistically (some only after dozens of cuts), so one pulled plug
//! proves little. The cycle (drive-only, controller and writer on one host):
//! start the writer → wait for acks to flow → wait a random delay → cut → stay off →
//! power on → drop/re-detect the drive (by serial) → verify → append one JSON line → repeat.
//!
//! - [`config`]: the TOML campaign file;
//! - [`target`]: the simulated drive or a real drive found by serial, reattach hooks;
//! - [`results`]: the results file (also the resume state) and the summary;
//! - [`stats`]: the exact 95% upper bound on the failure rate;
//! - [`host`], [`agent`], [`agent_proto`]: whole-host mode (the controller, `plugpull
//!   agent` on the host under test, and the messages between them).
//!
//! docs/campaign.md is the user's guide.

pub mod agent;
pub mod agent_proto;
pub mod config;
pub mod host;
pub mod results;
pub mod stats;
pub mod target;

use crate::commands::args::CampaignArgs;
use crate::model::RunSelector;
use crate::power::{PowerSwitch, SwitchTiming};
use crate::record::RunId;
use crate::rng::Rng;
use crate::sim::{Profile, SimDrive};
use crate::verify::{dead_device_report, verify_device};
use crate::witness::client::{AckSender, ClientOptions, fetch};
use crate::witness::server::{Witness, WitnessOptions};
use crate::write::engine::{Progress, run_streams};
use crate::write::plan::Plan;
use crate::write::run_descriptor;
use anyhow::{Context, Result};
use config::Settings;
use results::{CYCLE_FORMAT, CycleResult, HEADER_FORMAT, Header, LastAcked, ResultsFile};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use target::Target;

const SIM_DEFAULT_BYTES: u64 = 16 << 20;

pub fn run(a: CampaignArgs) -> Result<i32> {
    let mut settings = Settings::load(&a.config)?;
    if let Some(r) = &a.results {
        settings.results = r.clone();
    }
    if a.summary {
        let (_, cycles, _) = results::read(&settings.results)?;
        return print_summary(&results::summarize(&cycles), a.json);
    }
    let cycles_wanted = a.cycles.unwrap_or(settings.file.campaign.cycles);
    let seed = settings
        .file
        .campaign
        .seed
        .unwrap_or_else(crate::rng::random_seed);
    let mut results = ResultsFile::open_or_create(
        &settings.results,
        Header {
            format: HEADER_FORMAT.into(),
            started_at: chrono::Utc::now().to_rfc3339(),
            seed,
            config: settings.fingerprint.clone(),
        },
    )?;
    let seed = results.header.seed;
    let done = results.cycles.len() as u64;
    let say = |s: String| {
        if !a.quiet {
            eprintln!("{s}");
        }
    };
    if done > 0 {
        say(format!(
            "plugpull campaign: resuming {} after {done} finished cycle(s)",
            settings.results.display()
        ));
    }

    if settings.file.target.kind == "host" {
        let mut power = settings.file.power.build(None)?;
        say(format!(
            "plugpull campaign: {} cycle(s) of the whole host with {}, results in {} (seed {seed})",
            cycles_wanted,
            power.describe(),
            settings.results.display()
        ));
        host::run(
            host::Ctx {
                settings: &settings,
                seed,
                cycles_wanted,
                quiet: a.quiet,
            },
            &mut results,
            power.as_mut(),
        )?;
        return print_summary(&results::summarize(&results.cycles), a.json);
    }

    // The target and its switch.
    let t = &settings.file.target;
    let (mut target, sim) = match t.kind.as_str() {
        "simdrive" => {
            let profile_s = t.profile.clone().unwrap_or_else(|| "honest".into());
            let profile =
                Profile::parse(&profile_s).map_err(|e| anyhow::anyhow!("target.profile: {e}"))?;
            let size = match &t.size {
                Some(s) => {
                    crate::units::parse_size(s).map_err(|e| anyhow::anyhow!("target.size: {e}"))?
                }
                None => SIM_DEFAULT_BYTES,
            };
            // A resumed campaign gets a fresh drive whose decisions still follow the seed.
            let drive = Arc::new(
                SimDrive::create(size, profile, derive(seed, 1 << 40 | done), None)
                    .context("creating the simulated drive")?,
            );
            (
                Target::Sim {
                    drive: drive.clone(),
                    profile: profile_s,
                },
                Some(drive as Arc<dyn crate::power::sim::Cuttable>),
            )
        }
        _ => (
            Target::Device {
                serial: t.serial.clone().unwrap_or_default(),
                reattach: target::Reattach::parse(t.reattach.as_deref()),
                destroy_data: t.destroy_data,
                counter: t.unsafe_shutdown_counter,
                last_disk: None,
            },
            None,
        ),
    };
    let mut power = settings.file.power.build(sim)?;
    say(format!(
        "plugpull campaign: {} cycle(s) with {}, results in {} (seed {seed})",
        cycles_wanted,
        power.describe(),
        settings.results.display()
    ));

    // The witness: given, or our own on loopback (the controller's host keeps power).
    let mut own_witness = None;
    let witness_addr = match &settings.file.witness.addr {
        Some(a) => a.clone(),
        None => {
            let dir = settings.results.with_extension("witness");
            let w = Witness::start(
                "127.0.0.1:0",
                &dir,
                WitnessOptions {
                    quiet: true,
                    ..Default::default()
                },
            )
            .with_context(|| format!("starting the campaign's witness in {}", dir.display()))?;
            let addr = w.addr.to_string();
            own_witness = Some(w);
            addr
        }
    };

    // A bar of finished cycles; indicatif hides it when stderr is not a terminal, and the
    // per-cycle lines go through `suspend` so they print either way.
    let bar = if a.quiet {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::with_draw_target(
            Some(cycles_wanted),
            indicatif::ProgressDrawTarget::stderr(),
        )
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cycles, {elapsed} elapsed, ~{eta} left",
        )
        .expect("static template"),
    );
    bar.set_position(done);
    for cycle in done + 1..=cycles_wanted {
        let r = run_cycle(
            cycle,
            seed,
            &settings,
            &mut target,
            power.as_mut(),
            &witness_addr,
        );
        let line = match &r.error {
            Some(e) => format!("cycle {cycle}/{cycles_wanted}: ERROR: {e}"),
            None => format!(
                "cycle {cycle}/{cycles_wanted}: cut {:.0} ms after acks flowed, {} acked; {} - {}",
                r.delay_ms, r.acked_records, r.verdict, r.summary
            ),
        };
        bar.suspend(|| say(line));
        results.append(r)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(w) = own_witness {
        w.shutdown();
    }
    print_summary(&results::summarize(&results.cycles), a.json)
}

fn print_summary(s: &results::Summary, json: bool) -> Result<i32> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        print!("{}", s.to_text());
    }
    Ok(if s.failed > 0 {
        crate::exit::FAIL
    } else if s.errors > 0 {
        crate::exit::ERROR
    } else {
        crate::exit::PASS
    })
}

/// Mixes the campaign seed with a cycle number (splitmix64).
pub fn derive(seed: u64, n: u64) -> u64 {
    let mut z = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn empty_result(cycle: u64, seed: u64) -> CycleResult {
    CycleResult {
        format: CYCLE_FORMAT.into(),
        cycle,
        seed,
        run_id: String::new(),
        started_at: chrono::Utc::now().to_rfc3339(),
        delay_ms: 0.0,
        cut: None,
        restore: None,
        off_ms: 0.0,
        acked_records: 0,
        witness_durable: 0,
        last_acked: None,
        writer_stopped: String::new(),
        reattach_ms: None,
        verdict: "ERROR".into(),
        summary: String::new(),
        counts: Default::default(),
        loss_window: None,
        ordering_holes: 0,
        dead_device: None,
        unsafe_shutdowns_delta: None,
        error: None,
        cycle_ms: 0.0,
    }
}

/// One cycle; never fails: whatever went wrong is recorded in the result.
pub fn run_cycle(
    cycle: u64,
    campaign_seed: u64,
    s: &Settings,
    target: &mut Target,
    power: &mut dyn PowerSwitch,
    witness: &str,
) -> CycleResult {
    let t0 = Instant::now();
    let seed = derive(campaign_seed, cycle);
    let mut r = empty_result(cycle, seed);
    if let Err(e) = cycle_inner(&mut r, s, target, power, witness) {
        r.verdict = "ERROR".into();
        r.error = Some(format!("{e:#}"));
        // Leave the switch on for the next cycle (or the operator).
        let _ = power.on();
    }
    r.cycle_ms = t0.elapsed().as_secs_f64() * 1e3;
    r
}

fn cycle_inner(
    r: &mut CycleResult,
    s: &Settings,
    target: &mut Target,
    power: &mut dyn PowerSwitch,
    witness: &str,
) -> Result<()> {
    let mut rng = Rng::new(r.seed);
    let (dev, identity, count_before) = target.open_for_write()?;
    let region = s.region.unwrap_or(dev.size_bytes()).min(dev.size_bytes());
    let plan = Plan {
        run: RunId::random(),
        region_offset: 0,
        region_bytes: region,
        record_min: s.record_min,
        record_max: s.record_max,
        placement: s.placement,
        streams: s.file.writer.streams,
        seed: r.seed,
        align: (dev.logical_block_bytes() as u64).max(512),
        count: None,
        duration: None,
    };
    plan.validate()
        .map_err(|e| anyhow::anyhow!("writer settings: {e}"))?;
    r.run_id = plan.run.hex();
    let descriptor = run_descriptor(&plan, identity, crate::device::FlushMethod::Fdatasync, true);
    let sender = AckSender::connect(witness, &descriptor, ClientOptions::default())?;
    let progress = Progress::default();
    let stop = AtomicBool::new(false);
    let delay = if s.delay_max > s.delay_min {
        s.delay_min
            + Duration::from_nanos(rng.below((s.delay_max - s.delay_min).as_nanos() as u64 + 1))
    } else {
        s.delay_min
    };
    let cut: Result<(SwitchTiming, f64)> = std::thread::scope(|sc| {
        sc.spawn(|| run_streams(dev.as_ref(), &plan, &sender, &stop, &progress));
        let res = (|| {
            let w0 = Instant::now();
            while progress.records_acked.load(Ordering::Relaxed) < s.file.campaign.min_acks {
                if let Some(f) = progress.failure() {
                    anyhow::bail!(
                        "the writer failed before any ack: {} failed: {}",
                        f.during,
                        f.error
                    );
                }
                if w0.elapsed() > s.wait_timeout {
                    anyhow::bail!(
                        "no acks within {:?}: the writer is not getting flushes through",
                        s.wait_timeout
                    );
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let d0 = Instant::now();
            std::thread::sleep(delay);
            let stamp = power.off()?;
            Ok((stamp, d0.elapsed().as_secs_f64() * 1e3))
        })();
        // The writer notices the cut by itself (I/O errors); stop it in every case.
        stop.store(true, Ordering::SeqCst);
        res
    });
    let stats = sender.finish(s.wait_timeout);
    let (cut_stamp, delay_ms) = cut?;
    let off_start = Instant::now();
    r.cut = Some(cut_stamp);
    r.delay_ms = delay_ms;
    r.acked_records = progress.records_acked.load(Ordering::Relaxed);
    r.witness_durable = stats.as_ref().map(|x| x.durable).unwrap_or(0);
    r.last_acked = progress.last_ack().map(|k| LastAcked {
        stream: k.record.stream,
        seq: k.record.seq,
        offset: k.record.offset,
        flushed_ns: k.flushed_ns,
    });
    r.writer_stopped = match progress.failure() {
        Some(f) => format!("target failed: {} returned {}", f.during, f.error),
        None => "stopped by the controller".into(),
    };
    drop(dev);
    target.after_cut();
    std::thread::sleep(s.off.saturating_sub(off_start.elapsed()));
    let on = power.on()?;
    r.off_ms = on.issued_ns.saturating_sub(cut_stamp.issued_ns) as f64 / 1e6;
    r.restore = Some(on);
    let a0 = Instant::now();
    let (dev, count_after) = target.reattach(s.wait_timeout);
    let log = fetch(witness, &RunSelector::Run(plan.run))?;
    let report = match dev {
        Ok(d) => {
            r.reattach_ms = Some(a0.elapsed().as_secs_f64() * 1e3);
            verify_device(d, &log, s.wait_timeout)
        }
        Err(e) => dead_device_report(&log, format!("{e:#}")),
    };
    r.unsafe_shutdowns_delta = match (count_before, count_after) {
        (Some(b), Some(a)) => Some(a as i64 - b as i64),
        _ => None,
    };
    r.verdict = report.verdict.name().into();
    r.summary = report.summary.clone();
    r.counts = report
        .counts
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    r.loss_window = report.loss_window.as_ref().map(|w| results::LossWindow {
        records: w.records,
        bytes: w.bytes,
        ms: w.ms,
    });
    r.ordering_holes = report.ordering_holes.count;
    r.dead_device = report.dead_device.clone();
    Ok(())
}
