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
pub mod parts;
pub mod parts_plan;
#[cfg(test)]
mod parts_tests;
pub mod replay;
#[cfg(test)]
mod run_tests;
mod summary;
#[cfg(test)]
mod tests;
pub mod track;

use crate::model::{RunDescriptor, RunLog, RunSelector};
use crate::record::RunId;
use crate::verify::temp_log::TempLog;
use crate::verify::{AckSource, VerifyError, VerifyOptions};
use crate::wire::auth::Key;
use format::{FormatError, LogReader};
use replay::PassError;
use std::fs::File;
use std::io::{self, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use summary::{Counts, summarise};
pub use summary::{REPLAY_FORMAT, ReplaySummary, outcome};

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
    #[error(transparent)]
    PartsMemory(#[from] budget::PieceTooBig),
    #[error(
        "the log {} changed while it was judged in parts (part {part}'s durable points are not the first part's): judge a copy of the log that nothing writes to",
        .path.display()
    )]
    LogChanged { path: PathBuf, part: usize },
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
fn acks_in_file(
    path: &Path,
    key: Option<&Key>,
    run: RunId,
) -> Result<(u64, RunDescriptor), ReplayError> {
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
    Ok((n, log.descriptor))
}

/// The run's acks as a file replay can stream: the ack file, its copy with the journal
/// overlaid (a log in a witness directory with a journal, as verify reads it), or a
/// fetch from the witness (as `verify --witness` does); the copies are in TMPDIR,
/// removed with `_copy`.
struct AckFile {
    path: PathBuf,
    _copy: TempLog,
    acks: u64,
    descriptor: RunDescriptor,
}

fn ack_file(o: &ReplayOptions, run: RunId, key: Option<&Key>) -> Result<AckFile, ReplayError> {
    let copy = TempLog::new("replay");
    match &o.acks {
        AckSource::File(path) => {
            let overlaid =
                crate::witness::store::reader::copy_overlaid(path, &copy.0).map_err(|e| {
                    VerifyError::ReadingAcks {
                        path: path.clone(),
                        source: e.into(),
                    }
                })?;
            let file = if overlaid.is_some() {
                copy.0.clone()
            } else {
                path.clone()
            };
            let (acks, descriptor) = acks_in_file(&file, key, run)?;
            Ok(AckFile {
                path: file,
                _copy: copy,
                acks,
                descriptor,
            })
        }
        AckSource::Witness(addr) => {
            let f = copy
                .fetch_into(addr, &RunSelector::Run(run), key)
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
            Ok(AckFile {
                path: copy.0.clone(),
                _copy: copy,
                acks: f.acks,
                descriptor: f.descriptor,
            })
        }
    }
}

