//! Refusals before any write. plugpull overwrites its target, so it must never touch a
//! device that holds data unless the user names that exact device for destruction with
//! `--destroy-data-on PATH`, and never a device or file the kernel is using (mounted, swap,
//! held by device-mapper/RAID, behind a loop device), even then.
//!
//! The target is opened once (`super::open`, through [`open_checked`]) and every check
//! here looks at that handle: fstat, the device number in sysfs, libblkid run on the
//! handle (`probe`), the hand-kept signature list as a second opinion (`signature`).
//!
//! Everything that shares bytes with the target is judged, not only the path given: the
//! file behind a loop device, a loop device stacked on another, partitions and holders
//! (`super::stack`). A previous plugpull target is recognised only by a whole sector that
//! checks out (a record sector at its own home with both CRCs right, or the target marker
//! of `super::marker`), never by a few magic bytes; and recognising one never switches off
//! the file-system and partition-table signature checks elsewhere on the device.

mod hazard;
mod probe;
mod ram;
mod signature;
mod system;
#[cfg(test)]
mod tests;

pub use hazard::Hazard;
pub use ram::ram_warning;
use signature::signature;
pub use signature::{is_plugpull_sector, signature_in};
pub use system::block_devices;

use super::error::DeviceError;
use super::open::{self, Flags, Opened, Target};
use super::stack::Node;
use probe::{Found, ProbeError};
use signature::{holds_plugpull, in_plugpull_sectors};
use std::fs::{self, File};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use system::in_use;

/// A refusal to write to a target, or a failure to look at it.
#[derive(Debug, thiserror::Error)]
pub enum SafetyError {
    /// Something the kernel uses (mounted, swap, held, loop-backed, the system disk) or
    /// that is not a file or block device: never overwritten, whatever the user says.
    #[error("refusing to write to {}: {hazards}. {hint}", .target.display())]
    InUse {
        target: PathBuf,
        hazards: String,
        hint: &'static str,
    },
    /// It holds data and the user did not name it with `--destroy-data-on`.
    #[error(
        "refusing to write to {}: {hazards}. plugpull overwrites its target; if you mean to destroy \
         what is there, pass --destroy-data-on {}",
        .target.display(),
        .target.display()
    )]
    HoldsData { target: PathBuf, hazards: String },
    /// A path in /dev that names no device: a mistyped device name.
    #[error(
        "{} does not exist: there is no such device (plugpull never creates files in /dev). \
         Block devices on this machine: {devices}. Check the name (`lsblk` lists them).",
        .target.display()
    )]
    NoSuchDevice { target: PathBuf, devices: String },
    /// The target could not even be looked at.
    #[error("cannot inspect {}: {error}", .target.display())]
    CannotInspect {
        target: PathBuf,
        error: std::io::Error,
    },
    /// Opening the target failed.
    #[error(transparent)]
    Open(#[from] DeviceError),
}

/// The one way a write target is opened: a mistyped /dev name refused
/// ([`check_not_missing_device`]), the name resolved and opened once with the run's
/// `flags` ([`open::open_once`]), and, if something is there, every check on that handle
/// ([`check_write_target`]). The handle returned is the one to write; a missing target
/// is created later with [`open::create_new`], which refuses whatever appeared meanwhile.
pub fn open_checked(
    given: &Path,
    flags: Flags,
    destroy: Option<&Path>,
    region_offset: u64,
) -> Result<Opened, SafetyError> {
    check_not_missing_device(given)?;
    let opened = open::open_once(given, flags)?;
    if let Opened::Existing(t) = &opened {
        // A link (a /dev/disk/by-id name) is resolved once: say what it led to.
        if fs::symlink_metadata(given).is_ok_and(|m| m.file_type().is_symlink()) {
            eprintln!(
                "plugpull: {} is {}: checking and writing that",
                given.display(),
                t.path.display()
            );
        }
        check_write_target(t, destroy, region_offset)?;
    }
    Ok(opened)
}

/// Fails with a clear message if writing to the opened target `t` could destroy data,
/// unless `destroy` names `t`'s path and the same file or device. `region_offset` is
/// where plugpull's records start. Every check looks at `t`'s handle (fstat, the device
/// number in sysfs, libblkid on the handle), never again at a name.
pub fn check_write_target(
    t: &Target,
    destroy: Option<&Path>,
    region_offset: u64,
) -> Result<(), SafetyError> {
    check_hazards(t, destroy, hazards(t, region_offset)?)
}

