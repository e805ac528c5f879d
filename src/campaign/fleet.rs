//! A campaign of several drives: `[[drives]]` in the campaign file, each with its own
//! `[drives.target]` and, for real drives, its own `[drives.power]`. Every cycle cuts
//! every drive (each through its own switch, at once, in a thread per drive, one witness
//! for all), and the campaign ends with the fleet matrix (`crate::fleet`) that compares
//! them.
//!
//! Why each drive is a whole campaign's settings: a drive of a fleet is checked and cut
//! exactly as a campaign of that one drive would be (the same validation, cycle, proof of
//! the cut and verify), so a fleet adds nothing a single drive's campaign has not earned.
//! Why threads per cycle and not per campaign: a drive that fails, dies or does not come
//! back is that cycle's FAIL or DEAD, recorded, and the next cycle starts for every
//! drive together, so the drives stay comparable cut for cut.

use super::config::{ConfigError, Settings};
use super::context::{Campaign, check_ramp};
use super::drive_only::{loopback_witness, open_target, run_cycle};
use super::error::{CampaignError, Result};
use super::results::CycleResult;
use super::results_file::ResultsFile;
use crate::fleet::{CutOutcome, CutResult, DriveRow, DriveSpec, Matrix};
use crate::model::Verdict;
use std::path::Path;

/// One drive of the fleet: its name for people and its campaign of one.
pub struct FleetDrive {
    pub name: String,
    pub claims_plp: bool,
    pub settings: Settings,
}

/// The fleet a campaign file describes, or `None` when it has no `[[drives]]` (a
/// campaign of one drive).
pub fn load(path: &Path) -> Result<Option<Vec<FleetDrive>>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.into(),
        source,
    })?;
    parse(&text, path.parent().unwrap_or(Path::new("."))).map_err(|e| ConfigError::In {
        path: path.into(),
        source: Box::new(e),
    })
}

/// Every drive's settings in a campaign file: its one drive's, or each of its fleet's.
pub fn load_all(path: &Path) -> Result<Vec<Settings>, ConfigError> {
    Ok(match load(path)? {
        Some(fleet) => fleet.into_iter().map(|d| d.settings).collect(),
        None => vec![Settings::load(path)?],
    })
}

macro_rules! invalid {
    ($($t:tt)*) => { return Err(ConfigError::Invalid(format!($($t)*))) };
}

