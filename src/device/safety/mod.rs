//! Refusals before any write. plugpull overwrites its target, so it must never touch a
//! device that holds data unless the user names that exact device for destruction with
//! `--destroy-data-on PATH`, and never a device or file the kernel is using (mounted, swap,
//! held by device-mapper/RAID, behind a loop device), even then.
//!
//! Everything that shares bytes with the target is judged, not only the path given: the
//! file behind a loop device, a loop device stacked on another, partitions and holders
//! (`super::stack`). A previous plugpull target is recognised only by a whole sector that
//! checks out (a record sector at its own home with both CRCs right, or the target marker
//! of `super::marker`), never by a few magic bytes; and recognising one never switches off
//! the file-system and partition-table signature checks elsewhere on the device.

mod hazard;
mod ram;
mod signature;
mod system;
#[cfg(test)]
mod tests;

pub use hazard::Hazard;
pub use ram::ram_warning;
pub use signature::{is_plugpull_sector, signature, signature_in};
pub use system::block_devices;

use super::stack::Node;
use signature::holds_plugpull;
use std::fs;
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
}

/// Fails with a clear message if writing to `target` could destroy data, unless
/// `destroy` names the same path. `region_offset` is where plugpull's records start.
pub fn check_write_target(
    target: &Path,
    destroy: Option<&Path>,
    region_offset: u64,
) -> Result<(), SafetyError> {
    check_not_missing_device(target)?;
    let hazards = hazards(target, region_offset)?;
    if hazards.is_empty() {
        return Ok(());
    }
    let named = match (destroy, fs::canonicalize(target)) {
        (Some(d), Ok(t)) => fs::canonicalize(d).map(|d| d == t).unwrap_or(false),
        _ => false,
    };
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

/// Everything that makes `target` unsafe to overwrite; empty if it is safe.
pub fn hazards(target: &Path, region_offset: u64) -> Result<Vec<Hazard>, SafetyError> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(error) => {
            return Err(SafetyError::CannotInspect {
                target: target.to_owned(),
                error,
            });
        }
    };
    let is_block = meta.file_type().is_block_device();
    if !is_block && !meta.is_file() {
        return Ok(vec![Hazard::NotWritableKind]);
    }
    let node = if is_block {
        Node::Block(meta.rdev())
    } else {
        Node::File {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    };
    let mut found = in_use(node);
    if meta.is_file() && meta.len() > 0 && !holds_plugpull(target, region_offset) {
        found.push(Hazard::ForeignFile);
    }
    if is_block || meta.len() > 0 {
        match signature(target) {
            Ok(Some(sig)) => found.push(Hazard::Signature(sig)),
            Ok(None) => {}
            // What we cannot read, we cannot call empty.
            Err(e) => found.push(Hazard::Unreadable(e.to_string())),
        }
    }
    Ok(found)
}
