//! `plugpull bench DIR`: the untar timing of the seeds. The same seeded,
//! untar-shaped tree (`tree::plan`, the workload of `plugpull write DIR`) is written into
//! DIR once per flush method, and each run is timed: files/s, MB/s, elapsed, the
//! per-file sync latency, the ratio to `--flush none`, and the time the full 53,000-file
//! / 528 MB tree would take, extrapolated from the scaled-down count and labelled so.
//!
//! Why a table of its own: the question the threads asked is not "how fast is one
//! flush" but "how long does unpacking a source tree take when every file must be on
//! stable storage first" (30 s locally, 36 min over NFS without a log device). That cost
//! is the file system's as much as the drive's: directory fsyncs, journal commits,
//! renames. The files are written exactly as `write DIR` writes them (same order, same
//! syscalls, same stamped content, no witness), so the figure is what a tree run costs.

use crate::record::{RecordId, RunId, RunKey, fill_record};
use crate::tree::TreeFlush;
use crate::tree::plan::{Arrival, FileStep, Step, TreePlan, TreeScale, plan};
use crate::tree::write::sync_dir;
use crate::units::{fmt_duration_s, thousands};
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::stats::{LatencySummary, Samples, mb_per_s, per_s};

/// The JSON format name of the tree bench report.
pub const TREE_FORMAT: &str = "plugpull-bench-tree/1";

/// The methods in table order: the control first, since every other row is compared
/// with it.
pub const METHODS: [TreeFlush; 4] = [
    TreeFlush::None,
    TreeFlush::Fsync,
    TreeFlush::Fdatasync,
    TreeFlush::Dsync,
];

