//! `plugpull write`: stream records to the target, flush, acknowledge to the witness.
//!
//! Setup order matters: refuse unsafe targets before touching anything; make a file
//! target's allocation durable before the first ack; reach the witness before the first
//! write, so a run never writes without someone keeping its promises.

pub mod engine;
mod pipe;
pub mod plan;
mod status;

use crate::ack::client::{AckSender, ClientOptions};
use crate::ack::{Ack, RunDescriptor, WriterSettings};
use crate::cli::{Placement, WriteArgs};
use crate::device::{
    Device, FileDevice, OpenOptions, identity, is_block_device, prepare_file, safety,
};
use crate::exit;
use crate::record::{FORMAT_VERSION, RunId};
use anyhow::{Context, Result, bail};
use engine::{AckSink, Progress, run_streams};
use plan::Plan;
use serde::Serialize;
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

/// Everything before the first write, for every caller that writes a run (write, the
/// campaign agent): refuse an unsafe target, create or grow a file target and make its
/// allocation durable, open it, and check the region fits. Returns the device and the
/// region's size (default: the rest of a block device, an existing file's size past
/// `offset`, or 1 GiB for a new file).
pub fn open_target(
    target: &std::path::Path,
    destroy: Option<&std::path::Path>,
    offset: u64,
    size: Option<u64>,
    opts: OpenOptions,
) -> Result<(FileDevice, u64)> {
    let is_block = is_block_device(target);
    safety::check_write_target(target, destroy, offset)?;
    let region_bytes = if is_block {
        let dev_size = FileDevice::open_read(target)?.size_bytes();
        match size {
            Some(s) => s,
            None => dev_size
                .checked_sub(offset)
                .context("--offset is past the end of the device")?,
        }
    } else {
        let existing = std::fs::metadata(target).map(|m| m.len()).unwrap_or(0);
        size.unwrap_or(if existing > offset {
            existing - offset
        } else {
            DEFAULT_FILE_REGION
        })
    };
    if !is_block {
        prepare_file(target, offset + region_bytes)?;
    }
    let dev = FileDevice::open_write(target, opts)?;
    if offset + region_bytes > dev.size_bytes() {
        bail!(
            "the region ({} bytes at offset {}) does not fit on {} ({} bytes): use a smaller --size",
            region_bytes,
            offset,
            target.display(),
            dev.size_bytes()
        );
    }
    Ok((dev, region_bytes))
}

pub fn run(a: WriteArgs) -> Result<i32> {
    let target = &a.target;
    let (dev, region_bytes) = open_target(
        target,
        a.destroy_data_on.as_deref(),
        a.offset,
        a.size,
        OpenOptions {
            direct: !a.no_direct,
            flush: a.flush,
        },
    )?;
    let seed = a.seed.unwrap_or_else(crate::rng::random_seed);
    let run = RunId::random();
    let align = if a.no_direct {
        512
    } else {
        (dev.logical_block_bytes() as u64).max(512)
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
    let device = identity::identify(target);
    let descriptor = run_descriptor(&plan, device.clone(), a.flush, !a.no_direct);
    let sender = AckSender::connect(
        &a.witness,
        &descriptor,
        ClientOptions {
            key: crate::ack::auth::load_key(a.key_file.as_deref())?,
            ..ClientOptions::default()
        },
    )?;
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
