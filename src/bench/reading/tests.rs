//! The reading's decisions, from made-up rows and identities.

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

fn flagged_rotational(disk: &str, model: Option<&str>) -> DeviceIdentity {
    DeviceIdentity {
        kind: "block".into(),
        disk: Some(disk.into()),
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
            flagged_rotational("vda", None),
            "vda is a virtual disk (virtio, by its vd* name)",
        ),
        (
            flagged_rotational("xvda", None),
            "xvda is a virtual disk (Xen, by its xvd* name)",
        ),
        (
            flagged_rotational("sda", Some("QEMU HARDDISK")),
            "sda is a virtual disk (its model is \"QEMU HARDDISK\")",
        ),
        (
            flagged_rotational("sdb", Some("VMware Virtual S")),
            "sdb is a virtual disk (its model is \"VMware Virtual S\")",
        ),
        (
            flagged_rotational("sdc", Some("Virtual Disk")),
            "sdc is a virtual disk (its model is \"Virtual Disk\")",
        ),
        (flagged_rotational("loop3", None), "loop3 is a loop device"),
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
    let real = flagged_rotational("sda", Some("ST4000DM004-2CV1"));
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
