//! What verify is asked to do ([`VerifyOptions`]) and why it can give no report
//! ([`VerifyError`]). Why apart from the module root: loading the run and judging the
//! target both take these, and the root uses both, so they sit below all three.

use super::budget::WorkDirFault;
use super::select;
use crate::exit::BoxedError;
use crate::record::RunId;
use crate::witness::validate::ImpossibleRun;
use std::path::PathBuf;
use std::time::Duration;

/// Where the acks to judge come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckSource {
    /// Fetched from the witness at HOST:PORT.
    Witness(String),
    /// Read from a log file (a witness log or `plugpull fetch` output).
    File(PathBuf),
}

/// Everything `verify` needs to know; the command line's `plugpull verify` arguments.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The block device or file the run wrote to.
    pub target: PathBuf,
    pub acks: AckSource,
    /// The witness's pre-shared key file, to authenticate the acks.
    pub key_file: Option<PathBuf>,
    /// The run to verify; None: the latest run for this drive (see `select`).
    pub run: Option<RunId>,
    /// Verify even when the target is not the drive the run was written to.
    pub allow_identity_mismatch: bool,
    /// The power was not cut on purpose: a PASS needs no evidence of a cut
    /// (`Report::note_writer_end`).
    pub rehearsal: bool,
    /// Print the report as JSON on stdout.
    pub json: bool,
    /// Only the verdict line.
    pub quiet: bool,
    /// A read slower than this marks the rest of the target unreadable.
    pub read_timeout: Duration,
    /// Read the run's whole region, not just the span its acknowledged records cover.
    pub scan_region: bool,
    /// The memory verify may hold and where its work files go.
    pub budget: super::budget::Budget,
}

