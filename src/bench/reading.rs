//! The reading: what the numbers say in plain words, next to the device's identity and
//! cache state. Latency cannot prove a drive honest (a fast flush is either power-loss
//! protection or a lie), so every reading ends by naming the power-cut test that can.

use super::measure::Status;
use super::methods::MethodRow;
use super::sweep::SweepRow;
use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use crate::units::fmt_duration_us;
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
    let floor_us = flush_floor_us(sweep_flush, sweep, methods);
    let flushes_per_s = floor_us.filter(|&u| u > 0.0).map(|u| 1e6 / u);
    let notes = notes(id, methods);
    let (class, summary) = match first_failure(sweep, methods) {
        Some((status, err)) => failed(status, err),
        None => judge_floor(id, floor_us),
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

/// The floor: the median of the sweep's p50s up to 64 KiB (where the flush dominates,
/// so one noisy row does not decide), when the sweep flushed; else fdatasync's row.
fn flush_floor_us(
    sweep_flush: FlushMethod,
    sweep: &[SweepRow],
    methods: &[MethodRow],
) -> Option<f64> {
    let mut small: Vec<f64> = sweep
        .iter()
        .filter(|r| sweep_flush != FlushMethod::None && r.ios > 0)
        .filter(|r| r.size_bytes <= FLOOR_MAX_BYTES || r.size_bytes == sweep[0].size_bytes)
        .map(|r| r.latency.latency_us_p50)
        .collect();
    small.sort_by(f64::total_cmp);
    let sweep_floor = (!small.is_empty()).then(|| small[(small.len() - 1) / 2]);
    let method_floor = methods
        .iter()
        .find(|m| m.method == FlushMethod::Fdatasync && m.ops > 0);
    sweep_floor.or(method_floor.map(|m| m.latency_us_p50))
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
                "An 8 KiB write with fdatasync takes {:.0} µs against {:.0} µs for the write alone ({:.1}x).",
                f.latency_us_p50,
                r.latency_us_p50,
                f.latency_us_p50 / r.latency_us_p50
            ));
        }
    }
    if let Some(d) = &id.disk {
        if d.starts_with("vd") || d.starts_with("xvd") {
            notes.push(format!(
                "{d} is a virtual disk: its flushes end in the host's storage stack, so this is the host's fingerprint, and a power-cut test must cut the host."
            ));
        }
        if d.starts_with("loop") {
            notes.push(format!(
                "{d} is a loop device{}: flushes go to the file system holding its backing file.",
                id.loop_backing_file
                    .as_ref()
                    .map(|b| format!(" over {b}"))
                    .unwrap_or_default()
            ));
        }
    } else if id.kind == "file" {
        notes.push(
            "No block device was found under this file (tmpfs, overlay or a network file system?): the figures describe that layer, not a drive."
                .to_string(),
        );
    }
    notes.extend(media_kind_note(id));
    notes
}

