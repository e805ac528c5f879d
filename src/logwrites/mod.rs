//! `plugpull replay`: the crash states of a dm-log-writes log, each judged by verify.
//!
//! Why: plugpull's other tests cut the power once per run and see one state. The Linux
//! device-mapper target `log-writes` records every write, flush, FUA write and discard a
//! real kernel sent to the drive (xfstests replays such logs to test file systems'
//! crash consistency). Replaying the log up to each flush rebuilds every state an
//! honest drive may be left in at a power cut; verify must call each of them PASS
//! against exactly the acks the writer could have received by then, and must call FAIL
//! the states where a write an ack depends on was left out. That checks plugpull's
//! judgement against the kernel's own record of what was sent, state by state.
//!
//! `format` reads the log (and `encode` writes one), `image` is the replayed device,
//! `track` decides which acks each state must hold, `replay` is the pass over every
//! durable point with the incremental judge of `judge`, `drops` the left-out writes.
//! The format and the way to record a log: docs/replay.md.

pub mod budget;
#[cfg(test)]
mod differential_tests;
pub mod drops;
pub mod encode;
pub mod format;
pub mod image;
mod judge;
pub mod replay;
#[cfg(test)]
mod run_tests;
#[cfg(test)]
mod tests;
pub mod track;

use crate::model::{RunLog, RunSelector, Verdict};
use crate::record::RunId;
use crate::verify::temp_log::TempLog;
use crate::verify::{AckSource, VerifyError, VerifyOptions};
use crate::wire::auth::Key;
use drops::DropState;
use format::{FormatError, LogReader};
use replay::PassError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const REPLAY_FORMAT: &str = "plugpull-replay/1";

/// What `plugpull replay` is asked to do.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// The log device, or a file holding its bytes.
    pub log: PathBuf,
    /// Where the run's acks come from (the witness, or a `fetch` file).
    pub acks: AckSource,
    pub key_file: Option<PathBuf>,
    /// The run; None: the run of the newest stamp in the log's writes.
    pub run: Option<RunId>,
    /// The data device's state before the log's first write; None: zeroes.
    pub base: Option<PathBuf>,
    /// Drop states to judge besides the durable points.
    pub drops: u32,
    pub seed: u64,
    /// Judge every durable point with a whole verify (slow; the reference).
    pub full_verify: bool,
    /// Where the scratch image goes; None: the system's temporary directory.
    pub scratch_dir: Option<PathBuf>,
    pub read_timeout: Duration,
    /// Peak memory the replay may hold, in bytes (`budget`): a run that needs more is
    /// refused before the log is replayed.
    pub memory_bytes: u64,
    /// The command prints JSON (the domain only returns the summary).
    pub json: bool,
}

