//! `plugpull campaign`: many unattended power cuts, each verified and recorded.
//!
//! Why: drives fail probabilistically (some only after dozens of cuts), so one pulled plug
//! proves little. The cycle (drive-only, controller and writer on one host):
//! start the writer → wait for acks to flow → wait a random delay → cut → stay off →
//! power on → drop/re-detect the drive (by serial) → verify → append one JSON line → repeat.
//!
//! - [`config`]: the TOML campaign file;
//! - [`context`]: what every cycle shares (settings, seeds), for this loop and `host`;
//! - [`target`]: the simulated drive or a real drive found by serial, reattach hooks;
//! - [`results`], [`results_file`]: the results file (also the resume state), how it is
//!   opened and appended to, and the summary;
//! - [`stats`]: the exact 95% upper bound on the failure rate;
//! - [`host`], [`agent`], [`agent_proto`]: whole-host mode (the controller, `plugpull
//!   agent` on the host under test, and the messages between them).
//!
//! docs/campaign.md is the user's guide.

pub mod agent;
pub mod agent_auth;
pub mod agent_proto;
pub mod config;
pub mod context;
pub mod host;
pub mod host_listen;
pub mod proof;
pub mod results;
pub mod results_file;
pub mod target;
pub mod witness_backing;

use crate::cycle::fetched::fetch_run;
use crate::cycle::{AfterCut, NoAcks, cut_delay, wait_for_acks, write_until_cut};
use crate::exit::error_chain;
use crate::model::Verdict;
use crate::power::{PowerError, PowerSwitch};
use crate::record::RunId;
use crate::sim::{Profile, ProfileError, SimDrive};
use crate::units::UnitError;
use crate::witness::client::error::ClientError;
use crate::witness::client::{AckSender, ClientOptions, SenderStats};
use crate::witness::server::{Witness, WitnessError};
use crate::write::engine::Progress;
use crate::write::plan::{Plan, PlanError};
use crate::write::run_descriptor;
use config::{ConfigError, Settings};
use context::{Campaign, check_ramp, derive};
use host::HostError;
use proof::CutEvidence;
use results::{CycleResult, HEADER_FORMAT, Header, LastAcked, Summary};
use results_file::{ResultsError, ResultsFile};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use target::{Target, TargetError};

const SIM_DEFAULT_BYTES: u64 = 16 << 20;