/// Where the media kind came from. Why a note of its own: plugpull does not know whether
/// a disk spins; it has only the kernel's `queue/rotational` flag, which many USB bridges,
/// loop devices and virtio disks set whatever the media is, so every reading that leans
/// on it must say so rather than state "SSD" or "HDD" as fact.
fn media_kind_note(id: &DeviceIdentity) -> Option<String> {
    let flag = u8::from(id.rotational?);
    let disk = id.disk.as_deref().unwrap_or("this disk");
    Some(format!(
        "Media kind: the kernel reports rotational={flag} for {disk} (/sys/block/{disk}/queue/rotational); plugpull cannot confirm it, and USB bridges, loop devices and virtual disks often report it whatever the media is."
    ))
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

/// The reading of a flush floor of `floor_us` (if one was measured) on device `id`.
fn judge_floor(id: &DeviceIdentity, floor_us: Option<f64>) -> (ReadingClass, String) {
    if id.write_cache.as_deref() == Some("write through") {
        return (
            ReadingClass::WriteThrough,
            "The kernel treats this drive's cache as write-through, so fsync and fdatasync send no flush command to it: these times are writes alone. That is right only if the drive has no volatile cache or has power-loss protection (USB bridges often report write-through wrongly); only a power-cut test can tell.".to_string(),
        );
    }
    let Some(u) = floor_us else {
        return (
            ReadingClass::NoFlushMeasured,
            "No flush was measured (no sweep with a flush and no fdatasync row: --flush none or --only), so there is no flush latency to read.".to_string(),
        );
    };
    let rate = 1e6 / u;
    if id.rotational == Some(true) {
        rotating(rate, u)
    } else {
        not_rotating(rate, u)
    }
}

/// The reading of a disk the kernel does not call rotational (or says nothing about).
fn not_rotating(rate: f64, u: f64) -> (ReadingClass, String) {
    if u < FAST_FLUSH_US {
        (
            ReadingClass::FastFlush,
            format!(
                "A write+flush takes {} ({rate:.0}/s): that fast, either the drive has power-loss protection or its cache ignores flushes. Latency cannot tell these apart; only a power-cut test can, and it is urgent before trusting this drive with a database or a ZFS log.",
                fmt_duration_us(u)
            ),
        )
    } else {
        (
            ReadingClass::FlushFloor,
            format!(
                "A write+flush takes {} ({rate:.0}/s), a floor of hundreds of µs to ms: the signature of flushes that reach non-volatile media, as on an SSD without power-loss protection or a spinning disk. Consistent with an honest drive, but not proof: a power-cut test can confirm it.",
                fmt_duration_us(u)
            ),
        )
    }
}

/// A spinning disk commits at most about one flush per revolution. Read only when the
/// kernel reports the disk rotational, and worded as what follows if that flag is right:
/// it is often wrong (see [`media_kind_note`]).
fn rotating(rate: f64, u: f64) -> (ReadingClass, String) {
    const IF_FLAG_WRONG: &str = "If the flag is wrong (flash behind a USB bridge, a loop or virtual disk), the rpm/60 rule does not apply";
    if rate > ROTATING_MAX_FLUSHES_PER_S {
        (
            ReadingClass::RotatingTooFast,
            format!(
                "The kernel reports this disk as rotational. If it does spin, it cannot honestly commit more than about rpm/60 flushes per second (120/s at 7,200 rpm, 250/s at 15,000 rpm); it does {rate:.0}/s ({}), so a cache is answering: a battery-backed controller, or a drive that ignores flushes. {IF_FLAG_WRONG}. Only a power-cut test can tell which.",
                fmt_duration_us(u)
            ),
        )
    } else {
        (
            ReadingClass::RotatingPlausible,
            format!(
                "The kernel reports this disk as rotational. If it does spin, {rate:.0} flushes/s ({}) is within what it can commit (about rpm/60: 120/s at 7,200 rpm): consistent with a disk that honours flushes, not proof of it. {IF_FLAG_WRONG}.",
                fmt_duration_us(u)
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::LatencySummary;

    fn row(size_bytes: u64, p50: f64) -> SweepRow {
        SweepRow {
            size_bytes,
            ios: 10,
            elapsed_s: 1.0,
            latency: LatencySummary {
                latency_us_p50: p50,
                ..Default::default()
            },
            ios_per_s: 1e6 / p50,
            throughput_mb_per_s: 0.0,
            status: Status::Ok,
            error: None,
        }
    }

    #[test]
    fn one_noisy_row_does_not_decide_the_floor() {
        let id = DeviceIdentity {
            rotational: Some(false),
            ..Default::default()
        };
        // A 30 µs blip at 512 B among ~2 ms rows; 8 MiB rows are bandwidth, not floor.
        let sweep = vec![
            row(512, 30.0),
            row(1024, 2000.0),
            row(2048, 2100.0),
            row(4096, 1900.0),
            row(8 << 20, 90_000.0),
        ];
        let r = read(&id, FlushMethod::Fdatasync, &sweep, &[], "/dev/x", false);
        assert_eq!(r.class, ReadingClass::FlushFloor);
        assert_eq!(r.flush_latency_us_p50, Some(1900.0));
        // The same rows without a flush in the sweep: nothing to read.
        let r = read(&id, FlushMethod::None, &sweep, &[], "/dev/x", false);
        assert_eq!(r.class, ReadingClass::NoFlushMeasured);
    }

    #[test]
    fn directory_targets_get_a_file_in_the_commands() {
        let r = read(
            &DeviceIdentity::default(),
            FlushMethod::Fdatasync,
            &[row(512, 20.0)],
            &[],
            "/mnt/x/",
            true,
        );
        assert_eq!(r.class, ReadingClass::FastFlush);
        assert!(
            r.power_cut_test
                .iter()
                .any(|c| c == "plugpull write /mnt/x/plugpull.img --witness HOST:7420")
        );
    }

    /// The media kind is the kernel's flag, said as such: never "this is an SSD" or "a
    /// rotating disk does ..." as if plugpull knew.
    #[test]
    fn the_media_kind_is_reported_as_the_kernels_flag() {
        let spinning = DeviceIdentity {
            disk: Some("sdb".into()),
            rotational: Some(true),
            ..Default::default()
        };
        let r = read(
            &spinning,
            FlushMethod::Fdatasync,
            &[row(4096, 20.0)],
            &[],
            "/dev/sdb",
            false,
        );
        assert_eq!(r.class, ReadingClass::RotatingTooFast);
        assert!(
            r.summary
                .starts_with("The kernel reports this disk as rotational. If it does spin,"),
            "{}",
            r.summary
        );
        assert!(r.summary.contains("If the flag is wrong"), "{}", r.summary);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("rotational=1 for sdb (/sys/block/sdb/queue/rotational)")),
            "{:?}",
            r.notes
        );
        let r = read(
            &spinning,
            FlushMethod::Fdatasync,
            &[row(4096, 10_000.0)],
            &[],
            "/dev/sdb",
            false,
        );
        assert_eq!(r.class, ReadingClass::RotatingPlausible);
        assert!(r.summary.contains("If it does spin"), "{}", r.summary);
        let flash = DeviceIdentity {
            disk: Some("nvme0n1".into()),
            rotational: Some(false),
            ..Default::default()
        };
        let r = read(
            &flash,
            FlushMethod::Fdatasync,
            &[row(4096, 2000.0)],
            &[],
            "/dev/nvme0n1",
            false,
        );
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("rotational=0 for nvme0n1") && n.contains("cannot confirm")),
            "{:?}",
            r.notes
        );
        // No flag, no claim about it.
        let r = read(
            &DeviceIdentity::default(),
            FlushMethod::Fdatasync,
            &[row(4096, 2000.0)],
            &[],
            "/dev/x",
            false,
        );
        assert!(
            !r.notes.iter().any(|n| n.contains("rotational")),
            "{:?}",
            r.notes
        );
    }
}