fn check_hazards(
    t: &Target,
    destroy: Option<&Path>,
    hazards: Vec<Hazard>,
) -> Result<(), SafetyError> {
    if hazards.is_empty() {
        return Ok(());
    }
    let target = &t.path;
    let named = destroy.is_some_and(|d| names_target(d, t));
    let list = hazards
        .iter()
        .map(|h| h.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    // Mounted file systems, loop devices' backing stores and the root disk are never
    // overwritten: the kernel would go on using them and the machine could not be
    // trusted afterwards.
    let hard = hazards.iter().any(|h| {
        matches!(
            h,
            Hazard::Mounted { .. }
                | Hazard::Swap(_)
                | Hazard::RootOrBoot(_)
                | Hazard::NotWritableKind
                | Hazard::Held(_)
                | Hazard::LoopBacked(_)
                | Hazard::LoopUnknown(_)
        )
    });
    if hard {
        let hint = if hazards.contains(&Hazard::NotWritableKind) {
            "Give a block device or a file path."
        } else {
            "Unmount it or stop using it first, or pick another device; --destroy-data-on does not override this."
        };
        return Err(SafetyError::InUse {
            target: target.to_owned(),
            hazards: list,
            hint,
        });
    }
    if named {
        eprintln!(
            "plugpull: warning: destroying the contents of {} as asked ({list})",
            target.display()
        );
        return Ok(());
    }
    Err(SafetyError::HoldsData {
        target: target.to_owned(),
        hazards: list,
    })
}

/// Whether `destroy` names the opened target: the same path once resolved, and that
/// path is the very file or device of the handle.
fn names_target(destroy: &Path, t: &Target) -> bool {
    let (Ok(d), Ok(m), Ok(h)) = (
        fs::canonicalize(destroy),
        fs::metadata(destroy),
        t.file.metadata(),
    ) else {
        return false;
    };
    d == t.path && (m.dev(), m.ino(), m.rdev()) == (h.dev(), h.ino(), h.rdev())
}

/// A target that does not exist in a directory of the `/dev` file system is a mistyped
/// device name: refuse it (plugpull would otherwise create a file there, in RAM) and list
/// the block devices there are. `/dev/shm` is its own file system and is not refused.
pub fn check_not_missing_device(target: &Path) -> Result<(), SafetyError> {
    // Followed: a dangling /dev/disk/by-id link names a device that is not there either.
    if fs::metadata(target).is_ok() {
        return Ok(());
    }
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let in_dev = match (fs::metadata(parent), fs::metadata("/dev")) {
        (Ok(p), Ok(d)) => p.dev() == d.dev(),
        _ => false,
    };
    if in_dev {
        return Err(SafetyError::NoSuchDevice {
            target: target.to_owned(),
            devices: block_devices().join(", "),
        });
    }
    Ok(())
}

/// Everything that makes the opened target `t` unsafe to overwrite; empty if it is safe.
pub fn hazards(t: &Target, region_offset: u64) -> Result<Vec<Hazard>, SafetyError> {
    hazards_probed(t, region_offset, probe::probe)
}

/// [`hazards`] with libblkid asked through `probe`.
fn hazards_probed(
    t: &Target,
    region_offset: u64,
    probe: impl Fn(&File) -> Result<Vec<Found>, ProbeError>,
) -> Result<Vec<Hazard>, SafetyError> {
    let inspect = |error| SafetyError::CannotInspect {
        target: t.path.clone(),
        error,
    };
    let meta = t.file.metadata().map_err(inspect)?;
    if !t.writable_kind || !(meta.file_type().is_block_device() || meta.is_file()) {
        return Ok(vec![Hazard::NotWritableKind]);
    }
    let node = if t.is_block {
        Node::Block(meta.rdev())
    } else {
        Node::File {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    };
    let mut found = in_use(node);
    if !t.is_block && meta.len() == 0 {
        return Ok(found);
    }
    // Reads see the handle's inode through the page cache, whatever its open flags.
    let reader = open::reopen(&t.file, Flags::BUFFERED, false).map_err(inspect)?;
    let len = if t.is_block { u64::MAX } else { meta.len() };
    if !t.is_block && !holds_plugpull(&reader, len, region_offset) {
        found.push(Hazard::ForeignFile);
    }
    match probe(&reader) {
        Ok(sigs) => {
            for s in sigs {
                let ours = s
                    .magic
                    .is_some_and(|(off, n)| in_plugpull_sectors(&reader, off, n, len));
                if !ours {
                    found.push(Hazard::Found(s.describe()));
                }
            }
        }
        Err(ProbeError::NoTool) => found.push(Hazard::NoProbe(ProbeError::NoTool.to_string())),
        Err(e) => found.push(Hazard::Unreadable(e.to_string())),
    }
    // The hand-kept list is a second opinion: what it knows counts even if libblkid
    // disagrees (a damaged superblock is still someone's data).
    match signature(&reader, len) {
        Ok(Some(sig)) => found.push(Hazard::Signature(sig)),
        Ok(None) => {}
        // What we cannot read, we cannot call empty.
        Err(e) => found.push(Hazard::Unreadable(e.to_string())),
    }
    Ok(found)
}