pub fn parse(text: &str, base: &Path) -> Result<Option<Vec<FleetDrive>>, ConfigError> {
    let mut top: toml::Table = toml::from_str(text).map_err(ConfigError::Toml)?;
    let Some(drives) = top.remove("drives") else {
        return Ok(None);
    };
    let Some(drives) = drives.as_array().filter(|d| !d.is_empty()) else {
        invalid!("drives must be a non-empty array of [[drives]] tables");
    };
    if top.contains_key("target") {
        invalid!(
            "a campaign with [[drives]] gives each drive its own [drives.target]: remove the top-level [target]"
        );
    }
    let shared_power = top.remove("power");
    let mut fleet: Vec<FleetDrive> = vec![];
    // Each drive's serial ("" for none), and the switches of drives with their own.
    let mut serials: Vec<Option<String>> = vec![];
    let mut switches: Vec<(usize, toml::Value)> = vec![];
    for (i, d) in drives.iter().enumerate() {
        let Some(d) = d.as_table() else {
            invalid!("drives[{i}] must be a table");
        };
        let mut d = d.clone();
        let name = match d.remove("name") {
            Some(toml::Value::String(n)) if !n.trim().is_empty() => n,
            _ => {
                invalid!("drives[{i}].name: every drive needs a name for people (\"candidate A\")")
            }
        };
        // Each drive's cycle is a line named by the drive (stderr, the matrix): a line
        // break or another control character in a name would print a forged line.
        if name.chars().any(char::is_control) {
            invalid!(
                "drives[{i}].name {name:?} has a control character (a line break, a tab, an escape): a name is printed on one line"
            );
        }
        if fleet.iter().any(|f| f.name == name) {
            invalid!("drives[{i}].name \"{name}\" is given twice: names tell the drives apart");
        }
        let claims_plp = match d.remove("claims_plp") {
            None => false,
            Some(toml::Value::Boolean(b)) => b,
            Some(_) => invalid!("drives[{i}].claims_plp must be true or false"),
        };
        let Some(target) = d.remove("target") else {
            invalid!("drives[{i}] (\"{name}\") has no [drives.target]");
        };
        let d_power_own = d.contains_key("power");
        let power = match (d.remove("power"), &shared_power) {
            (Some(p), _) => p,
            (None, Some(p)) => {
                let kind = target.get("kind").and_then(|k| k.as_str()).unwrap_or("");
                if kind != "simdrive" {
                    invalid!(
                        "drives[{i}] (\"{name}\") has no [drives.power]: a real drive needs its own switch in a fleet (one relay cutting several drives at once is not supported)"
                    );
                }
                p.clone()
            }
            (None, None) => invalid!("drives[{i}] (\"{name}\") has no [drives.power]"),
        };
        if let Some(k) = d.keys().next() {
            invalid!("drives[{i}] (\"{name}\"): unknown key {k}");
        }
        if target.get("kind").and_then(|k| k.as_str()) == Some("host") {
            invalid!(
                "drives[{i}] (\"{name}\"): whole-host drives (kind = \"host\") cannot be in a fleet yet: run a campaign per host"
            );
        }
        // Checked here, not when the drive is opened: a fleet is refused whole before its
        // results file is made or any drive is cut.
        if let Some(p) = target.get("profile").and_then(|p| p.as_str()) {
            if let Err(reason) = crate::sim::Profile::parse(p) {
                invalid!("drives[{i}] (\"{name}\"): target.profile: {reason}");
            }
        }
        // Two entries of one real drive would run two writers on it at once, each run
        // judged against the other's records; two on one switch would cut each other's
        // drive (a shared cut group is not supported): both refused.
        let serial = target
            .get("serial")
            .and_then(|s| s.as_str())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if let Some(serial) = &serial {
            let same =
                |s: &Option<String>| s.as_ref().is_some_and(|s| s.eq_ignore_ascii_case(serial));
            if let Some(j) = serials.iter().position(same) {
                invalid!(
                    "drives[{i}] (\"{name}\") has the serial {serial:?} of drives[{j}] (\"{}\"): a drive is in a fleet once",
                    fleet[j].name
                );
            }
        }
        serials.push(serial);
        let simulated = target.get("kind").and_then(|k| k.as_str()) == Some("simdrive");
        if d_power_own && !simulated {
            if let Some(j) = switches.iter().position(|(_, p)| p == &power) {
                invalid!(
                    "drives[{i}] (\"{name}\") has the same [drives.power] as drives[{}] (\"{}\"): one switch cutting several drives at once is not supported; give each drive its own",
                    switches[j].0,
                    fleet[switches[j].0].name
                );
            }
            switches.push((i, power.clone()));
        }
        let mut one = top.clone();
        one.insert("target".into(), target);
        one.insert("power".into(), power);
        let text = toml::to_string(&one).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let settings = Settings::parse(&text, base)
            .map_err(|e| ConfigError::Invalid(format!("drives[{i}] (\"{name}\"): {e}")))?;
        fleet.push(FleetDrive {
            name,
            claims_plp,
            settings,
        });
    }
    Ok(Some(fleet))
}

/// How one drive's cycle counts in the matrix.
pub fn cut_result(r: &CycleResult) -> CutResult {
    let outcome = if r.report.dead_device.is_some() {
        CutOutcome::Dead
    } else if r.cut_not_proven() {
        CutOutcome::Inconclusive
    } else {
        match r.report.verdict {
            Verdict::Pass => CutOutcome::Pass,
            Verdict::Fail => CutOutcome::Fail,
            _ => CutOutcome::Inconclusive,
        }
    };
    CutResult {
        outcome,
        acked_lost: r.report.counts.failing(),
        acked: r.report.counts.total(),
        loss_window_ms: r.report.loss_window.as_ref().map(|w| w.ms),
        unsafe_shutdowns_delta: r.unsafe_shutdowns_delta,
    }
}

/// The matrix of the results' cycles, a row per drive of `fleet`, in its order.
pub fn matrix(fleet: &[FleetDrive], seed: u64, cycles: &[CycleResult]) -> Matrix {
    let rows = fleet
        .iter()
        .map(|d| {
            let mut mine: Vec<&CycleResult> = cycles
                .iter()
                .filter(|c| c.drive.as_deref() == Some(d.name.as_str()))
                .collect();
            mine.sort_by_key(|c| c.cycle);
            // As verify identified the drive last (model, firmware, cache, FUA).
            let device = mine.iter().rev().find_map(|c| c.shown.device.as_ref());
            let field = |k: &str| device.and_then(|d| d.get(k));
            let model = match (
                field("model").and_then(|m| m.as_str()),
                field("firmware").and_then(|f| f.as_str()),
            ) {
                (Some(m), Some(fw)) => format!("{m}, firmware {fw}"),
                (Some(m), None) => m.to_string(),
                (None, _) => "not identified".into(),
            };
            DriveRow::new(
                DriveSpec {
                    name: d.name.clone(),
                    model,
                    claims_plp: d.claims_plp,
                    write_cache: field("write_cache")
                        .and_then(|w| w.as_str())
                        .map(str::to_string),
                    fua: field("fua").and_then(|f| f.as_bool()),
                },
                mine.into_iter().map(cut_result).collect(),
            )
        })
        .collect();
    Matrix::new(seed, rows)
}

