//! `plugpull write`: stream records to the target, flush, acknowledge to the witness.
//!
//! Setup order matters: check everything that can be checked before touching anything
//! (the safety rules, sizes, free space), then reach the witness (address, handshake), so a
//! run never writes without someone keeping its promises and a witness that is down
//! leaves nothing behind; only then create the file (marked as plugpull's, see
//! `device::marker`) and make its allocation durable before the first ack. A file created
//! by an attempt that fails or is interrupted before its first record is removed again.

pub mod engine;
mod pipe;
pub mod plan;
mod status;

use crate::commands::args::WriteArgs;
use crate::device::{
    Device, FileDevice, OpenOptions, PreparedFile, identity, is_block_device, marker,
    prepare_target_file, safety,
};
use crate::exit;
use crate::model::Placement;
use crate::model::{Ack, RunDescriptor, WriterSettings};
use crate::record::{FORMAT_VERSION, RunId, SECTOR};
use crate::witness::client::{AckSender, ClientOptions};
use anyhow::{Context, Result, bail};
use engine::{AckSink, Progress, run_streams};
use plan::Plan;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const DEFAULT_FILE_REGION: u64 = 1 << 30;

impl AckSink for AckSender {
    fn push(&self, ack: Ack) {
        AckSender::push(self, ack)
    }
}