/// What `bench DIR` needs.
#[derive(Debug, Clone)]
pub struct TreeBenchOptions {
    /// An existing directory; each method's tree is written into a new directory in it
    /// and removed afterwards.
    pub dir: PathBuf,
    /// Files of the scaled-down untar shape (bytes scale with them).
    pub files: u32,
    pub seed: Option<u64>,
    pub json: bool,
    pub quiet: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TreeBenchError {
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("--files must be at least 1")]
    NoFiles,
    #[error("cleaning up {}", .path.display())]
    Cleanup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// One method's run.
#[derive(Debug, Clone, Serialize)]
pub struct TreeBenchRow {
    pub flush: &'static str,
    /// File versions written (created files plus overwrites).
    pub files: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub files_per_s: f64,
    pub mb_per_s: f64,
    /// Per file, the time in the calls that make it durable: the file's fsync or
    /// fdatasync (for dsync: its O_DSYNC write) plus the fsync of its directory. All
    /// zero for `none`.
    pub sync: LatencySummary,
    /// elapsed / elapsed of `none` (None for `none` itself, or when it failed).
    pub ratio_to_none: Option<f64>,
    /// Extrapolated: elapsed × 53,000 / files created, for the full untar shape.
    pub untar_extrapolated_s: f64,
    /// The first failed operation, which ended this row early.
    pub error: Option<String>,
}

/// The whole report (`--json`).
#[derive(Debug, Clone, Serialize)]
pub struct TreeBenchReport {
    pub format: &'static str,
    pub tool_version: &'static str,
    pub started_at: String,
    pub dir: String,
    pub seed: u64,
    /// Files created per run (the scale); bytes written per run (every file version,
    /// overwrites included); and the full shape the extrapolation targets.
    pub files: u32,
    pub total_bytes: u64,
    pub untar_files: u32,
    pub untar_bytes: u64,
    pub rows: Vec<TreeBenchRow>,
    /// What the numbers say, in plain words.
    pub reading: Vec<String>,
}

impl TreeBenchReport {
    pub fn all_ok(&self) -> bool {
        self.rows.iter().all(|r| r.error.is_none())
    }
}

/// Runs every method on the same plan under `o.dir` and prints the table (or JSON on
/// stdout).
pub fn run(o: &TreeBenchOptions) -> Result<TreeBenchReport, TreeBenchError> {
    if !o.dir.is_dir() {
        return Err(TreeBenchError::NotADirectory(o.dir.clone()));
    }
    if o.files == 0 {
        return Err(TreeBenchError::NoFiles);
    }
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let p = plan(seed, TreeScale::scaled_down(o.files));
    if !o.quiet && !o.json {
        eprintln!(
            "plugpull bench: tree of {} files ({}) in {}, seed {seed}, methods {}",
            o.files,
            crate::units::fmt_bytes(p.bytes()),
            o.dir.display(),
            METHODS.map(TreeFlush::name).join(", ")
        );
    }
    let started_at = chrono::Local::now().to_rfc3339();
    let mut rows: Vec<TreeBenchRow> = Vec::new();
    for m in METHODS {
        // A random name nobody can have made in advance; and the directory is removed
        // afterwards only if this run created it (and it is still that directory), so a
        // directory that was there already is never deleted.
        let root = o
            .dir
            .join(format!("plugpull-bench-tree-{}-{}", m.name(), random_hex()));
        // Each run starts with nothing dirty in the file system, so no run pays for the
        // writeback the one before it left behind (none leaves all of it).
        settle(&o.dir);
        let (row, created) = run_method(&root, &p, m);
        let removed = match created {
            Some(id) if dir_id(&root) == Some(id) => fs::remove_dir_all(&root),
            _ => Ok(()),
        };
        settle(&o.dir);
        if !o.quiet && !o.json {
            eprintln!(
                "  {:<9} {:>8.1} s {}",
                m.name(),
                row.elapsed_s,
                row.error.as_deref().unwrap_or("")
            );
        }
        rows.push(row);
        if let Err(source) = removed
            && source.kind() != std::io::ErrorKind::NotFound
        {
            return Err(TreeBenchError::Cleanup { path: root, source });
        }
    }
    finish_rows(&mut rows, o.files);
    let report = TreeBenchReport {
        format: TREE_FORMAT,
        tool_version: env!("CARGO_PKG_VERSION"),
        started_at,
        dir: o.dir.display().to_string(),
        seed,
        files: o.files,
        total_bytes: p.bytes(),
        untar_files: TreeScale::UNTAR.files,
        untar_bytes: TreeScale::UNTAR.total_bytes,
        reading: reading(&rows),
        rows,
    };
    Ok(report)
}

/// syncfs(2) of the file system holding `dir`; a failure only makes the next row's
/// figure noisier, so it is ignored.
fn settle(dir: &Path) {
    if let Ok(f) = File::open(dir) {
        // SAFETY: syncfs takes an open descriptor, which `f` keeps open for the call.
        unsafe { libc::syncfs(std::os::unix::io::AsRawFd::as_raw_fd(&f)) };
    }
}

/// The ratio to `none` and the extrapolation, once every row is in.
fn finish_rows(rows: &mut [TreeBenchRow], files: u32) {
    let none_s = rows
        .iter()
        .find(|r| r.flush == TreeFlush::None.name() && r.error.is_none())
        .map(|r| r.elapsed_s);
    let scale = TreeScale::UNTAR.files as f64 / files as f64;
    for r in rows.iter_mut() {
        r.untar_extrapolated_s = r.elapsed_s * scale;
        r.ratio_to_none = match none_s {
            Some(n) if n > 0.0 && r.flush != TreeFlush::None.name() && r.error.is_none() => {
                Some(r.elapsed_s / n)
            }
            _ => None,
        };
    }
}

/// 24 random hex digits for a name.
fn random_hex() -> String {
    let mut r = [0u8; 12];
    crate::rng::fill_os_random(&mut r);
    r.iter().map(|b| format!("{b:02x}")).collect()
}

/// Device and inode of `path` itself (a link not followed).
fn dir_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(path).ok()?;
    m.is_dir().then(|| (m.dev(), m.ino()))
}

/// Writes the whole plan under `root` with method `m`. `root` is created here and must
/// not exist; the second value is the directory's identity when this call created it
/// (`None`: it was not created, and nothing may be removed).
fn run_method(root: &Path, p: &TreePlan, m: TreeFlush) -> (TreeBenchRow, Option<(u64, u64)>) {
    let run = RunId::random();
    let key = RunKey::new(run);
    let mut sync = Samples::with_capacity(p.scale.files as usize);
    let (mut files, mut bytes) = (0u64, 0u64);
    let t0 = Instant::now();
    let made = fs::create_dir(root).map_err(|e| format!("mkdir {}: {e}", root.display()));
    let created = made.is_ok().then(|| dir_id(root)).flatten();
    let mut error = made.err();
    if error.is_none() {
        for step in &p.steps {
            let r = match step {
                Step::MkDir(d) => mkdir(root, d, m),
                Step::File(f) => write_file(root, f, m, run, &key).map(|d| {
                    sync.push(d);
                    files += 1;
                    bytes += f.len_bytes();
                }),
            };
            if let Err(e) = r {
                error = Some(e);
                break;
            }
        }
    }
    let elapsed = t0.elapsed();
    let row = TreeBenchRow {
        flush: m.name(),
        files,
        bytes,
        elapsed_s: elapsed.as_secs_f64(),
        files_per_s: per_s(files, elapsed),
        mb_per_s: mb_per_s(bytes, elapsed),
        sync: sync.summary(),
        ratio_to_none: None,
        untar_extrapolated_s: 0.0,
        error,
    };
    (row, created)
}

