//! `plugpull campaign`: many unattended power cuts, each verified and recorded.
//!
//! Why: drives fail probabilistically (some only after dozens of cuts), so one pulled plug
//! proves little. The cycle (drive-only, controller and writer on one host):
//! start the writer → wait for acks to flow → wait a random delay → cut → stay off →
//! power on → drop/re-detect the drive (by serial) → verify → append one JSON line → repeat.
//!
//! - [`config`]: the TOML campaign file;
//! - [`context`]: what every cycle shares (settings, seeds), for every loop;
//! - [`drive_only`]: the cycle of a drive cut on the controller's host, and its loop;
//! - [`fleet`]: several drives in one campaign, and the matrix that compares them;
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
pub mod drive_only;
pub mod error;
pub mod fleet;
pub mod host;
pub mod host_listen;
pub mod proof;
pub mod results;
pub mod results_file;
pub mod target;
pub mod witness_backing;

pub use drive_only::{CycleError, run_cycle};
pub use error::CampaignError;

use config::{ConfigError, Settings};
use context::{Campaign, check_ramp};
use drive_only::run_drive_only;
use error::Result;
use results::{HEADER_FORMAT, Header, Summary};
use results_file::ResultsFile;
use std::path::PathBuf;

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
    /// A campaign of several drives (`[[drives]]`): the matrix that compares them.
    pub fleet: Option<crate::fleet::Matrix>,
}

impl Finished {
    fn of(header: Header, cycles: Vec<results::CycleResult>) -> Finished {
        Finished {
            summary: results::summarize(&cycles),
            header,
            cycles,
            fleet: None,
        }
    }

    fn with_fleet(self, m: crate::fleet::Matrix) -> Finished {
        Finished {
            fleet: Some(m),
            ..self
        }
    }
}

/// Runs (or resumes) the campaign and returns its results, for the command to print:
/// the command's exit status follows from the summary's failed and error counts.
pub fn run(o: CampaignOptions) -> Result<Finished> {
    let mut fleet = fleet::load(&o.config)?;
    let mut settings = match &fleet {
        Some(f) => fleet_settings(&o.config, f)?,
        None => Settings::load(&o.config)?,
    };
    if let Some(r) = &o.results {
        settings.results = r.clone();
        for d in fleet.iter_mut().flatten() {
            d.settings.results = r.clone();
        }
    }
    if o.summary_only {
        let (header, cycles, _) = results_file::read(&settings.results)?;
        if let Some(f) = &fleet {
            // Another fleet's results (drives added, renamed, reordered) are refused as a
            // resume refuses them: a drive added would show as passing cuts it never had.
            if header.config != settings.fingerprint {
                return Err(results_file::ResultsError::OtherConfig {
                    path: settings.results.clone(),
                }
                .into());
            }
            fleet::check_names(f, &cycles)?;
            let m = fleet::matrix(f, header.seed, &cycles);
            return Ok(Finished::of(header, cycles).with_fleet(m));
        }
        // A fleet's results summed as one drive's would make several drives' cuts one
        // drive's verdict.
        fleet::check_one_drive(&cycles)?;
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
    if let Some(f) = &fleet {
        fleet::check_names(f, &results.cycles)?;
        fleet::run(&c, f, &mut results)?;
        let m = fleet::matrix(f, c.seed, &results.cycles);
        return Ok(Finished::of(results.header, results.cycles).with_fleet(m));
    }
    if settings.file.target.kind == "host" {
        run_whole_host(&c, &mut results)?;
    } else {
        run_drive_only(&c, &mut results)?;
    }
    Ok(Finished::of(results.header, results.cycles))
}

/// What the fleet's drives share (the results file, the witness, the seed): the first
/// drive's settings, with the fingerprint of the whole file, so a resumed fleet checks
/// every drive's settings and not only the first's.
fn fleet_settings(path: &std::path::Path, fleet: &[fleet::FleetDrive]) -> Result<Settings> {
    let mut s = fleet[0].settings.clone();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })?;
    s.fingerprint = config::fingerprint(&text)?;
    Ok(s)
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
