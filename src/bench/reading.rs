//! The reading: what the numbers say in plain words, next to the device's identity and
//! cache state. Latency cannot prove a drive honest (a fast flush is either power-loss
//! protection or a lie), so every reading ends by naming the power-cut test that can.

use super::measure::Status;
use super::methods::MethodRow;
use super::sweep::SweepRow;
use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use crate::units::{fmt_bytes, fmt_duration_us, thousands};
use serde::Serialize;

/// Below this, a write+flush is faster than any drive commits to flash or platters
/// without a power-loss-protected (or ignored) cache.
pub const FAST_FLUSH_US: f64 = 100.0;
/// Sweep rows up to this size count towards the flush floor.
pub const FLOOR_MAX_BYTES: u64 = 64 << 10;
/// The most flushes per second a 15,000 rpm disk can commit (one per revolution).
pub const ROTATING_MAX_FLUSHES_PER_S: f64 = 15_000.0 / 60.0;

/// What the fingerprint looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadingClass {
    /// A flush failed or is unsupported: no flush latency to read.
    FlushFailed,
    /// A write failed (with O_DSYNC that includes its flush).
    WriteFailed,
    /// The sweep ran without flushes (`--flush none`) and no flush row is usable.
    NoFlushMeasured,
    /// The kernel believes the cache is write-through and sends no flush commands.
    WriteThrough,
    /// A spinning disk committing more flushes per second than it can turn.
    RotatingTooFast,
    /// A spinning disk at a rate it can honestly commit.
    RotatingPlausible,
    /// Tens of µs: power-loss protection, or a cache that ignores flushes.
    FastFlush,
    /// A floor of hundreds of µs to ms: flushes appear to reach non-volatile media.
    FlushFloor,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reading {
    pub class: ReadingClass,
    /// The flush floor: the median of the sweep's p50 write+flush latencies up to 64 KiB
    /// (or the fdatasync row's p50 when the sweep did not flush), if measured.
    pub flush_latency_us_p50: Option<f64>,
    /// 1e6 / that median.
    pub flushes_per_s: Option<f64>,
    /// One sentence.
    pub summary: String,
    /// Further observations (virtual disk, no block device, cost of the flush, ...).
    pub notes: Vec<String>,
    /// The plugpull commands of the power-cut test that can settle the question.
    pub power_cut_test: Vec<String>,
}

/// Reads the results. `target` is what the user gave (used in the suggested commands);
/// `is_dir` says it was a directory (the test then needs a file in it).
pub fn read(
    id: &DeviceIdentity,
    sweep_flush: FlushMethod,
    sweep: &[SweepRow],
    methods: &[MethodRow],
    target: &str,
    is_dir: bool,
) -> Reading {
    let floor = flush_floor(sweep_flush, sweep, methods);
    let floor_us = floor.as_ref().map(|f| f.us);
    let flushes_per_s = floor_us.filter(|&u| u > 0.0).map(|u| 1e6 / u);
    let notes = notes(id, methods);
    let (class, summary) = match first_failure(sweep, methods) {
        Some((status, err)) => failed(status, err),
        None => judge_floor(id, floor.as_ref()),
    };
    Reading {
        class,
        flush_latency_us_p50: floor_us,
        flushes_per_s,
        summary,
        notes,
        power_cut_test: power_cut_test(target, is_dir),
    }
}

/// The plugpull commands of the power-cut test that can settle the question.
fn power_cut_test(target: &str, is_dir: bool) -> Vec<String> {
    let power_target = if is_dir {
        format!("{}/plugpull.img", target.trim_end_matches('/'))
    } else {
        target.to_string()
    };
    vec![
        "plugpull listen   # on a witness machine that keeps power".to_string(),
        format!("plugpull write {power_target} --witness HOST:7420"),
        "# cut the power of the machine (or drive) under test while it writes, power it up"
            .to_string(),
        format!("plugpull verify {power_target} --witness HOST:7420"),
    ]
}

