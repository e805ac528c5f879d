//! `plugpull write DIR`: executes a tree plan under DIR and acknowledges every file
//! once what makes it durable under the chosen [`TreeFlush`] returned success.
//!
//! Order per file (docs/tree.md): create (under the tmp name for a rename), write the
//! whole stamped content, flush the file, rename into place, fsync the directory, THEN
//! push the ack. A new directory's parent is fsynced before any file in it is acked. After
//! the first failed operation nothing more is acknowledged.

use crate::device::identity;
use crate::model::{Ack, FileName, RunDescriptor, TreeSettings, WriterSettings, now_ns};
use crate::record::{RecordId, RunId, RunKey, fill_record};
use crate::tree::plan::{Arrival, FileStep, Step, TreePlan, TreeScale, plan};
use crate::tree::{FILE_STREAM, MAX_FILE_BYTES, PLAN_VERSION, TreeFlush};
use crate::witness::client::{AckSender, ClientOptions};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a tree run needs; from `plugpull write DIR`.
#[derive(Debug, Clone)]
pub struct TreeWriteOptions {
    /// An existing directory; the run's tree goes into a new directory inside it.
    pub dir: PathBuf,
    pub witness: String,
    pub key_file: Option<PathBuf>,
    pub scale: TreeScale,
    pub flush: TreeFlush,
    /// Stop after this many files (versions) were acknowledged.
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub seed: Option<u64>,
    pub quiet: bool,
    pub max_unconfirmed: usize,
}

/// How a tree run ended (`write DIR --json` prints it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TreeWriteSummary {
    #[serde(with = "crate::model::run_id_hex")]
    pub run: RunId,
    pub root: PathBuf,
    pub seed: u64,
    pub flush: &'static str,
    pub files_acked: u64,
    pub bytes_acked: u64,
    pub elapsed_ms: f64,
    /// The first failed operation, if one stopped the run.
    pub failure: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TreeWriteError {
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("creating the tree root {}", .path.display())]
    Root {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(crate::exit::BoxedError),
    #[error(transparent)]
    Witness(crate::exit::BoxedError),
}

/// The run descriptor of a tree run: `settings` describe the acks' shape (one stream,
/// records up to the largest file at offset 0) so the witness's ordinary checks apply.
pub fn tree_descriptor(run: RunId, dir: &Path, p: &TreePlan, flush: TreeFlush) -> RunDescriptor {
    let mut device = identity::identify(dir);
    device.kind = "directory".into();
    RunDescriptor::started_here(
        run,
        device,
        WriterSettings {
            region_offset: 0,
            region_bytes: MAX_FILE_BYTES,
            record_bytes_min: crate::record::SECTOR as u64,
            record_bytes_max: MAX_FILE_BYTES,
            placement: "tree".into(),
            streams: 1,
            flush: match flush {
                TreeFlush::Fdatasync => crate::device::FlushMethod::Fdatasync,
                TreeFlush::Dsync => crate::device::FlushMethod::Dsync,
                TreeFlush::None => crate::device::FlushMethod::None,
                TreeFlush::Fsync | TreeFlush::TestingOnlySkipDirFsync => {
                    crate::device::FlushMethod::Fsync
                }
            },
            direct: false,
            seed: p.seed,
            max_records_unacked: None,
            io: crate::model::IoSettings::sync(),
        },
        Some(TreeSettings {
            plan_version: PLAN_VERSION,
            seed: p.seed,
            files: p.scale.files,
            total_bytes: p.scale.total_bytes,
            root: root_name(run),
            flush: flush.name().into(),
        }),
    )
}

/// The run's root directory name inside DIR.
pub fn root_name(run: RunId) -> String {
    format!("plugpull-{}", run.hex())
}