/// Why verify gave no report.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "{} does not exist. Give the path of the device or file the run wrote to; if the drive did not come back after the cut, pass --run RUN_ID (or --acks FILE) to get a dead-device verdict",
        .0.display()
    )]
    TargetMissing(PathBuf),
    #[error("{} does not exist, and run {run} wrote to {written_to}: give that path", .target.display())]
    TargetMissingRunElsewhere {
        target: PathBuf,
        run: RunId,
        written_to: String,
    },
    /// The key file could not be read.
    #[error(transparent)]
    Key(BoxedError),
    #[error("reading acks from {}", .path.display())]
    ReadingAcks {
        path: PathBuf,
        #[source]
        source: BoxedError,
    },
    /// The witness could not be asked or refused the fetch.
    #[error(transparent)]
    Fetch(BoxedError),
    #[error(
        "run {run} was written in record format version {version}; this plugpull reads versions 1 and {}: verify it with the plugpull that wrote it (or a newer one)",
        crate::record::FORMAT_VERSION
    )]
    UnknownFormat { run: RunId, version: u16 },
    #[error("the ack log is for run {found}, not {asked}")]
    WrongRun { found: RunId, asked: RunId },
    /// Which run, or whether this drive may be judged by it.
    #[error(transparent)]
    Select(#[from] select::SelectError),
    /// The log holds what no writer can produce: no verdict (exit 3).
    #[error(transparent)]
    ImpossibleRun(#[from] ImpossibleRun),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The ack log, read twice by verify at scale (`verify::scale`), held another number
    /// of acks the second time: it changed under verify.
    #[error(
        "the ack log held {first} acks when first read and {second} when read again: it changed while verify read it"
    )]
    AcksChanged { first: u64, second: u64 },
    /// The memory budget cannot hold even one part of the region.
    #[error(
        "--memory {} is too little to verify this run: its region ({}) needs at least {} in {} parts. Give --memory {} or more",
        crate::units::fmt_bytes(*.budget), crate::units::fmt_bytes(*.region_bytes),
        crate::units::fmt_bytes(*.needed), .parts, crate::units::fmt_bytes(*.needed)
    )]
    MemoryTooSmall {
        budget: u64,
        region_bytes: u64,
        needed: u64,
        parts: u64,
    },
    /// The work directory could not hold the acks of the run's parts.
    #[error(
        "the work directory {} has {} free, too little for this run's parts (verify has written {} of them and keeps {} free): choose a directory on a disk with more space with --work-dir, or give more --memory (fewer parts on disk). {}",
        .dir.display(), crate::units::fmt_bytes(*.free), crate::units::fmt_bytes(*.written),
        crate::units::fmt_bytes(*.margin),
        if *.before_reading { "Nothing was read from the target" } else { "No verdict: verify stopped while it read the target" }
    )]
    WorkDirFull {
        dir: PathBuf,
        free: u64,
        written: u64,
        margin: u64,
        /// Whether verify stopped before it read anything from the target.
        before_reading: bool,
    },
    /// The work directory cannot be written.
    #[error(
        "verify cannot write its work files in {}: choose a writable directory with --work-dir",
        .dir.display()
    )]
    WorkDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A work file did not read back.
    #[error(transparent)]
    WorkFile(std::io::Error),
    #[error(
        "the work directory {} does not exist: create it, or give --work-dir a directory that exists (verify makes none). Nothing was read from the target",
        .0.display()
    )]
    WorkDirMissing(PathBuf),
    #[error(
        "the work directory {} is not a directory: give --work-dir a directory. Nothing was read from the target",
        .0.display()
    )]
    WorkDirNotADirectory(PathBuf),
    /// The work directory's file system is on the drive under test (`budget::check_work_dir`).
    #[error(
        "the work directory {} is on {on}: verify's work files would be written to the drive under test ({}) while it judges it. Nothing was read from the target: choose a directory on another drive with --work-dir",
        .dir.display(), .target.display()
    )]
    WorkDirOnTarget {
        dir: PathBuf,
        target: PathBuf,
        on: String,
    },
    /// The whole run's painted records outgrew the memory budget during the first pass
    /// (more live records than the run's settings allow for): the engine judges it in
    /// parts instead (`engine::verify_streamed_run`); never shown.
    #[error("the run's live records outgrew the memory budget while it was painted")]
    OutgrewTheBudget,
    /// The scan's read buffers, or the threads that fill them, could not be had.
    #[error(
        "verify could not start reading the target, so there is no verdict: free some memory (or verify on a machine with more free) and verify again"
    )]
    ReadBuffers(#[source] std::io::Error),
    /// No memory to sample the medium for records past the log's last acks.
    #[error(
        "verify could not look on the target for records past the log's last acks (which show a log taken before the writer stopped)"
    )]
    BeyondSample(#[source] std::io::Error),
}

impl VerifyError {
    /// `fault` of the work directory `dir` for `target` (`budget::check_work_dir`).
    pub fn work_dir_refused(dir: PathBuf, target: &std::path::Path, fault: WorkDirFault) -> Self {
        match fault {
            WorkDirFault::Missing => VerifyError::WorkDirMissing(dir),
            WorkDirFault::NotADirectory => VerifyError::WorkDirNotADirectory(dir),
            WorkDirFault::OnTarget(on) => VerifyError::WorkDirOnTarget {
                dir,
                target: target.to_path_buf(),
                on,
            },
            WorkDirFault::Unwritable(source) => VerifyError::WorkDir { dir, source },
        }
    }

    /// Whether this refuses how verify was asked to work (`--memory`, `--work-dir`)
    /// rather than anything about the run: a log no writer could produce outranks it
    /// (`engine::outranked_by_the_log`).
    pub fn is_budget_refusal(&self) -> bool {
        matches!(
            self,
            VerifyError::MemoryTooSmall { .. }
                | VerifyError::WorkDirFull { .. }
                | VerifyError::WorkDir { .. }
                | VerifyError::WorkDirMissing(_)
                | VerifyError::WorkDirNotADirectory(_)
                | VerifyError::WorkDirOnTarget { .. }
        )
    }
}