/// The flush floor and the table cell it was read from: the summary quotes it so that a
/// reader finds the same figure in the tables above it.
struct Floor {
    us: f64,
    /// "the sweep's p50 at 4.0 KiB", "fdatasync's p50 in the flush methods table".
    from: String,
}

impl Floor {
    /// "263 µs (the sweep's p50 at 4.0 KiB), 3,802 flushes/s": the latency as the tables
    /// print it (in µs), with its place; from a millisecond up, also in ms, the unit
    /// people read flushes of that size in.
    fn quoted(&self) -> String {
        let ms = if self.us >= 999.5 {
            format!("{}; ", fmt_duration_us(self.us))
        } else {
            String::new()
        };
        format!(
            "{} µs ({ms}{}), {} flushes/s",
            figure(self.us),
            self.from,
            rate(1e6 / self.us)
        )
    }
}

/// A figure as the tables print it (three significant digits, separators past 999).
pub fn figure(v: f64) -> String {
    if v >= 999.5 {
        thousands(v.round() as u64)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn rate(per_s: f64) -> String {
    thousands(per_s.round() as u64)
}

/// The floor: the median of the sweep's p50s up to 64 KiB (where the flush dominates,
/// so one noisy row does not decide), when the sweep flushed; else fdatasync's row.
fn flush_floor(
    sweep_flush: FlushMethod,
    sweep: &[SweepRow],
    methods: &[MethodRow],
) -> Option<Floor> {
    let mut small: Vec<&SweepRow> = sweep
        .iter()
        .filter(|r| sweep_flush != FlushMethod::None && r.ios > 0)
        .filter(|r| r.size_bytes <= FLOOR_MAX_BYTES || r.size_bytes == sweep[0].size_bytes)
        .collect();
    small.sort_by(|a, b| {
        a.latency
            .latency_us_p50
            .total_cmp(&b.latency.latency_us_p50)
    });
    // The lower median is a row's own figure, so the summary can name that row.
    let sweep_floor = (!small.is_empty()).then(|| {
        let r = small[(small.len() - 1) / 2];
        Floor {
            us: r.latency.latency_us_p50,
            from: if small.len() > 1 {
                format!(
                    "the sweep's p50 at {}, the median of its rows up to {}",
                    fmt_bytes(r.size_bytes),
                    fmt_bytes(FLOOR_MAX_BYTES)
                )
            } else {
                format!("the sweep's p50 at {}", fmt_bytes(r.size_bytes))
            },
        }
    });
    sweep_floor.or_else(|| {
        methods
            .iter()
            .find(|m| m.method == FlushMethod::Fdatasync && m.ops > 0)
            .map(|m| Floor {
                us: m.latency_us_p50,
                from: "fdatasync's p50 in the flush methods table".into(),
            })
    })
}

/// What the flushes reach, as far as plugpull can tell from the kernel's names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Behind {
    /// A loop device: a file on another file system.
    Loop,
    /// A disk a hypervisor emulates; the words say what gave it away.
    Virtual(String),
    /// Nothing says it is not a real disk.
    Disk,
}

/// Model words of emulated disks (sysfs `device/model`): QEMU ("QEMU HARDDISK", "QEMU
/// NVMe Ctrl"), VMware ("VMware Virtual S", "Virtual disk"), Hyper-V ("Virtual Disk"),
/// VirtualBox ("VBOX HARDDISK"). A virtio disk has no model; its vd* name tells.
const VIRTUAL_WORDS: [&str; 4] = ["qemu", "vmware", "virtual", "vbox"];

fn behind(id: &DeviceIdentity) -> Behind {
    let disk = id.disk.as_deref().unwrap_or("");
    if disk.starts_with("loop") {
        return Behind::Loop;
    }
    if disk.starts_with("vd") {
        return Behind::Virtual("virtio, by its vd* name".into());
    }
    if disk.starts_with("xvd") {
        return Behind::Virtual("Xen, by its xvd* name".into());
    }
    if let Some(model) = &id.model {
        let lower = model.to_lowercase();
        if VIRTUAL_WORDS.iter().any(|w| lower.contains(w)) {
            return Behind::Virtual(format!("its model is \"{model}\""));
        }
    }
    Behind::Disk
}

/// Further observations: the cost of the flush, virtual and loop disks, no block device.
fn notes(id: &DeviceIdentity, methods: &[MethodRow]) -> Vec<String> {
    let mut notes = vec![];
    if let (Some(f), Some(r)) = (
        methods
            .iter()
            .find(|m| m.method == FlushMethod::Fdatasync && m.status.is_ok()),
        methods
            .iter()
            .find(|m| m.method == FlushMethod::None && m.status.is_ok()),
    ) {
        if r.latency_us_p50 > 0.0 {
            notes.push(format!(
                "An 8 KiB write with fdatasync takes {} µs (p50) against {} µs for the write alone ({:.1}x).",
                figure(f.latency_us_p50),
                figure(r.latency_us_p50),
                f.latency_us_p50 / r.latency_us_p50
            ));
        }
    }
    match (behind(id), &id.disk) {
        (Behind::Virtual(why), Some(d)) => notes.push(format!(
            "{d} is a virtual disk ({why}): its flushes end in the host's storage stack, so this is the host's fingerprint, and a power-cut test must cut the host."
        )),
        (Behind::Loop, Some(d)) => notes.push(format!(
            "{d} is a loop device{}: flushes go to the file system holding its backing file.",
            id.loop_backing_file
                .as_ref()
                .map(|b| format!(" over {b}"))
                .unwrap_or_default()
        )),
        (_, None) if id.kind == "file" => notes.push(
            "No block device was found under this file (tmpfs, overlay or a network file system?): the figures describe that layer, not a drive."
                .to_string(),
        ),
        _ => {}
    }
    notes.push(media_kind_note(id));
    notes
}

/// Where the media kind came from. Why a note of its own: plugpull does not know whether
/// a disk spins; it has only the kernel's `queue/rotational` flag, which many USB bridges,
/// loop devices and virtio disks set whatever the media is, so every reading that leans
/// on it must say so rather than state "SSD" or "HDD" as fact, and say when it cannot tell.
fn media_kind_note(id: &DeviceIdentity) -> String {
    let disk = id.disk.as_deref().unwrap_or("this target");
    let Some(rotational) = id.rotational else {
        return format!(
            "Media kind: plugpull cannot tell; the kernel gives no rotational flag for {disk}."
        );
    };
    let flag = u8::from(rotational);
    let what = match behind(id) {
        Behind::Disk => {
            return format!(
                "Media kind: the kernel reports rotational={flag} for {disk} (/sys/block/{disk}/queue/rotational); plugpull cannot confirm it, and USB bridges, loop devices and virtual disks often report it whatever the media is."
            );
        }
        Behind::Loop => "a loop device".to_string(),
        Behind::Virtual(why) => format!("a virtual disk ({why})"),
    };
    format!(
        "Media kind: plugpull cannot tell. {disk} is {what}, so the kernel's rotational={flag} describes the emulated device, not the media under it, which may be flash or spinning disk."
    )
}

/// The first sweep row or flushing method row that failed, with its error.
fn first_failure<'a>(
    sweep: &'a [SweepRow],
    methods: &'a [MethodRow],
) -> Option<(Status, Option<&'a str>)> {
    sweep
        .iter()
        .map(|r| (r.status, r.error.as_deref()))
        .chain(
            methods
                .iter()
                .filter(|m| m.method != FlushMethod::None)
                .map(|m| (m.status, m.error.as_deref())),
        )
        .find(|(s, _)| !s.is_ok())
}

