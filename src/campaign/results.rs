//! The results file: one JSON header line, then one JSON line per finished cycle, each
//! fsync'd before the next cycle starts.
//!
//! Why the file is the campaign's only state: a controller killed at any moment loses at
//! most the cycle in progress (never a finished one), and restarting it with the same
//! config resumes after the last complete line. A torn last line (killed mid-write) is cut
//! off on resume.

use super::stats::{clopper_pearson_upper, quantile};
use crate::power::SwitchTiming;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const HEADER_FORMAT: &str = "plugpull-campaign/1";
pub const CYCLE_FORMAT: &str = "plugpull-campaign-cycle/1";
pub const SUMMARY_FORMAT: &str = "plugpull-campaign-summary/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub started_at: String,
    pub seed: u64,
    pub config: serde_json::Value,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LastAcked {
    pub stream: u16,
    pub seq: u64,
    pub offset: u64,
    pub flushed_ns: u64,
}

/// One finished cycle.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CycleResult {
    pub format: String,
    /// 1-based.
    pub cycle: u64,
    /// Seed of the writer's placement and sizes for this cycle.
    pub seed: u64,
    pub run_id: String,
    pub started_at: String,
    /// Delay between acks flowing and the cut.
    pub delay_ms: f64,
    pub cut: Option<SwitchTiming>,
    pub restore: Option<SwitchTiming>,
    pub off_ms: f64,
    /// Records the writer acknowledged before the cut stopped it.
    pub acked_records: u64,
    /// Acks the witness confirmed durable.
    pub witness_durable: u64,
    pub last_acked: Option<LastAcked>,
    /// Why the writer stopped ("target failed: flush ..." is what a cut looks like).
    pub writer_stopped: String,
    /// Power on → drive found again.
    pub reattach_ms: Option<f64>,
    /// "PASS", "FAIL", "INCONCLUSIVE", or "ERROR" (the cycle itself went wrong).
    pub verdict: String,
    pub summary: String,
    pub counts: BTreeMap<String, u64>,
    pub loss_window: Option<LossWindow>,
    pub ordering_holes: u64,
    pub dead_device: Option<String>,
    /// Rise of the drive's unsafe-shutdown counter across the cut, where it exposes one
    /// (must be 1 for a real cut).
    pub unsafe_shutdowns_delta: Option<i64>,
    /// Set when the cycle could not be completed (switch error, writer never started).
    pub error: Option<String>,
    pub cycle_ms: f64,
}

/// How much was lost, from the verify report (same fields).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LossWindow {
    pub records: u64,
    pub bytes: u64,
    /// From the earliest failing record's ack to the last ack of the run.
    pub ms: f64,
}

/// The open results file.
pub struct ResultsFile {
    pub path: PathBuf,
    file: File,
    pub header: Header,
    pub cycles: Vec<CycleResult>,
}

impl ResultsFile {
    /// Opens `path`, creating it with `header` if new; on resume checks the config is the
    /// same and cuts off a torn last line.
    pub fn open_or_create(path: &Path, header: Header) -> Result<ResultsFile> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
        }
        let exists = path.metadata().map(|m| m.len() > 0).unwrap_or(false);
        if !exists {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(path)
                .with_context(|| format!("creating the results file {}", path.display()))?;
            writeln!(file, "{}", serde_json::to_string(&header)?)?;
            file.sync_all()?;
            sync_dir(path);
            return Ok(ResultsFile {
                path: path.into(),
                file,
                header,
                cycles: vec![],
            });
        }
        let (old, cycles, good_len) = read(path)?;
        if old.config != header.config {
            bail!(
                "{} belongs to a campaign with a different configuration: restore the original config to resume it, or choose a new campaign.results file",
                path.display()
            );
        }
        let mut file = OpenOptions::new()
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        file.set_len(good_len)?;
        file.seek(SeekFrom::End(0))?;
        file.sync_all()?;
        Ok(ResultsFile {
            path: path.into(),
            file,
            header: old,
            cycles,
        })
    }

    /// Appends one cycle's result durably.
    pub fn append(&mut self, r: CycleResult) -> Result<()> {
        let line = serde_json::to_string(&r)? + "\n";
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("writing to {}", self.path.display()))?;
        self.cycles.push(r);
        Ok(())
    }
}

fn sync_dir(path: &Path) {
    if let Some(d) = path.parent() {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if let Ok(f) = File::open(d) {
            let _ = f.sync_all();
        }
    }
}