/// `mkdir`, then (for methods that sync directories) fsync of its parent, as `write
/// DIR` does.
fn mkdir(root: &Path, d: &str, m: TreeFlush) -> Result<(), String> {
    let path = root.join(d);
    fs::create_dir(&path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
    if m.syncs_dirs() {
        let parent = path.parent().unwrap_or(root);
        sync_dir(parent).map_err(|e| format!("fsync {}: {e}", parent.display()))?;
    }
    Ok(())
}

/// One file version as `write DIR` writes it (tree/write.rs: create, write, flush,
/// rename, directory fsync); returns the time spent in the durability calls.
fn write_file(
    root: &Path,
    f: &FileStep,
    m: TreeFlush,
    run: RunId,
    key: &RunKey,
) -> Result<Duration, String> {
    let final_path = root.join(&f.path);
    let write_path = match &f.arrival {
        Arrival::InPlace => final_path.clone(),
        Arrival::Renamed { tmp } => root.join(tmp),
    };
    let rec = RecordId {
        stream: crate::tree::FILE_STREAM,
        seq: f.id,
        offset: 0,
        sectors: f.sectors,
        write_time_ns: crate::model::now_ns(),
    };
    let mut buf = vec![0u8; rec.len_bytes() as usize];
    fill_record(&mut buf, key, run, &rec);
    let what = |op: &str, p: &Path, e: std::io::Error| format!("{op} {}: {e}", p.display());
    let mut oo = OpenOptions::new();
    oo.write(true).create(true).truncate(true);
    if m == TreeFlush::Dsync {
        oo.custom_flags(libc::O_DSYNC);
    }
    let mut file = oo
        .open(&write_path)
        .map_err(|e| what("create", &write_path, e))?;
    let mut synced = Duration::ZERO;
    let t = Instant::now();
    file.write_all(&buf)
        .map_err(|e| what("write", &write_path, e))?;
    if m == TreeFlush::Dsync {
        synced += t.elapsed();
    }
    let t = Instant::now();
    let flushed = match m {
        TreeFlush::Fsync | TreeFlush::TestingOnlySkipDirFsync => Some(file.sync_all()),
        TreeFlush::Fdatasync => Some(file.sync_data()),
        TreeFlush::Dsync | TreeFlush::None => None,
    };
    if let Some(r) = flushed {
        r.map_err(|e| what("flush", &write_path, e))?;
        synced += t.elapsed();
    }
    drop(file);
    if write_path != final_path {
        fs::rename(&write_path, &final_path).map_err(|e| what("rename into", &final_path, e))?;
    }
    if m.syncs_dirs() {
        let dir = final_path.parent().unwrap_or(root);
        let t = Instant::now();
        sync_dir(dir).map_err(|e| what("fsync directory", dir, e))?;
        synced += t.elapsed();
    }
    Ok(synced)
}

/// The table as text.
pub fn text(r: &TreeBenchReport) -> String {
    let mut s = format!(
        "Tree bench (untar shape, {} files, {} per run, seed {}) in {}\n\n",
        thousands(r.files as u64),
        crate::units::fmt_bytes(r.total_bytes),
        r.seed,
        r.dir
    );
    s.push_str(&format!(
        "{:<10} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>12}\n",
        "flush",
        "files/s",
        "MB/s",
        "elapsed",
        "sync p50",
        "sync p99",
        "sync max",
        "x none",
        "53,000 files"
    ));
    for row in &r.rows {
        let ms = |us: f64| format!("{:.2} ms", us / 1000.0);
        s.push_str(&format!(
            "{:<10} {:>9.0} {:>8.1} {:>8.2} s {:>9} {:>9} {:>9} {:>9} {:>12}\n",
            row.flush,
            row.files_per_s,
            row.mb_per_s,
            row.elapsed_s,
            ms(row.sync.latency_us_p50),
            ms(row.sync.latency_us_p99),
            ms(row.sync.latency_us_max),
            row.ratio_to_none
                .map_or("-".to_string(), |x| format!("{x:.1}")),
            fmt_duration_s(row.untar_extrapolated_s),
        ));
        if let Some(e) = &row.error {
            s.push_str(&format!("  {} stopped early: {e}\n", row.flush));
        }
    }
    s.push_str(&format!(
        "\n\"53,000 files\" is extrapolated from {} files to the seeds' {} files / {} MB \
         (elapsed x {:.1}), not measured.\n\n",
        thousands(r.files as u64),
        thousands(r.untar_files as u64),
        r.untar_bytes / 1_000_000,
        r.untar_files as f64 / r.files as f64
    ));
    for line in &r.reading {
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// Below this per-file sync latency (p50), the stack answers from a cache: no medium
/// commits a journal and a directory in so little time without power-loss protection.
pub const FAST_SYNC_US: f64 = 200.0;

/// The plain-language reading of the rows.
pub fn reading(rows: &[TreeBenchRow]) -> Vec<String> {
    let mut out = vec![];
    let none = rows.iter().find(|r| r.flush == TreeFlush::None.name());
    let fsync = rows
        .iter()
        .find(|r| r.flush == TreeFlush::Fsync.name() && r.error.is_none());
    if let (Some(n), Some(f)) = (none, fsync) {
        out.push(format!(
            "Making every file durable before the next (fsync of the file and its \
             directory) took {:.1} times as long as writing the tree without syncs: the \
             full 53,000-file untar would take about {} instead of {} (extrapolated).",
            f.ratio_to_none.unwrap_or(0.0),
            fmt_duration_s(f.untar_extrapolated_s),
            fmt_duration_s(n.untar_extrapolated_s)
        ));
        let p50 = f.sync.latency_us_p50;
        out.push(if p50 < FAST_SYNC_US {
            format!(
                "A file and its directory were durable after {:.0} µs (p50): faster than a \
                 drive commits to flash or platters, so a cache answers the syncs. That is \
                 either power-loss protection or a stack that does not keep what it \
                 acknowledges (tmpfs keeps nothing at all); only a power-cut test can tell.",
                p50
            )
        } else {
            format!(
                "A file and its directory took {:.2} ms to become durable (p50, {:.2} ms \
                 p99): the syncs appear to wait for stable storage. That is the cost of \
                 durability here, not proof of it: a power-cut test shows whether what was \
                 acknowledged survives.",
                p50 / 1000.0,
                f.sync.latency_us_p99 / 1000.0
            )
        });
    }
    if rows.iter().any(|r| r.error.is_some()) {
        out.push("Some runs stopped at an error (shown above); their figures are partial.".into());
    }
    out.push(
        "The power-cut test of this stack: `plugpull write DIR --witness HOST:PORT`, cut \
         the power, then `plugpull verify DIR --witness HOST:PORT` (docs/tree.md)."
            .into(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(flush: &'static str, elapsed_s: f64) -> TreeBenchRow {
        TreeBenchRow {
            flush,
            files: 100,
            bytes: 1 << 20,
            elapsed_s,
            files_per_s: 100.0 / elapsed_s,
            mb_per_s: 1.0,
            sync: LatencySummary::default(),
            ratio_to_none: None,
            untar_extrapolated_s: 0.0,
            error: None,
        }
    }

    /// The ratio is to the `none` row and the extrapolation scales by 53,000 / files.
    #[test]
    fn ratio_and_extrapolation() {
        let mut rows = vec![row("none", 2.0), row("fsync", 146.0)];
        finish_rows(&mut rows, 1000);
        assert_eq!(rows[0].ratio_to_none, None);
        assert_eq!(rows[1].ratio_to_none, Some(73.0));
        assert!((rows[1].untar_extrapolated_s - 146.0 * 53.0).abs() < 1e-9);
        assert!((rows[0].untar_extrapolated_s - 106.0).abs() < 1e-9);
    }

    /// A failed control gives no ratio rather than a wrong one.
    #[test]
    fn no_ratio_without_a_control() {
        let mut rows = vec![row("none", 2.0), row("fsync", 4.0)];
        rows[0].error = Some("ENOSPC".into());
        finish_rows(&mut rows, 10);
        assert_eq!(rows[1].ratio_to_none, None);
    }

    /// Fast syncs are read as a cache, slow ones as waits for stable storage.
    #[test]
    fn reading_names_a_cache_or_a_wait() {
        let mut rows = vec![row("none", 1.0), row("fsync", 10.0)];
        rows[1].sync.latency_us_p50 = 20.0;
        finish_rows(&mut rows, 100);
        assert!(reading(&rows)[1].contains("a cache answers"));
        rows[1].sync.latency_us_p50 = 5000.0;
        assert!(reading(&rows)[1].contains("appear to wait"));
        assert!(reading(&rows)[0].contains("10.0 times"));
    }
}