/// The reading when a write or flush failed: there is no latency to read.
fn failed(status: Status, err: Option<&str>) -> (ReadingClass, String) {
    (
        if status == Status::WriteFailed {
            ReadingClass::WriteFailed
        } else {
            ReadingClass::FlushFailed
        },
        format!(
            "A write or flush could not be done ({}: {}). Rows marked {} measured no flush; a power-cut test with that method would prove nothing until it works.",
            status.mark(),
            err.unwrap_or("no detail"),
            status.mark()
        ),
    )
}

/// The reading of a flush floor (if one was measured) on device `id`.
fn judge_floor(id: &DeviceIdentity, floor: Option<&Floor>) -> (ReadingClass, String) {
    if id.write_cache.as_deref() == Some("write through") {
        return (
            ReadingClass::WriteThrough,
            "The kernel treats this drive's cache as write-through, so fsync and fdatasync send no flush command to it: these times are writes alone. That is right only if the drive has no volatile cache or has power-loss protection (USB bridges often report write-through wrongly); only a power-cut test can tell.".to_string(),
        );
    }
    let Some(floor) = floor else {
        return (
            ReadingClass::NoFlushMeasured,
            "No flush was measured (no sweep with a flush and no fdatasync row: --flush none or --only), so there is no flush latency to read.".to_string(),
        );
    };
    let behind = behind(id);
    // A loop or virtual disk's rotational flag says nothing about the media: the rpm rule
    // is read only for what may be a real disk.
    if id.rotational == Some(true) && behind == Behind::Disk {
        rotating(floor)
    } else {
        not_rotating(floor, &behind)
    }
}