/// Why the campaign could not start, go on, or print its summary. A failed cycle is
/// not one of these: it is recorded as an ERROR result (see [`CycleError`]).
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The `[power]` table does not build a switch.
    #[error(transparent)]
    Power(#[from] PowerError),
    /// Whole-host mode stopped.
    #[error(transparent)]
    Host(#[from] HostError),
    #[error("target.profile: {reason}")]
    BadProfile { reason: ProfileError },
    #[error("target.size: {reason}")]
    BadSize { reason: UnitError },
    #[error("creating the simulated drive")]
    SimDrive(#[source] std::io::Error),
    #[error("starting the campaign's witness in {}", dir.display())]
    Witness {
        dir: PathBuf,
        #[source]
        source: WitnessError,
    },
    /// The summary as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

type Result<T, E = CampaignError> = std::result::Result<T, E>;

/// Why one drive-only cycle ended without a verdict: recorded, with its causes, as the
/// cycle's `error` in the results file.
#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    /// The drive could not be found or opened for writing.
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("writer settings: {reason}")]
    Plan { reason: PlanError },
    /// The writer's ack sender could not reach the witness.
    #[error(transparent)]
    Connect(ClientError),
    #[error(transparent)]
    NoAcks(#[from] NoAcks),
    /// The writer's record buffers could not be allocated: the cycle wrote nothing.
    #[error(transparent)]
    NoBufferMemory(#[from] crate::write::engine::NoBufferMemory),
    #[error(transparent)]
    Switch(#[from] PowerError),
    /// The run could not be fetched back from the witness after power on.
    #[error(transparent)]
    Fetch(ClientError),
}

/// What `plugpull campaign` runs.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// The campaign file (TOML).
    pub config: PathBuf,
    /// Overrides `campaign.results`.
    pub results: Option<PathBuf>,
    /// Overrides `campaign.cycles`: cycles in all, finished ones included.
    pub cycles: Option<u64>,
    /// Only summarise the results file; cut nothing.
    pub summary_only: bool,
    /// No per-cycle lines on stderr.
    pub quiet: bool,
}

/// What a campaign ends with: the summary of its results file, and the file's header
/// and cycles (for renderings of each cycle, as `--format ocp`).
#[derive(Clone, Debug)]
pub struct Finished {
    pub summary: Summary,
    pub header: Header,
    pub cycles: Vec<results::CycleResult>,
}

impl Finished {
    fn of(header: Header, cycles: Vec<results::CycleResult>) -> Finished {
        Finished {
            summary: results::summarize(&cycles),
            header,
            cycles,
        }
    }
}

/// Runs (or resumes) the campaign and returns its results, for the command to print:
/// the command's exit status follows from the summary's failed and error counts.
pub fn run(o: CampaignOptions) -> Result<Finished> {
    let mut settings = Settings::load(&o.config)?;
    if let Some(r) = &o.results {
        settings.results = r.clone();
    }
    if o.summary_only {
        let (header, cycles, _) = results_file::read(&settings.results)?;
        return Ok(Finished::of(header, cycles));
    }
    let cycles_wanted = o.cycles.unwrap_or(settings.file.campaign.cycles);
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
    let c = Campaign {
        settings: &settings,
        seed: results.header.seed,
        cycles_wanted,
        quiet: o.quiet,
    };
    let done = results.cycles.len() as u64;
    if done > 0 {
        c.say(format!(
            "plugpull campaign: resuming {} after {done} finished cycle(s)",
            settings.results.display()
        ));
    }
    if settings.file.target.kind == "host" {
        run_whole_host(&c, &mut results)?;
    } else {
        run_drive_only(&c, &mut results)?;
    }
    Ok(Finished::of(results.header, results.cycles))
}

fn run_whole_host(c: &Campaign, results: &mut ResultsFile) -> Result<()> {
    let mut power = c.settings.file.power.build(None)?;
    check_ramp(c.settings, power.as_ref())?;
    c.say(format!(
        "plugpull campaign: {} cycle(s) of the whole host with {}, results in {} (seed {})",
        c.cycles_wanted,
        power.describe(),
        c.settings.results.display(),
        c.seed
    ));
    Ok(host::run(c, results, power.as_mut())?)
}

fn run_drive_only(c: &Campaign, results: &mut ResultsFile) -> Result<()> {
    let settings = c.settings;
    let done = results.cycles.len() as u64;
    let (mut target, sim) = open_target(settings, c.seed, done)?;
    let mut power = settings.file.power.build(sim)?;
    check_ramp(settings, power.as_ref())?;
    c.say(format!(
        "plugpull campaign: {} cycle(s) with {}, results in {} (seed {})",
        c.cycles_wanted,
        power.describe(),
        settings.results.display(),
        c.seed
    ));
    let (witness_addr, own_witness) = loopback_witness(settings)?;
    let bar = progress_bar(c.quiet, c.cycles_wanted, done);
    for cycle in done + 1..=c.cycles_wanted {
        let r = run_cycle(
            cycle,
            c.seed,
            settings,
            &mut target,
            power.as_mut(),
            &witness_addr,
        );
        let line = match &r.error {
            Some(e) => format!("cycle {cycle}/{}: ERROR: {e}", c.cycles_wanted),
            None => format!(
                "cycle {cycle}/{}: cut {} after acks flowed, {} acked; {} - {}",
                c.cycles_wanted,
                crate::units::fmt_duration_ms(r.delay_ms),
                crate::units::thousands(r.acked_records),
                r.status(),
                r.report.summary
            ),
        };
        bar.suspend(|| c.say(line));
        results.append(r)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(w) = own_witness {
        w.shutdown();
    }
    Ok(())
}

/// The drive under test and, for a simulated one, the drive the simulated switch cuts.
fn open_target(
    settings: &Settings,
    seed: u64,
    done: u64,
) -> Result<(Target, Option<Arc<dyn crate::power::sim::Cuttable>>)> {
    let t = &settings.file.target;
    if t.kind != "simdrive" {
        let target = Target::Device {
            serial: t.serial.clone().unwrap_or_default(),
            reattach: target::Reattach::parse(t.reattach.as_deref()),
            destroy_data: t.destroy_data,
            counter: t.unsafe_shutdown_counter,
            last_disk: None,
        };
        return Ok((target, None));
    }
    let profile_s = t.profile.clone().unwrap_or_else(|| "honest".into());
    let profile =
        Profile::parse(&profile_s).map_err(|reason| CampaignError::BadProfile { reason })?;
    let size = match &t.size {
        Some(s) => {
            crate::units::parse_size(s).map_err(|reason| CampaignError::BadSize { reason })?
        }
        None => SIM_DEFAULT_BYTES,
    };
    // A resumed campaign gets a fresh drive whose decisions still follow the seed.
    let drive = Arc::new(
        SimDrive::create(size, profile, derive(seed, 1 << 40 | done), None)
            .map_err(CampaignError::SimDrive)?,
    );
    let target = Target::Sim {
        drive: drive.clone(),
        profile: profile_s,
    };
    Ok((target, Some(drive as Arc<dyn crate::power::sim::Cuttable>)))
}

/// The witness: the configured one, or our own on loopback (the controller's host keeps
/// power), which the caller shuts down at the end.
fn loopback_witness(settings: &Settings) -> Result<(String, Option<Witness>)> {
    if let Some(a) = &settings.file.witness.addr {
        return Ok((a.clone(), None));
    }
    let dir = settings.results.with_extension("witness");
    let w = Witness::start("127.0.0.1:0", &dir, settings.witness_options()).map_err(|source| {
        CampaignError::Witness {
            dir: dir.clone(),
            source,
        }
    })?;
    Ok((w.addr.to_string(), Some(w)))
}

/// A bar of finished cycles; indicatif hides it when stderr is not a terminal, and the
/// per-cycle lines go through `suspend` so they print either way.
fn progress_bar(quiet: bool, cycles_wanted: u64, done: u64) -> indicatif::ProgressBar {
    let bar = if quiet {
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
    bar
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
    let mut r = CycleResult::empty(cycle, seed);
    if let Err(e) = cycle_inner(&mut r, s, target, power, witness) {
        r.report.verdict = Verdict::Error;
        r.error = Some(error_chain(&e));
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
) -> Result<(), CycleError> {
    let (dev, identity, count_before) = target.open_for_write()?;
    let plan = cycle_plan(s, r.seed, dev.size_bytes(), dev.logical_block_bytes())?;
    r.run_id = plan.run.hex();
    let descriptor = run_descriptor(&plan, identity, crate::device::FlushMethod::Fdatasync, true);
    let sender = AckSender::connect(witness, &descriptor, ClientOptions::default())
        .map_err(CycleError::Connect)?;
    let delay = cut_delay(r.seed, s.delay_min, s.delay_max);
    if let Some(fall) = s.fall_time(r.cycle) {
        power.set_fall_time(fall)?;
        r.fall_time_ms = Some(fall.as_secs_f64() * 1e3);
    }
    let (cut, progress) = write_until_cut(dev.as_ref(), &plan, &sender, |progress| {
        let cut = (|| -> Result<_, CycleError> {
            wait_for_acks(progress, s.file.campaign.min_acks, Some(s.wait_timeout))?;
            let d0 = Instant::now();
            std::thread::sleep(delay);
            let failed_before = progress.failure().is_some();
            let stamp = power.off()?;
            let off_start = Instant::now();
            let delay_ms = d0.elapsed().as_secs_f64() * 1e3;
            // The writer goes on until it fails or the off time (at least VANISH_WAIT)
            // passes: whether it saw the drive go is part of the proof of the cut.
            let lost =
                proof::writer_lost_drive(progress, failed_before, s.off.max(proof::VANISH_WAIT));
            Ok((stamp, delay_ms, off_start, lost))
        })();
        (cut, AfterCut::StopWriter)
    })?;
    let stats = sender.finish(s.wait_timeout);
    let (cut_stamp, delay_ms, off_start, writer_lost_drive) = cut?;
    r.cut = Some(cut_stamp);
    r.delay_ms = delay_ms;
    note_writer(r, &progress, stats.ok());
    let mut evidence = CutEvidence {
        writer_lost_drive,
        ..Default::default()
    };
    // Asked before the drive is dropped or powered: what the switch says of this cut.
    evidence.switch_on = proof::switch_on(power);
    drop(dev);
    target.after_cut();
    std::thread::sleep(s.off.saturating_sub(off_start.elapsed()));
    evidence.rail = proof::rail(r, s, power)?;
    let on = power.on()?;
    r.off_ms = on.issued_ns.saturating_sub(cut_stamp.issued_ns) as f64 / 1e6;
    r.restore = Some(on);
    let a0 = Instant::now();
    let (dev, count_after) = target.reattach(s.wait_timeout);
    // Into a temporary file, judged from there: a cycle's run may be hours of acks.
    let fetched = fetch_run(witness, plan.run).map_err(CycleError::Fetch)?;
    if dev.is_ok() {
        r.reattach_ms = Some(a0.elapsed().as_secs_f64() * 1e3);
    }
    let report = fetched
        .judge(dev.map_err(|e| error_chain(&e)), s.wait_timeout)
        .report;
    r.unsafe_shutdowns_delta = match (count_before, count_after) {
        (Some(b), Some(a)) => Some(a as i64 - b as i64),
        _ => None,
    };
    evidence.unsafe_shutdowns_delta = r.unsafe_shutdowns_delta;
    r.report = report.to_summary();
    r.shown = results::ShownByTheReport::of(&report);
    evidence.apply(r);
    Ok(())
}

/// The writer of one drive-only cycle, over the configured region of a drive of
/// `size_bytes`.
fn cycle_plan(
    s: &Settings,
    seed: u64,
    size_bytes: u64,
    block_bytes: u32,
) -> Result<Plan, CycleError> {
    let plan = Plan {
        run: RunId::random(),
        region_offset: 0,
        region_bytes: s.region.unwrap_or(size_bytes).min(size_bytes),
        record_min: s.record_min,
        record_max: s.record_max,
        placement: s.placement,
        streams: s.file.writer.streams,
        seed,
        align: (block_bytes as u64).max(512),
        count: None,
        duration: None,
    };
    plan.validate()
        .map_err(|reason| CycleError::Plan { reason })?;
    Ok(plan)
}

/// What the writer did before the cut stopped it.
fn note_writer(r: &mut CycleResult, progress: &Progress, stats: Option<SenderStats>) {
    r.acked_records = progress.records_acked();
    r.witness_durable = stats.map(|x| x.durable).unwrap_or(0);
    r.last_acked = progress.last_ack().as_ref().map(LastAcked::of);
    r.writer_stopped = match progress.failure() {
        Some(f) => format!("target failed: {} returned {}", f.during, f.error),
        None => "stopped by the controller".into(),
    };
}