/// The run's acks loaded whole from `file`, checked as verify checks them.
fn load_acks(o: &ReplayOptions, run: RunId, file: &AckFile) -> Result<RunLog, ReplayError> {
    let vo = VerifyOptions {
        target: o.log.clone(),
        acks: AckSource::File(file.path.clone()),
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

/// The scratch image for the run's data device.
fn scratch(o: &ReplayOptions, d: &RunDescriptor) -> Result<image::ScratchImage, ReplayError> {
    let s = &d.settings;
    let size = d
        .device
        .size_bytes
        .max(s.region_offset.saturating_add(s.region_bytes));
    let dir = o.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    image::ScratchImage::create(&dir, size, o.base.as_deref())
        .map_err(|source| ReplayError::Scratch { dir, source })
}

fn pass_error(o: &ReplayOptions, e: PassError) -> ReplayError {
    match e {
        PassError::Format(source) => ReplayError::Format {
            path: o.log.clone(),
            source,
        },
        PassError::Image(source) => ReplayError::Scratch {
            dir: o.scratch_dir.clone().unwrap_or_else(std::env::temp_dir),
            source,
        },
        PassError::ReadBuffers(source) => ReplayError::ReadBuffers(source),
    }
}

/// A fresh reader of the log from its start (for each part, each drop state).
fn reopen(path: &Path) -> Result<LogReader<BufReader<File>>, FormatError> {
    let f = File::open(path).map_err(FormatError::Io)?;
    let len = f.metadata().map_err(FormatError::Io)?.len();
    LogReader::new(
        BufReader::with_capacity(1 << 20, f),
        (len > 0).then_some(len),
    )
}

/// A run too big to judge whole, judged in parts of the region (`parts`), each within
/// `--memory`.
fn run_in_parts(
    o: &ReplayOptions,
    file: &AckFile,
    key: Option<&Key>,
    t0: Instant,
) -> Result<ReplaySummary, ReplayError> {
    let d = &file.descriptor;
    let mut stream = |sink: &mut dyn FnMut(&[crate::model::Ack])| {
        crate::witness::store::reader::stream_log_file(&file.path, key, sink)
            .map(|(log, _)| log)
            .map_err(|e| VerifyError::ReadingAcks {
                path: file.path.clone(),
                source: e.into(),
            })
    };
    let histogram = parts::survey(d, &mut stream)?;
    let shape = parts::shape(open_log(&o.log)?).map_err(|source| ReplayError::Format {
        path: o.log.clone(),
        source,
    })?;
    let room = budget::part_room_acks(shape, o.memory_bytes);
    let plan = histogram
        .cut(room)
        .map_err(|(range, acks)| budget::PieceTooBig {
            total_acks: file.acks,
            range,
            acks,
            bucket_bytes: histogram.bucket_bytes(),
            durable_points: shape.durable_points,
            need_bytes: budget::part_need_bytes(acks, shape),
            budget_bytes: o.memory_bytes,
        })?;
    let image = scratch(o, d)?;
    let sector_bytes = open_log(&o.log)?.sup.sector_bytes;
    let open = || reopen(&o.log);
    let judged = parts::judge_in_parts(
        &open,
        &image,
        d,
        &mut stream,
        &plan,
        shape.durable_points,
        o.read_timeout,
    )
    .map_err(|e| match e {
        parts::PartsError::Pass(e) => pass_error(o, e),
        parts::PartsError::Acks(e) => e.into(),
        parts::PartsError::LogChanged { part } => ReplayError::LogChanged {
            path: o.log.clone(),
            part,
        },
    })?;
    let counts = Counts {
        log: o.log.display().to_string(),
        seed: o.seed,
        drops_asked: o.drops,
        memory_bytes: o.memory_bytes,
        run: d.run_id,
        acks: file.acks as usize,
        acks_durable: judged.acks_durable,
        sector_bytes,
        parts: plan.len(),
    };
    Ok(summarise(counts, judged.pass, vec![], t0))
}

/// Replays the log: every durable point, then the drop states; in parts of the region
/// when the run does not fit `--memory` whole.
pub fn run(o: &ReplayOptions) -> Result<ReplaySummary, ReplayError> {
    let t0 = Instant::now();
    let run = match o.run {
        Some(r) => r,
        None => run_in_log(&o.log)?,
    };
    // The entries the pass can replay (the super block's count, within the log's
    // length): with the run's acks, what the replay will hold, checked before either is.
    let entries = open_log(&o.log)?.entries_at_most();
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let file = ack_file(o, run, key.as_ref())?;
    let whole_only = o.drops > 0 || o.full_verify;
    match budget::check(
        file.acks,
        entries,
        o.drops > 0,
        o.full_verify,
        o.memory_bytes,
    ) {
        Ok(()) => {}
        Err(too_big) if whole_only => return Err(too_big.into()),
        Err(_) => return run_in_parts(o, &file, key.as_ref(), t0),
    }
    let log = load_acks(o, run, &file)?;
    drop(file);
    let image = scratch(o, &log.descriptor)?;
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
            part: None,
        },
    )
    .map_err(|e| pass_error(o, e))?;
    let plans = drops::plan(&pass, &log.acks, o.drops, o.seed);
    let open = || reopen(&o.log);
    let mut states = vec![];
    for p in &plans {
        states.push(
            drops::run_plan(p, &open, &image, &pass, &log, o.read_timeout)
                .map_err(|e| pass_error(o, e))?,
        );
    }
    let counts = Counts {
        log: o.log.display().to_string(),
        seed: o.seed,
        drops_asked: o.drops,
        memory_bytes: o.memory_bytes,
        run: log.descriptor.run_id,
        acks: log.acks.len(),
        acks_durable: pass.acks.len(),
        sector_bytes,
        parts: 1,
    };
    Ok(summarise(counts, pass, states, t0))
}
