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
pub enum Behind {
    /// A loop device: a file on another file system.
    Loop,
    /// A disk a hypervisor emulates; the words say what gave it away.
    Virtual(String),
    /// Nothing says it is not a real disk.
    Disk,
}

/// Vendor and model words of emulated disks: QEMU ("QEMU HARDDISK", "QEMU NVMe Ctrl"),
/// VMware ("VMware Virtual S"), Hyper-V ("Msft", "Virtual Disk"), VirtualBox ("VBOX
/// HARDDISK"); 0x1af4 is virtio's PCI vendor, which virtio disks show as their vendor.
const VIRTUAL_WORDS: [&str; 7] = [
    "qemu", "vmware", "msft", "hyper-v", "virtual", "vbox", "0x1af4",
];

pub fn behind(id: &DeviceIdentity) -> Behind {
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
    for (what, v) in [("vendor", &id.vendor), ("model", &id.model)] {
        if let Some(v) = v {
            let lower = v.to_lowercase();
            if VIRTUAL_WORDS.iter().any(|w| lower.contains(w)) {
                return Behind::Virtual(format!("its {what} is \"{v}\""));
            }
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
        // No flag: the reading says it cannot tell, and claims nothing about spinning.
        let r = read(
            &DeviceIdentity::default(),
            FlushMethod::Fdatasync,
            &[row(4096, 2000.0)],
            &[],
            "/dev/x",
            false,
        );
        assert_eq!(r.class, ReadingClass::FlushFloor);
        assert!(
            r.notes.contains(
                &"Media kind: plugpull cannot tell; the kernel gives no rotational flag for this target."
                    .to_string()
            ),
            "{:?}",
            r.notes
        );
    }

    fn flagged_rotational(disk: &str, vendor: Option<&str>, model: Option<&str>) -> DeviceIdentity {
        DeviceIdentity {
            kind: "block".into(),
            disk: Some(disk.into()),
            vendor: vendor.map(Into::into),
            model: model.map(Into::into),
            rotational: Some(true),
            write_cache: Some("write back".into()),
            ..Default::default()
        }
    }

    /// rotational=1 on a loop device or an emulated disk describes the emulation: the
    /// reading does not apply the rpm rule, says what the device is and that it cannot
    /// tell the media.
    #[test]
    fn a_loop_or_virtual_disk_flagged_rotational_gets_no_spinning_disk_reading() {
        let cases = [
            (
                flagged_rotational("vda", Some("0x1af4"), None),
                "vda is a virtual disk (virtio, by its vd* name)",
            ),
            (
                flagged_rotational("xvda", None, None),
                "xvda is a virtual disk (Xen, by its xvd* name)",
            ),
            (
                flagged_rotational("sda", Some("ATA"), Some("QEMU HARDDISK")),
                "sda is a virtual disk (its model is \"QEMU HARDDISK\")",
            ),
            (
                flagged_rotational("sdb", Some("VMware"), Some("Virtual disk")),
                "sdb is a virtual disk (its vendor is \"VMware\")",
            ),
            (
                flagged_rotational("sdc", Some("Msft"), Some("Virtual Disk")),
                "sdc is a virtual disk (its vendor is \"Msft\")",
            ),
            (
                flagged_rotational("loop3", None, None),
                "loop3 is a loop device",
            ),
        ];
        for (id, says) in cases {
            let disk = id.disk.clone().unwrap();
            // 263 µs a flush: 3,802/s, far past any spinning disk's rpm/60.
            let r = read(
                &id,
                FlushMethod::Fdatasync,
                &[row(4096, 263.0)],
                &[],
                "/dev/x",
                false,
            );
            assert_eq!(r.class, ReadingClass::FlushFloor, "{disk}");
            let all = format!("{} {}", r.summary, r.notes.join(" "));
            assert!(!all.contains("rpm"), "{disk}: {all}");
            assert!(!all.contains("spin,"), "{disk}: {all}");
            assert!(all.contains(says), "{disk}: {says} in {all}");
            let media = r
                .notes
                .iter()
                .find(|n| n.starts_with("Media kind: "))
                .unwrap_or_else(|| panic!("{disk}: a media kind note in {:?}", r.notes));
            assert!(
                media.starts_with(&format!("Media kind: plugpull cannot tell. {disk} is a ")),
                "{media}"
            );
            assert!(
                media.contains("rotational=1 describes the emulated device"),
                "{media}"
            );
        }
        // A disk with nothing emulated about it still gets the rpm rule.
        let real = flagged_rotational("sda", Some("ATA"), Some("ST4000DM004-2CV1"));
        assert_eq!(behind(&real), Behind::Disk);
        let r = read(
            &real,
            FlushMethod::Fdatasync,
            &[row(4096, 263.0)],
            &[],
            "/dev/sda",
            false,
        );
        assert_eq!(r.class, ReadingClass::RotatingTooFast);
    }

    /// The latency the summary quotes is a cell of the printed tables, named by its row.
    #[test]
    fn the_quoted_floor_is_a_figure_of_the_tables() {
        let id = DeviceIdentity::default();
        let sweep = [row(512, 271.4), row(4096, 263.2), row(16 << 10, 1840.0)];
        let r = read(&id, FlushMethod::Fdatasync, &sweep, &[], "/dev/x", false);
        assert!(
            r.summary.starts_with(
                "A write+flush takes 271 µs (the sweep's p50 at 512 B, the median of its rows up to 64.0 KiB), 3,685 flushes/s"
            ),
            "{}",
            r.summary
        );
        let table = crate::bench::output::table(
            &["size", "p50"],
            &sweep
                .iter()
                .map(|x| vec![fmt_bytes(x.size_bytes), figure(x.latency.latency_us_p50)])
                .collect::<Vec<_>>(),
        );
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().eq(["512", "B", "271"])),
            "{table}"
        );
        // Without a flushing sweep, fdatasync's method row is the floor.
        let methods = [MethodRow {
            method: FlushMethod::Fdatasync,
            write_bytes: 8192,
            ops: 10,
            elapsed_s: 0.012,
            ops_per_s: 810.0,
            latency_us_per_op: 1234.0,
            latency_us_p50: 1234.0,
            latency_us_p99: 1300.0,
            status: Status::Ok,
            error: None,
        }];
        let r = read(&id, FlushMethod::None, &[], &methods, "/dev/x", false);
        assert!(
            r.summary.starts_with(
                "A write+flush takes 1,234 µs (1.2 ms; fdatasync's p50 in the flush methods table), 810 flushes/s"
            ),
            "{}",
            r.summary
        );
    }
}