/// Connects to the witness, then writes the plan under DIR/plugpull-RUN until done,
/// `stop`, a limit, or the first failure.
pub fn run(o: &TreeWriteOptions, stop: &AtomicBool) -> Result<TreeWriteSummary, TreeWriteError> {
    if !o.dir.is_dir() {
        return Err(TreeWriteError::NotADirectory(o.dir.clone()));
    }
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let p = plan(seed, o.scale);
    let run = RunId::random();
    let desc = tree_descriptor(run, &o.dir, &p, o.flush);
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| TreeWriteError::Key(e.into()))?;
    let sender = AckSender::connect(
        &o.witness,
        &desc,
        ClientOptions {
            key,
            max_unconfirmed: o.max_unconfirmed.max(1),
            ..ClientOptions::default()
        },
    )
    .map_err(|e| TreeWriteError::Witness(e.into()))?;
    let root = o.dir.join(root_name(run));
    fs::create_dir(&root).map_err(|source| TreeWriteError::Root {
        path: root.clone(),
        source,
    })?;
    if o.flush.syncs_dirs() {
        sync_dir(&o.dir).map_err(|source| TreeWriteError::Root {
            path: o.dir.clone(),
            source,
        })?;
    }
    if !o.quiet {
        eprintln!(
            "plugpull write: started run {run} -> {} (tree of {} files, {}), flush {}, seed {seed}",
            root.display(),
            p.scale.files,
            crate::units::fmt_bytes(p.scale.total_bytes),
            o.flush.name(),
        );
    }
    let t0 = Instant::now();
    let mut w = Writer {
        root: &root,
        run,
        key: RunKey::new(run),
        flush: o.flush,
        sender: &sender,
        acked: 0,
        bytes: 0,
    };
    let mut failure = None;
    for step in &p.steps {
        let limit =
            o.count.is_some_and(|c| w.acked >= c) || o.duration.is_some_and(|d| t0.elapsed() >= d);
        if limit || stop.load(Ordering::SeqCst) {
            break;
        }
        if let Err(e) = w.step(step) {
            failure = Some(e);
            break;
        }
    }
    let elapsed_ms = t0.elapsed().as_secs_f64() * 1e3;
    let (acked, bytes) = (w.acked, w.bytes);
    use crate::model::bye;
    sender.set_bye_reason(match (&failure, stop.load(Ordering::SeqCst)) {
        // A step's error is its io::Error in words: "(os error N)" names the errno.
        (Some(e), _)
            if crate::device::error::DRIVE_GONE_ERRNOS
                .iter()
                .any(|n| e.contains(&format!("(os error {n})"))) =>
        {
            format!("{}: {e}", bye::TARGET_FAILED)
        }
        (Some(e), _) => format!("{}: {e}", bye::WRITE_FAILED),
        (None, true) => format!("{}: by a signal", bye::STOPPED),
        (None, false) => format!("{}: it wrote what it was asked to", bye::FINISHED),
    });
    sender
        .finish(Duration::from_secs(30))
        .map_err(|e| TreeWriteError::Witness(e.into()))?;
    Ok(TreeWriteSummary {
        run,
        root,
        seed,
        flush: o.flush.name(),
        files_acked: acked,
        bytes_acked: bytes,
        elapsed_ms,
        failure,
    })
}

struct Writer<'a> {
    root: &'a Path,
    run: RunId,
    key: RunKey,
    flush: TreeFlush,
    sender: &'a AckSender,
    acked: u64,
    bytes: u64,
}

impl Writer<'_> {
    /// One step; an Err names the operation that failed (nothing more is acked).
    fn step(&mut self, step: &Step) -> Result<(), String> {
        match step {
            Step::MkDir(d) => {
                let path = self.root.join(d);
                fs::create_dir(&path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
                if self.flush.syncs_dirs() {
                    let parent = path.parent().unwrap_or(self.root);
                    sync_dir(parent).map_err(|e| format!("fsync {}: {e}", parent.display()))?;
                }
                Ok(())
            }
            Step::File(f) => self.file(f),
        }
    }

    fn file(&mut self, f: &FileStep) -> Result<(), String> {
        let final_path = self.root.join(&f.path);
        let write_path = match &f.arrival {
            Arrival::InPlace => final_path.clone(),
            Arrival::Renamed { tmp } => self.root.join(tmp),
        };
        let rec = RecordId {
            stream: FILE_STREAM,
            seq: f.id,
            offset: 0,
            sectors: f.sectors,
            write_time_ns: now_ns(),
        };
        let mut buf = vec![0u8; rec.len_bytes() as usize];
        fill_record(&mut buf, &self.key, self.run, &rec);
        let what = |op: &str, p: &Path, e: std::io::Error| format!("{op} {}: {e}", p.display());
        let mut oo = OpenOptions::new();
        oo.write(true).create(true).truncate(true);
        if self.flush == TreeFlush::Dsync {
            oo.custom_flags(libc::O_DSYNC);
        }
        let mut file: File = oo
            .open(&write_path)
            .map_err(|e| what("create", &write_path, e))?;
        file.write_all(&buf)
            .map_err(|e| what("write", &write_path, e))?;
        match self.flush {
            TreeFlush::Fsync | TreeFlush::TestingOnlySkipDirFsync => file.sync_all(),
            TreeFlush::Fdatasync => file.sync_data(),
            TreeFlush::Dsync | TreeFlush::None => Ok(()),
        }
        .map_err(|e| what("flush", &write_path, e))?;
        drop(file);
        if write_path != final_path {
            fs::rename(&write_path, &final_path)
                .map_err(|e| what("rename into", &final_path, e))?;
        }
        if self.flush.syncs_dirs() {
            let dir = final_path.parent().unwrap_or(self.root);
            sync_dir(dir).map_err(|e| what("fsync directory", dir, e))?;
        }
        // The ack names the file, so the witness holds where it must be (docs/tree.md).
        let name = FileName {
            path: f.path.clone(),
            renamed_from: match &f.arrival {
                Arrival::InPlace => None,
                Arrival::Renamed { tmp } => Some(tmp.clone()),
            },
        };
        let ack = Ack {
            record: rec,
            flushed_ns: now_ns(),
        };
        self.sender.push_file(ack, name);
        self.acked += 1;
        self.bytes += rec.len_bytes();
        Ok(())
    }
}

/// fsync(2) of a directory: makes the names in it durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}