/// Why there is no replay summary.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("opening the log {}", .path.display())]
    OpenLog {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}", .path.display())]
    Format {
        path: PathBuf,
        #[source]
        source: FormatError,
    },
    #[error(
        "no write in {} carries a plugpull stamp, so the log names no run: pass --run RUN_ID",
        .0.display()
    )]
    NoRun(PathBuf),
    /// The run's acks could not be loaded (or no writer can have produced them).
    #[error(transparent)]
    Acks(#[from] VerifyError),
    #[error(transparent)]
    Memory(#[from] budget::TooBig),
    #[error("the scratch image in {}", .dir.display())]
    Scratch {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Verify's read buffers could not be had to judge a replayed state.
    #[error(
        "replay could not read back a replayed state, so there is no summary: free some memory (or replay on a machine with more free) and replay again"
    )]
    ReadBuffers(#[source] io::Error),
}

/// What a replay found (the JSON of `plugpull replay --json`).
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySummary {
    pub format: &'static str,
    pub log: String,
    #[serde(with = "crate::model::run_id_hex")]
    pub run: RunId,
    pub sector_bytes: u32,
    pub entries: u64,
    pub flushes: u64,
    pub fua_writes: u64,
    pub discards: u64,
    /// The names of the first [`replay::MAX_MARKS`] marks (a note counts them all).
    pub marks: Vec<String>,
    /// The run's acks at the witness.
    pub acks: usize,
    /// Of those, the ones the log made durable (the rest were never judged).
    pub acks_durable_in_log: usize,
    /// Sectors of the run the log wrote that belong to no ack (unacked writes).
    pub unacked_sectors: u64,
    pub durable_points: usize,
    pub durable_points_as_expected: usize,
    /// Durable points by verdict ("PASS", "INCONCLUSIVE" before the first ack, ...).
    pub point_verdicts: BTreeMap<&'static str, usize>,
    pub drop_states: usize,
    pub drop_states_as_expected: usize,
    /// Drop states by expected verdict.
    pub drop_expected: BTreeMap<&'static str, usize>,
    pub drops: Vec<DropState>,
    pub seed: u64,
    /// One line per verdict that disagrees with its expectation (past
    /// [`replay::MAX_DISAGREEMENT_LINES`] durable points, one line counting the rest).
    pub disagreement_lines: Vec<String>,
    pub disagreements: usize,
    pub replay_ms: f64,
    /// Judging the durable points: milliseconds per point and bytes read.
    pub judge_ms_per_point: f64,
    pub judge_bytes_read: u64,
    /// Warnings (acks the log never made durable, ...).
    pub notes: Vec<String>,
}

impl ReplaySummary {
    /// The summary line: `replayed 412 durable points (412 PASS as expected), 20 drop
    /// states (10 FAIL, 10 PASS as expected): 0 disagreements`; with disagreements the
    /// parentheses say how many were as expected.
    pub fn line(&self) -> String {
        let drop_verdicts: BTreeMap<&'static str, usize> =
            self.drops.iter().fold(BTreeMap::new(), |mut m, d| {
                *m.entry(d.verdict.name()).or_insert(0) += 1;
                m
            });
        format!(
            "replayed {} durable points ({}), {} drop states ({}): {} disagreements",
            self.durable_points,
            tally(
                &self.point_verdicts,
                self.durable_points_as_expected,
                self.durable_points
            ),
            self.drop_states,
            tally(
                &drop_verdicts,
                self.drop_states_as_expected,
                self.drop_states
            ),
            self.disagreements
        )
    }

    /// The text output: notes, disagreements, then the summary line.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for d in &self.disagreement_lines {
            out.push_str(&format!("DISAGREEMENT: {d}\n"));
        }
        if self.drop_states > 0 {
            out.push_str(&format!("drop states chosen with --seed {}\n", self.seed));
        }
        out.push_str(&self.line());
        out.push('\n');
        out
    }
}

/// "2 FAIL, 3 PASS as expected", or "2 FAIL, 3 PASS; 3 as expected" when some were not.
fn tally(verdicts: &BTreeMap<&'static str, usize>, as_expected: usize, total: usize) -> String {
    if total == 0 {
        return "none".into();
    }
    let list: Vec<String> = verdicts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    if as_expected == total {
        format!("{} as expected", list.join(", "))
    } else {
        format!("{}; {as_expected} as expected", list.join(", "))
    }
}