/// Reads a results file: header, complete cycles, and the byte length up to the last
/// complete line.
pub fn read(path: &Path) -> Result<(Header, Vec<CycleResult>, u64)> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut pos = 0usize;
    let mut header = None;
    let mut cycles = vec![];
    let mut good = 0u64;
    while let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') {
        let line = &data[pos..pos + nl];
        if header.is_none() {
            let h: Header = serde_json::from_slice(line).with_context(|| {
                format!("{} is not a plugpull campaign results file", path.display())
            })?;
            header = Some(h);
        } else {
            match serde_json::from_slice::<CycleResult>(line) {
                Ok(c) => cycles.push(c),
                // Only a torn tail can be unparseable; anything after it is dropped too.
                Err(_) => break,
            }
        }
        pos += nl + 1;
        good = pos as u64;
    }
    let header = header.with_context(|| format!("{} has no header line", path.display()))?;
    Ok((header, cycles, good))
}

/// What a campaign found so far.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub format: &'static str,
    pub cycles: u64,
    pub passed: u64,
    pub failed: u64,
    pub inconclusive: u64,
    pub errors: u64,
    /// Failed / (passed + failed): cycles that reached a verdict.
    pub failure_rate: f64,
    /// Exact one-sided 95% upper bound (Clopper-Pearson) on the per-cycle failure rate.
    pub failure_rate_upper_95: f64,
    pub method: &'static str,
    /// Loss windows of the failing cycles, ms: min, p50, p90, max.
    pub loss_window_ms: Option<BTreeMap<&'static str, f64>>,
    pub lost_records_total: u64,
    /// First cycle that failed (drives that fail only after many cuts).
    pub first_failure_cycle: Option<u64>,
    pub dead_device_cycles: u64,
}

pub fn summarize(cycles: &[CycleResult]) -> Summary {
    let count = |v: &str| cycles.iter().filter(|c| c.verdict == v).count() as u64;
    let (passed, failed) = (count("PASS"), count("FAIL"));
    let judged = passed + failed;
    let mut windows: Vec<f64> = cycles
        .iter()
        .filter_map(|c| c.loss_window.as_ref().map(|w| w.ms))
        .collect();
    windows.sort_by(f64::total_cmp);
    Summary {
        format: SUMMARY_FORMAT,
        cycles: cycles.len() as u64,
        passed,
        failed,
        inconclusive: count("INCONCLUSIVE"),
        errors: count("ERROR"),
        failure_rate: if judged == 0 {
            0.0
        } else {
            failed as f64 / judged as f64
        },
        failure_rate_upper_95: clopper_pearson_upper(failed, judged, 0.05),
        method: "exact one-sided Clopper-Pearson, 95%",
        loss_window_ms: (!windows.is_empty()).then(|| {
            [("min", 0.0), ("p50", 0.5), ("p90", 0.9), ("max", 1.0)]
                .into_iter()
                .map(|(k, q)| (k, quantile(&windows, q).unwrap_or(0.0)))
                .collect()
        }),
        lost_records_total: cycles
            .iter()
            .filter_map(|c| c.loss_window.as_ref().map(|w| w.records))
            .sum(),
        first_failure_cycle: cycles.iter().find(|c| c.verdict == "FAIL").map(|c| c.cycle),
        dead_device_cycles: cycles.iter().filter(|c| c.dead_device.is_some()).count() as u64,
    }
}

impl Summary {
    pub fn to_text(&self) -> String {
        let judged = self.passed + self.failed;
        let mut o = format!(
            "campaign: {} cycle(s): {} passed, {} failed, {} inconclusive, {} error(s)\n",
            self.cycles, self.passed, self.failed, self.inconclusive, self.errors
        );
        o += &format!(
            "failure rate: {:.2}% ({} of {} judged cycles); 95% upper bound {:.2}% ({})\n",
            self.failure_rate * 100.0,
            self.failed,
            judged,
            self.failure_rate_upper_95 * 100.0,
            self.method
        );
        if self.failed == 0 && judged > 0 {
            o += &format!(
                "  with no failure in {judged} cycles, the drive may still fail up to {:.2}% of cuts (rule of three: 3/n = {:.2}%)\n",
                self.failure_rate_upper_95 * 100.0,
                300.0 / judged as f64
            );
        }
        if let Some(w) = &self.loss_window_ms {
            o += &format!(
                "loss window (ms before the last ack): min {:.1}, p50 {:.1}, p90 {:.1}, max {:.1}; {} acknowledged record(s) lost in all\n",
                w["min"], w["p50"], w["p90"], w["max"], self.lost_records_total
            );
        }
        if let Some(c) = self.first_failure_cycle {
            o += &format!("first failure in cycle {c}\n");
        }
        if self.dead_device_cycles > 0 {
            o += &format!(
                "the drive did not come back after {} cut(s)\n",
                self.dead_device_cycles
            );
        }
        o
    }
}