/// The reading of a disk the kernel does not call rotational (or says nothing about), or
/// of a loop or virtual disk whatever its flag.
fn not_rotating(floor: &Floor, behind: &Behind) -> (ReadingClass, String) {
    let quoted = floor.quoted();
    let (drive, media) = match behind {
        Behind::Disk => (
            "the drive has power-loss protection or its cache",
            "as on an SSD without power-loss protection or a spinning disk",
        ),
        Behind::Loop => (
            "the stack under the backing file keeps what it acknowledges or something in it",
            "here the file system and drive under the loop device's backing file",
        ),
        Behind::Virtual(_) => (
            "the host's storage has power-loss protection or something in the host's stack",
            "here somewhere in the host's stack, on media plugpull cannot see",
        ),
    };
    if floor.us < FAST_FLUSH_US {
        (
            ReadingClass::FastFlush,
            format!(
                "A write+flush takes {quoted}: that fast, either {drive} ignores flushes. Latency cannot tell these apart; only a power-cut test can, and it is urgent before trusting this drive with a database or a ZFS log."
            ),
        )
    } else {
        (
            ReadingClass::FlushFloor,
            format!(
                "A write+flush takes {quoted}, a floor of hundreds of µs to ms: the signature of flushes that reach non-volatile media ({media}). Consistent with an honest drive, but not proof: a power-cut test can confirm it."
            ),
        )
    }
}

/// A spinning disk commits at most about one flush per revolution. Read only when the
/// kernel reports the disk rotational and nothing names it a loop or virtual disk, and
/// worded as what follows if that flag is right: it is often wrong (see
/// [`media_kind_note`]).
fn rotating(floor: &Floor) -> (ReadingClass, String) {
    const IF_FLAG_WRONG: &str =
        "If the flag is wrong (flash behind a USB bridge), the rpm/60 rule does not apply";
    let quoted = floor.quoted();
    if 1e6 / floor.us > ROTATING_MAX_FLUSHES_PER_S {
        (
            ReadingClass::RotatingTooFast,
            format!(
                "The kernel reports this disk as rotational. If it does spin, it cannot honestly commit more than about rpm/60 flushes per second (120/s at 7,200 rpm, 250/s at 15,000 rpm); a write+flush takes {quoted}, so a cache is answering: a battery-backed controller, or a drive that ignores flushes. {IF_FLAG_WRONG}. Only a power-cut test can tell which."
            ),
        )
    } else {
        (
            ReadingClass::RotatingPlausible,
            format!(
                "The kernel reports this disk as rotational. If it does spin, a write+flush of {quoted} is within what it can commit (about rpm/60: 120/s at 7,200 rpm): consistent with a disk that honours flushes, not proof of it. {IF_FLAG_WRONG}."
            ),
        )
    }
}

#[cfg(test)]
mod tests;