fn open_log(path: &Path) -> Result<LogReader<BufReader<File>>, ReplayError> {
    let open_err = |source| ReplayError::OpenLog {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(open_err)?;
    let len = f.seek(SeekFrom::End(0)).map_err(open_err)?;
    f.seek(SeekFrom::Start(0)).map_err(open_err)?;
    LogReader::new(BufReader::with_capacity(1 << 20, f), Some(len)).map_err(|source| {
        ReplayError::Format {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// The run of the newest plugpull stamp in the log's writes.
fn run_in_log(path: &Path) -> Result<RunId, ReplayError> {
    let mut run = None;
    for e in open_log(path)? {
        let e = e.map_err(|source| ReplayError::Format {
            path: path.to_path_buf(),
            source,
        })?;
        if let Some(r) = track::last_stamped_run(&e) {
            run = Some(r);
        }
    }
    run.ok_or_else(|| ReplayError::NoRun(path.to_path_buf()))
}

/// How many acks a streamable log file holds, counted without holding them, and its
/// run: the run is checked first, so an ack log of another run is refused as such and
/// not for its size.
fn acks_in_file(path: &Path, key: Option<&Key>, run: RunId) -> Result<u64, ReplayError> {
    let mut n = 0u64;
    let (log, _) =
        crate::witness::store::reader::stream_log_file(path, key, &mut |a| n += a.len() as u64)
            .map_err(|e| VerifyError::ReadingAcks {
                path: path.to_path_buf(),
                source: e.into(),
            })?;
    if log.descriptor.run_id != run {
        return Err(VerifyError::WrongRun {
            found: log.descriptor.run_id,
            asked: run,
        }
        .into());
    }
    Ok(n)
}

/// The run's acks, counted and checked against `--memory` (with the log's `entries`)
/// before they are loaded: from the ack file (a log in a witness directory with a
/// journal is first copied with the journal overlaid, as verify does), or fetched from
/// the witness into a temporary file first (in TMPDIR, removed after), as `verify
/// --witness` does.
fn load_acks(o: &ReplayOptions, run: RunId, entries: u64) -> Result<RunLog, ReplayError> {
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let check = |acks| budget::check(acks, entries, o.drops > 0, o.full_verify, o.memory_bytes);
    let copy = TempLog::new("replay");
    let file =
        match &o.acks {
            AckSource::File(path) => {
                let overlaid = crate::witness::store::reader::copy_overlaid(path, &copy.0)
                    .map_err(|e| VerifyError::ReadingAcks {
                        path: path.clone(),
                        source: e.into(),
                    })?;
                let file = if overlaid.is_some() {
                    copy.0.clone()
                } else {
                    path.clone()
                };
                check(acks_in_file(&file, key.as_ref(), run)?)?;
                file
            }
            AckSource::Witness(addr) => {
                let f = copy
                    .fetch_into(addr, &RunSelector::Run(run), key.as_ref())
                    .map_err(|e| VerifyError::Fetch(e.into()))?;
                // As verify: a witness that sends another run is refused as such, before
                // its acks are counted against --memory.
                if f.descriptor.run_id != run {
                    return Err(VerifyError::Fetch(
                    format!(
                        "asked the witness at {addr} for run {run} and it sent run {}: not judged",
                        f.descriptor.run_id
                    )
                    .into(),
                )
                .into());
                }
                check(f.acks)?;
                copy.0.clone()
            }
        };
    let vo = VerifyOptions {
        target: o.log.clone(),
        acks: AckSource::File(file),
        key_file: o.key_file.clone(),
        run: Some(run),
        allow_identity_mismatch: true,
        rehearsal: false,
        json: false,
        quiet: true,
        read_timeout: o.read_timeout,
        scan_region: false,
        budget: Default::default(),
    };
    let log = crate::verify::load_run(&vo)?;
    crate::witness::validate::refuse_impossible_run(&log).map_err(VerifyError::from)?;
    Ok(log)
}

/// Replays the log: every durable point, then the drop states.
pub fn run(o: &ReplayOptions) -> Result<ReplaySummary, ReplayError> {
    let t0 = Instant::now();
    let run = match o.run {
        Some(r) => r,
        None => run_in_log(&o.log)?,
    };
    // The entries the pass can replay (the super block's count, within the log's
    // length): with the run's acks, what the replay will hold, checked before either is.
    let entries = open_log(&o.log)?.entries_at_most();
    let log = load_acks(o, run, entries)?;
    let s = &log.descriptor.settings;
    let size = log
        .descriptor
        .device
        .size_bytes
        .max(s.region_offset.saturating_add(s.region_bytes));
    let dir = o.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    let image = image::ScratchImage::create(&dir, size, o.base.as_deref()).map_err(|source| {
        ReplayError::Scratch {
            dir: dir.clone(),
            source,
        }
    })?;
    let pass_err = |e: PassError| match e {
        PassError::Format(source) => ReplayError::Format {
            path: o.log.clone(),
            source,
        },
        PassError::Image(source) => ReplayError::Scratch {
            dir: dir.clone(),
            source,
        },
        PassError::ReadBuffers(source) => ReplayError::ReadBuffers(source),
    };
    let reader = open_log(&o.log)?;
    let sector_bytes = reader.sup.sector_bytes;
    let pass = replay::main_pass(
        reader,
        &image,
        &log.descriptor,
        &log.acks,
        replay::PassOptions {
            full_verify: o.full_verify,
            for_drops: o.drops > 0,
            read_timeout: o.read_timeout,
        },
    )
    .map_err(pass_err)?;
    let plans = drops::plan(&pass, &log.acks, o.drops, o.seed);
    let open = || {
        let f = File::open(&o.log).map_err(FormatError::Io)?;
        let len = f.metadata().map_err(FormatError::Io)?.len();
        LogReader::new(
            BufReader::with_capacity(1 << 20, f),
            (len > 0).then_some(len),
        )
    };
    let mut states = vec![];
    for p in &plans {
        states.push(
            drops::run_plan(p, &open, &image, &pass, &log, o.read_timeout).map_err(pass_err)?,
        );
    }
    Ok(summarise(o, &log, sector_bytes, pass, states, t0))
}

fn summarise(
    o: &ReplayOptions,
    log: &RunLog,
    sector_bytes: u32,
    mut pass: replay::MainPass,
    states: Vec<DropState>,
    t0: Instant,
) -> ReplaySummary {
    let mut point_verdicts = BTreeMap::new();
    for p in &pass.points {
        *point_verdicts.entry(p.verdict.name()).or_insert(0) += 1;
    }
    let mut drop_expected = BTreeMap::new();
    for d in &states {
        *drop_expected.entry(d.expected.name()).or_insert(0) += 1;
    }
    let as_expected = pass
        .points
        .iter()
        .filter(|p| p.verdict == p.expected)
        .count();
    let points_disagreeing = pass.points.len() - as_expected;
    let mut lines = std::mem::take(&mut pass.disagreements);
    if points_disagreeing > lines.len() {
        lines.push(format!(
            "{} more durable points disagree, not listed (the first {} are)",
            crate::units::thousands((points_disagreeing - lines.len()) as u64),
            lines.len()
        ));
    }
    let drops_disagreeing = states.iter().filter(|d| !d.agrees).count();
    for d in states.iter().filter(|d| !d.agrees) {
        lines.push(format!(
            "drop state ({}) at log entry {} without entries {:?} ({} acks): expected {}{}, verify says {}{}",
            match d.kind {
                drops::DropKind::Acked => "an acked write left out",
                drops::DropKind::Unacked => "unacked writes left out",
            },
            d.judged_at_entry,
            d.dropped_entries,
            d.acks,
            d.expected.name(),
            if d.expected_lost.is_empty() {
                String::new()
            } else {
                format!(" naming {}", d.expected_lost.join(", "))
            },
            d.verdict.name(),
            if d.found.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.found.join("; "))
            }
        ));
    }
    let mut notes = vec![];
    if let Some(first) = pass.first_never_durable.map(|a| a.record) {
        notes.push(format!(
            "{} of the run's {} acks have no durable write in the log (first: stream {} seq {}); they were never judged: was the run written through the log-writes target from its start?",
            pass.never_durable,
            log.acks.len(),
            first.stream,
            first.seq
        ));
    }
    if pass.marks_total > pass.marks.len() as u64 {
        notes.push(format!(
            "the log has {} marks; the first {} are listed",
            crate::units::thousands(pass.marks_total),
            pass.marks.len()
        ));
    }
    if pass.uncounted_entries {
        notes.push(format!(
            "more entries follow the {} the log's super block counts; they were not replayed: the kernel writes the final count at `dmsetup remove` (and at FUA writes and marks), so remove the target before reading its log",
            pass.entries
        ));
    }
    if o.drops > 0 && states.len() < o.drops as usize {
        notes.push(format!(
            "{} of {} drop states found candidates (an acked drop needs a durable write of an acked record; an unacked drop a write after the last durable point)",
            states.len(),
            o.drops
        ));
    }
    let disagreements = points_disagreeing + drops_disagreeing;
    ReplaySummary {
        format: REPLAY_FORMAT,
        log: o.log.display().to_string(),
        run: log.descriptor.run_id,
        sector_bytes,
        entries: pass.entries,
        flushes: pass.flushes,
        fua_writes: pass.fua_writes,
        discards: pass.discards,
        marks: pass.marks,
        acks: log.acks.len(),
        acks_durable_in_log: pass.acks.len(),
        unacked_sectors: pass.unacked_sectors,
        durable_points: pass.points.len(),
        durable_points_as_expected: as_expected,
        point_verdicts,
        drop_states: states.len(),
        drop_states_as_expected: states.iter().filter(|d| d.agrees).count(),
        drop_expected,
        drops: states,
        seed: o.seed,
        disagreement_lines: lines,
        disagreements,
        replay_ms: t0.elapsed().as_secs_f64() * 1e3,
        judge_ms_per_point: if pass.points.is_empty() {
            0.0
        } else {
            pass.judge_ms / pass.points.len() as f64
        },
        judge_bytes_read: pass.bytes_read,
        notes,
    }
}

/// The exit verdict of a summary: PASS with no disagreement, else FAIL.
pub fn outcome(s: &ReplaySummary) -> Verdict {
    if s.disagreements == 0 {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}
