//! What the kernel is using: mounts, swap, the system's own file systems, holders and
//! loop devices, read from /proc and /sys. Why over the whole stack of related devices:
//! a partition, a loop device or a holder shares the target's bytes, so using any of
//! them makes the target unsafe to overwrite.

use super::super::stack::{self, Node, Via};
use super::hazard::Hazard;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};

/// `/dev/NAME (size)` of every block device with a medium, from /sys/block.
pub fn block_devices() -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir("/sys/block")
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| {
                    let sectors: u64 = fs::read_to_string(e.path().join("size"))
                        .ok()?
                        .trim()
                        .parse()
                        .ok()?;
                    (sectors > 0).then(|| {
                        format!(
                            "/dev/{} ({})",
                            e.file_name().to_string_lossy(),
                            crate::units::fmt_bytes(sectors * 512)
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    if out.is_empty() {
        out.push("none found in /sys/block".into());
    }
    out
}

/// Hazards of the kernel using the target's bytes: everything that shares them
/// ([`stack::related`]) that is mounted, swap, the root or boot file system, a holder, or
/// a loop device.
pub(super) fn in_use(target: Node) -> Vec<Hazard> {
    let related = stack::related(target);
    let mounts = mounts();
    let swaps = swaps();
    const SYSTEM: [&str; 3] = ["/", "/boot", "/boot/efi"];
    let system: Vec<(u64, &str)> = SYSTEM
        .into_iter()
        .filter_map(|m| Some((fs::metadata(m).ok()?.dev(), m)))
        .chain(mounts.iter().filter_map(|(d, at)| {
            let m = SYSTEM.into_iter().find(|m| m == at)?;
            Some((*d, m))
        }))
        .collect();
    let mut found = vec![];
    for r in &related {
        match r.via {
            Via::Holder => found.push(Hazard::Held(r.name.clone())),
            Via::Loop => found.push(Hazard::LoopBacked(r.name.clone())),
            Via::Unknown => found.push(Hazard::LoopUnknown(r.name.clone())),
            Via::Target | Via::Below | Via::Partition => {}
        }
        let Node::Block(dev) = r.node else { continue };
        for (d, at) in &mounts {
            if *d == dev {
                found.push(Hazard::Mounted {
                    device: r.name.clone(),
                    at: at.clone(),
                });
            }
        }
        for (d, name) in &swaps {
            if *d == dev {
                found.push(Hazard::Swap(name.clone()));
            }
        }
        for (d, m) in &system {
            if *d == dev {
                found.push(Hazard::RootOrBoot(m.to_string()));
            }
        }
    }
    found.dedup();
    found
}

/// (device number, mount point) of every mount, from /proc/self/mountinfo: once with the
/// device number the mount reports and once with that of its source device, since some
/// file systems (btrfs) report an anonymous number.
fn mounts() -> Vec<(u64, String)> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = vec![];
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        let (Some(majmin), Some(at)) = (f.get(2), f.get(4)) else {
            continue;
        };
        let at = at.to_string();
        if let Some(d) = stack::parse_majmin(majmin) {
            out.push((d, at.clone()));
        }
        let source = f
            .iter()
            .position(|x| *x == "-")
            .and_then(|i| f.get(i + 2))
            .and_then(|s| fs::metadata(s).ok())
            .filter(|m| m.file_type().is_block_device());
        if let Some(m) = source {
            out.push((m.rdev(), at));
        }
    }
    out
}

fn swaps() -> Vec<(u64, String)> {
    let text = fs::read_to_string("/proc/swaps").unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let name = l.split_whitespace().next()?;
            let m = fs::metadata(name).ok()?;
            m.file_type()
                .is_block_device()
                .then(|| (m.rdev(), name.to_string()))
        })
        .collect()
}