/// Runs the fleet's cycles not yet in `results`: per cycle a thread per drive that has
/// no line for it yet (a campaign stopped between two drives' lines resumes with the
/// others), the lines appended in the fleet's order.
pub fn run(c: &Campaign, fleet: &[FleetDrive], results: &mut ResultsFile) -> Result<()> {
    let done_by = |name: &str, results: &ResultsFile| {
        results
            .cycles
            .iter()
            .filter(|r| r.drive.as_deref() == Some(name))
            .map(|r| r.cycle)
            .max()
            .unwrap_or(0)
    };
    let first = fleet
        .iter()
        .map(|d| done_by(&d.name, results))
        .min()
        .unwrap_or(0);
    let mut rigs = vec![];
    for (k, d) in fleet.iter().enumerate() {
        let (target, sim) = open_target(&d.settings, drive_seed(c.seed, k), first)?;
        let power = d.settings.file.power.build(sim)?;
        check_ramp(&d.settings, power.as_ref())?;
        rigs.push((target, power));
    }
    c.say(format!(
        "plugpull campaign: {} drives, {} cycle(s) each, results in {} (seed {})",
        fleet.len(),
        c.cycles_wanted,
        c.settings.results.display(),
        c.seed
    ));
    let (witness_addr, own_witness) = loopback_witness(c.settings)?;
    for cycle in first + 1..=c.cycles_wanted {
        let wanted: Vec<bool> = fleet
            .iter()
            .map(|d| done_by(&d.name, results) < cycle)
            .collect();
        let lines: Vec<Option<CycleResult>> = std::thread::scope(|s| {
            let handles: Vec<_> = rigs
                .iter_mut()
                .zip(fleet)
                .enumerate()
                .map(|(k, ((target, power), d))| {
                    let addr = &witness_addr;
                    let go = wanted[k];
                    s.spawn(move || {
                        go.then(|| {
                            let mut r = run_cycle(
                                cycle,
                                drive_seed(c.seed, k),
                                &d.settings,
                                target,
                                power.as_mut(),
                                addr,
                            );
                            r.drive = Some(d.name.clone());
                            r
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for r in lines.into_iter().flatten() {
            c.say(format!(
                "cycle {cycle}/{} {}: {} acked; {} - {}{}",
                c.cycles_wanted,
                r.drive.as_deref().unwrap_or(""),
                crate::units::thousands(r.acked_records),
                r.status(),
                match &r.error {
                    Some(e) => e.as_str(),
                    None => &r.report.summary,
                },
                r.health_lines()
            ));
            results.append(r)?;
        }
    }
    if let Some(w) = own_witness {
        w.shutdown();
    }
    Ok(())
}

/// Drive `k`'s campaign seed: its cycles' seeds follow from it as a campaign of one
/// drive's do (drive 0 keeps the campaign seed).
fn drive_seed(seed: u64, k: usize) -> u64 {
    if k == 0 {
        seed
    } else {
        super::context::derive(seed, 1 << 48 | k as u64)
    }
}

/// Refuses a results file with a cycle of a drive this fleet does not name (another
/// fleet's file, or a one-drive campaign's): its rows would be merged into the wrong
/// drive's, or into none.
pub fn check_names(fleet: &[FleetDrive], cycles: &[CycleResult]) -> Result<()> {
    if let Some(r) = cycles.iter().find(|r| {
        !fleet
            .iter()
            .any(|d| Some(d.name.as_str()) == r.drive.as_deref())
    }) {
        return Err(CampaignError::Config(ConfigError::Invalid(format!(
            "the results file has a cycle of drive {:?}, which is not in the campaign file's [[drives]]: use a new results file for another fleet",
            r.drive
                .as_deref()
                .unwrap_or("(none: a campaign of one drive)")
        ))));
    }
    Ok(())
}

/// Refuses a fleet's results file for a campaign of one drive: its summary would pool
/// every drive's cycles as one drive's.
pub fn check_one_drive(cycles: &[CycleResult]) -> Result<()> {
    if let Some(name) = cycles.iter().find_map(|r| r.drive.as_deref()) {
        return Err(CampaignError::Config(ConfigError::Invalid(format!(
            "the results file has a cycle of drive {name:?} of a campaign of several drives ([[drives]]), and this campaign file has one drive: use the fleet's campaign file, or a new results file"
        ))));
    }
    Ok(())
}