/// What `write` prints at the end (and with --json).
#[derive(Debug, Serialize)]
pub struct WriteSummary {
    pub format: &'static str,
    pub run_id: String,
    pub target: String,
    /// "limit reached", "interrupted" or "target failed".
    pub stopped_because: String,
    pub records_acked: u64,
    pub bytes_acked: u64,
    /// Acks the witness confirmed durable.
    pub witness_durable: u64,
    pub seconds: f64,
    pub records_per_s: f64,
    pub flush_latency_us_p50: f64,
    pub flush_latency_us_p99: f64,
    pub flush_latency_us_max: f64,
    pub last_acked: Option<AckedRecord>,
    pub failure: Option<String>,
    pub seed: u64,
    /// Set when the target lives in RAM (tmpfs, ramfs, a RAM disk): the run tests no drive.
    pub ram_warning: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct AckedRecord {
    pub stream: u16,
    pub seq: u64,
    pub offset: u64,
    pub len_bytes: u64,
    pub flushed_ns: u64,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_stop_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// A write target that passed every check that needs no change to it; nothing has been
/// created or written yet.
#[derive(Debug)]
pub struct TargetPlan {
    pub path: PathBuf,
    pub is_block: bool,
    pub offset: u64,
    /// Bytes of the run's region, from `offset`.
    pub region_bytes: u64,
    /// The device's logical block size (512 for a file).
    pub logical_block_bytes: u32,
}

/// Every check that can be made before touching the target: the safety rules, a region
/// of whole sectors that fits the device, free space for a file to be created or grown.
/// The region's default is the rest of a block device, an existing file's size past
/// `offset`, or 1 GiB for a new file.
pub fn plan_target(
    target: &Path,
    destroy: Option<&Path>,
    offset: u64,
    size: Option<u64>,
) -> Result<TargetPlan> {
    safety::check_write_target(target, destroy, offset)?;
    let is_block = is_block_device(target);
    let sector = SECTOR as u64;
    if offset % sector != 0 {
        bail!("--offset {offset} is not a multiple of {sector} bytes");
    }
    let (region_bytes, logical_block_bytes) = if is_block {
        let dev = FileDevice::open_read(target)?;
        let avail = dev
            .size_bytes()
            .checked_sub(offset)
            .context("--offset is past the end of the device")?;
        let region = size.unwrap_or(avail / sector * sector);
        if region > avail {
            bail!(
                "the region ({region} bytes at offset {offset}) does not fit on {} ({} bytes): use a smaller --size",
                target.display(),
                dev.size_bytes()
            );
        }
        (region, dev.logical_block_bytes())
    } else {
        let existing = fs::metadata(target).map(|m| m.len()).unwrap_or(0);
        let region = size.unwrap_or(if existing > offset {
            existing - offset
        } else {
            DEFAULT_FILE_REGION
        });
        (region, 512)
    };
    if region_bytes < sector || region_bytes % sector != 0 {
        bail!(
            "--size {region_bytes} is not a usable region: it must be whole {sector}-byte sectors \
             and hold at least one record (e.g. --size 64M)"
        );
    }
    let plan = TargetPlan {
        path: target.to_owned(),
        is_block,
        offset,
        region_bytes,
        logical_block_bytes,
    };
    if !is_block {
        plan.check_free_space()?;
    }
    Ok(plan)
}

impl TargetPlan {
    /// Bytes the target file must have.
    fn file_bytes(&self) -> u64 {
        self.offset + self.region_bytes
    }

    /// Refuses a file the file system has no room to create or grow (statvfs), so
    /// preallocation does not run out of space half-way.
    fn check_free_space(&self) -> Result<()> {
        let existing = fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        let need = self.file_bytes().saturating_sub(existing);
        if need == 0 {
            return Ok(());
        }
        let dir = parent_dir(&self.path);
        let st = nix::sys::statvfs::statvfs(dir)
            .with_context(|| format!("checking free space in {}", dir.display()))?;
        let free = st.blocks_available() as u64 * st.fragment_size() as u64;
        if need > free {
            bail!(
                "{} needs {} more ({} in all) but {} has only {} free: use a smaller --size or another file system",
                self.path.display(),
                crate::units::fmt_bytes(need),
                crate::units::fmt_bytes(self.file_bytes()),
                dir.display(),
                crate::units::fmt_bytes(free)
            );
        }
        Ok(())
    }

    /// The identity of the target as it will be once prepared: that of the existing file
    /// or device, or, for a file still to be created, that of its directory's file system
    /// with the file's path and size (so the witness can be asked before anything exists).
    pub fn identity(&self) -> identity::DeviceIdentity {
        if self.path.exists() {
            let mut id = identity::identify(&self.path);
            if !self.is_block {
                id.size_bytes = id.size_bytes.max(self.file_bytes());
            }
            return id;
        }
        let dir = parent_dir(&self.path);
        let mut id = identity::identify(dir);
        let canonical_dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        id.target = match self.path.file_name() {
            Some(n) => canonical_dir.join(n).display().to_string(),
            None => self.path.display().to_string(),
        };
        id.kind = "file".into();
        id.size_bytes = self.file_bytes();
        // The directory's inode is not the file's, and the file has none yet: a file this
        // run creates is named by its canonical path (identity::Medium::Path), which
        // verify matches against the file's own identity later.
        id.file = None;
        id
    }

    /// Creates or grows a file target (marked as plugpull's, zero-filled, durable), opens
    /// the target and checks the region fits. For a file created here, the returned
    /// [`PreparedFile`] removes it again when dropped unless kept; any error here removes
    /// it too. `stop` (Ctrl-C) interrupts preallocation.
    pub fn prepare(
        &self,
        opts: OpenOptions,
        stop: &AtomicBool,
    ) -> Result<(FileDevice, Option<PreparedFile>)> {
        let file = if self.is_block {
            None
        } else {
            Some(prepare_target_file(
                &self.path,
                self.file_bytes(),
                Some((marker::Creator::Write, self.offset)),
                stop,
            )?)
        };
        let dev = FileDevice::open_write(&self.path, opts)?;
        if self.file_bytes() > dev.size_bytes() {
            bail!(
                "the region ({} bytes at offset {}) does not fit on {} ({} bytes): use a smaller --size",
                self.region_bytes,
                self.offset,
                self.path.display(),
                dev.size_bytes()
            );
        }
        Ok((dev, file))
    }
}

fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Everything before the first write, for callers that need no witness first (the
/// campaign agent): [`plan_target`], then [`TargetPlan::prepare`], keeping the file.
/// Returns the device and the region's size.
pub fn open_target(
    target: &Path,
    destroy: Option<&Path>,
    offset: u64,
    size: Option<u64>,
    opts: OpenOptions,
) -> Result<(FileDevice, u64)> {
    let plan = plan_target(target, destroy, offset, size)?;
    let (dev, file) = plan.prepare(opts, &AtomicBool::new(false))?;
    if let Some(f) = file {
        f.keep();
    }
    Ok((dev, plan.region_bytes))
}

pub fn run(a: WriteArgs) -> Result<i32> {
    let target = &a.target;
    // From here on Ctrl-C stops the run cleanly, preallocation included.
    install_stop_handler();
    let tp = plan_target(target, a.destroy_data_on.as_deref(), a.offset, a.size)?;
    let region_bytes = tp.region_bytes;
    let seed = a.seed.unwrap_or_else(crate::rng::random_seed);
    let run = RunId::random();
    let align = if a.no_direct {
        512
    } else {
        (tp.logical_block_bytes as u64).max(512)
    };
    let plan = Plan {
        run,
        region_offset: a.offset,
        region_bytes,
        record_min: a.record_size.min,
        record_max: a.record_size.max,
        placement: a.placement,
        streams: a.streams,
        seed,
        align,
        count: a.count,
        duration: a.duration,
    };
    if let Err(e) = plan.validate() {
        return Err(exit::ExitCode(exit::ERROR, e).into());
    }
    let ram = safety::ram_warning(target);
    if let Some(w) = &ram {
        eprintln!("plugpull write: WARNING: {w}");
    }
    let device = tp.identity();
    let descriptor = run_descriptor(&plan, device.clone(), a.flush, !a.no_direct);
    let sender = AckSender::connect(
        &a.witness,
        &descriptor,
        ClientOptions {
            key: crate::wire::auth::load_key(a.key_file.as_deref())?,
            ..ClientOptions::default()
        },
    )?;
    let (dev, created) = tp
        .prepare(
            OpenOptions {
                direct: !a.no_direct,
                flush: a.flush,
            },
            &STOP,
        )
        .with_context(|| format!("preparing {}", target.display()))?;
    if STOP.load(Ordering::SeqCst) {
        drop(created);
        bail!(
            "interrupted before the first record; nothing was written to {}",
            target.display()
        );
    }
    if let Some(f) = created {
        f.keep();
    }
    if !a.quiet {
        eprintln!(
            "plugpull write: run {run} -> {} ({}), region {} at offset {}, {} stream(s), flush {}, {}, seed {seed}",
            target.display(),
            describe(&device),
            crate::units::fmt_bytes(region_bytes),
            a.offset,
            a.streams,
            a.flush.name(),
            if a.no_direct { "buffered" } else { "O_DIRECT" },
        );
        if a.flush == crate::device::FlushMethod::None {
            eprintln!(
                "plugpull write: --flush none is a control run: records are acknowledged without a flush and a cut is expected to lose some"
            );
        }
    }
    install_stop_handler();
    let progress = Progress::default();
    let t0 = Instant::now();
    let status = (!a.quiet).then(status::StatusLine::start);
    std::thread::scope(|s| {
        if let Some(st) = &status {
            s.spawn(|| st.run(&progress, &sender, t0));
        }
        run_streams(&dev, &plan, &sender, &STOP, &progress);
        if let Some(st) = &status {
            st.stop();
        }
    });
    let elapsed = t0.elapsed();
    let failure = progress.failure();
    let interrupted = STOP.load(Ordering::SeqCst);
    let stats = sender.finish(Duration::from_secs(30))?;
    let acked = progress.records_acked.load(Ordering::Relaxed);
    let h = &progress.flush_latency;
    let summary = WriteSummary {
        format: "plugpull-write/1",
        run_id: run.hex(),
        target: target.display().to_string(),
        stopped_because: if failure.is_some() {
            "target failed".into()
        } else if interrupted {
            "interrupted".into()
        } else {
            "limit reached".into()
        },
        records_acked: acked,
        bytes_acked: progress.bytes_acked.load(Ordering::Relaxed),
        witness_durable: stats.durable,
        seconds: elapsed.as_secs_f64(),
        records_per_s: acked as f64 / elapsed.as_secs_f64().max(1e-9),
        flush_latency_us_p50: h.quantile_ns(0.5) as f64 / 1e3,
        flush_latency_us_p99: h.quantile_ns(0.99) as f64 / 1e3,
        flush_latency_us_max: h.max_ns() as f64 / 1e3,
        last_acked: progress.last_ack().map(|k| AckedRecord {
            stream: k.record.stream,
            seq: k.record.seq,
            offset: k.record.offset,
            len_bytes: k.record.len_bytes(),
            flushed_ns: k.flushed_ns,
        }),
        failure: failure.as_ref().map(|f| {
            format!(
                "{} of stream {} seq {} at offset {} failed: {}",
                f.during, f.record.stream, f.record.seq, f.record.offset, f.error
            )
        }),
        seed,
        ram_warning: ram.clone(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else if !a.quiet {
        eprintln!(
            "plugpull write: {} records acked ({}) in {:.1} s, {:.0} records/s, flush p50 {:.0} µs p99 {:.0} µs; witness holds {} durable",
            acked,
            crate::units::fmt_bytes(summary.bytes_acked),
            summary.seconds,
            summary.records_per_s,
            summary.flush_latency_us_p50,
            summary.flush_latency_us_p99,
            stats.durable
        );
    }
    if let Some(w) = &ram {
        eprintln!("plugpull write: WARNING: {w}");
    }
    if stats.durable < acked {
        eprintln!(
            "plugpull write: warning: the witness confirmed only {} of {} acks as durable ({}); verify judges only what the witness holds",
            stats.durable,
            acked,
            stats.last_error.as_deref().unwrap_or("witness unreachable")
        );
    }
    if let Some(f) = failure {
        let last = summary
            .last_acked
            .as_ref()
            .map(|l| {
                format!(
                    "stream {} seq {} at offset {} ({} ns)",
                    l.stream, l.seq, l.offset, l.flushed_ns
                )
            })
            .unwrap_or_else(|| "none".into());
        eprintln!(
            "plugpull write: the target failed: {} of stream {} seq {} returned \"{}\". If you cut the power, this is expected. Nothing more was acknowledged. Last acknowledged record: {last}. Next: restore power and run `plugpull verify {} --witness {}`",
            f.during,
            f.record.stream,
            f.record.seq,
            f.error,
            target.display(),
            a.witness
        );
        return Ok(exit::TARGET_FAILED);
    }
    Ok(exit::PASS)
}

/// The run descriptor the witness keeps for `plan` on `device`.
pub fn run_descriptor(
    plan: &Plan,
    device: identity::DeviceIdentity,
    flush: crate::device::FlushMethod,
    direct: bool,
) -> RunDescriptor {
    RunDescriptor {
        run_id: plan.run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_at: chrono::Utc::now().to_rfc3339(),
        device,
        settings: WriterSettings {
            region_offset: plan.region_offset,
            region_bytes: plan.region_bytes,
            record_bytes_min: plan.record_min,
            record_bytes_max: plan.record_max,
            placement: match plan.placement {
                Placement::Sequential => "sequential".into(),
                Placement::Random => "random".into(),
            },
            streams: plan.streams,
            flush,
            direct,
            seed: plan.seed,
        },
        command: std::env::args().collect(),
    }
}

fn describe(d: &identity::DeviceIdentity) -> String {
    let mut p = vec![d.kind.clone()];
    if let Some(disk) = &d.disk {
        p.push(format!("on {disk}"));
    }
    if let Some(m) = &d.model {
        p.push(m.clone());
    }
    if let Some(w) = &d.write_cache {
        p.push(format!("write cache: {w}"));
    }
    p.join(", ")
}
