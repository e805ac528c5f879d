//! Who the device is and what its cache does, read from sysfs. Reported, never changed:
//! writing `queue/write_cache` only changes the kernel's view and can make it stop sending
//! flushes, which would fake a good result.

use serde::{Deserialize, Serialize};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Identity and cache state of the device a target lives on. For a file target, the disk
/// fields describe the device under its file system and `target` is the canonical path.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    /// The path the user gave.
    pub target: String,
    /// "block" or "file".
    pub kind: String,
    /// Kernel name of the whole disk (e.g. "sda", "nvme0n1", "loop3"), when found.
    pub disk: Option<String>,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    /// Size of the target itself (the file, or the block device).
    pub size_bytes: u64,
    pub logical_sector_bytes: Option<u32>,
    pub physical_sector_bytes: Option<u32>,
    pub rotational: Option<bool>,
    /// `queue/write_cache`: "write back" (volatile cache, flushes sent) or "write through".
    pub write_cache: Option<String>,
    /// `queue/fua`: whether the kernel may use FUA writes.
    pub fua: Option<bool>,
    /// For a loop device, the file behind it.
    pub loop_backing_file: Option<String>,
}

impl DeviceIdentity {
    /// A short key that names the target across runs: the canonical path for a file;
    /// for a block device the serial if known, else model + disk, else the path. The witness uses it to find "the latest run for this device".
    pub fn key(&self) -> String {
        if self.kind == "file" {
            return format!("file:{}", self.target);
        }
        match (&self.serial, &self.model, &self.disk) {
            (Some(s), _, _) if !s.is_empty() => format!("serial:{s}"),
            (_, Some(m), Some(d)) => format!("model:{m}:{d}"),
            _ => format!("path:{}", self.target),
        }
    }
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The sysfs directory of the whole disk holding device number `rdev`.
pub fn whole_disk_sysfs(rdev: u64) -> Option<PathBuf> {
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let dir = fs::canonicalize(format!("/sys/dev/block/{maj}:{min}")).ok()?;
    if dir.join("partition").exists() {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir)
    }
}

/// Reads what sysfs knows about the disk at `sys` (a /sys/block/X directory).
fn fill_from_sysfs(id: &mut DeviceIdentity, sys: &Path) {
    let name = sys.file_name().map(|n| n.to_string_lossy().into_owned());
    id.disk = name.clone();
    id.rotational = read_trim(sys.join("queue/rotational")).map(|s| s == "1");
    id.write_cache = read_trim(sys.join("queue/write_cache"));
    id.fua = read_trim(sys.join("queue/fua")).map(|s| s == "1");
    id.logical_sector_bytes = id
        .logical_sector_bytes
        .or(read_trim(sys.join("queue/logical_block_size")).and_then(|s| s.parse().ok()));
    id.physical_sector_bytes = id
        .physical_sector_bytes
        .or(read_trim(sys.join("queue/physical_block_size")).and_then(|s| s.parse().ok()));
    id.model = read_trim(sys.join("device/model"));
    id.serial = read_trim(sys.join("device/serial")).or(read_trim(sys.join("serial")));
    id.firmware = read_trim(sys.join("device/rev")).or(read_trim(sys.join("device/firmware_rev")));
    id.loop_backing_file = read_trim(sys.join("loop/backing_file"));
    if let Some(n) = name.filter(|n| n.starts_with("nvme")) {
        // nvme0n1 -> /sys/class/nvme/nvme0
        let ctrl = n.split('n').take(2).collect::<Vec<_>>().join("n");
        let c = Path::new("/sys/class/nvme").join(ctrl);
        id.model = id.model.take().or(read_trim(c.join("model")));
        id.serial = id.serial.take().or(read_trim(c.join("serial")));
        id.firmware = id.firmware.take().or(read_trim(c.join("firmware_rev")));
    }
}

/// Identity of a target path: the block device itself, or for a file the device under
/// its file system (when the file system sits on one).
pub fn identify(target: &Path) -> DeviceIdentity {
    let canonical = fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    let mut id = DeviceIdentity {
        target: canonical.display().to_string(),
        ..Default::default()
    };
    let Ok(meta) = fs::metadata(target) else {
        id.kind = "missing".into();
        return id;
    };
    if meta.file_type().is_block_device() {
        id.kind = "block".into();
        if let Ok(f) = fs::File::open(target) {
            if let Ok(g) = super::geometry::block_geometry(&f) {
                id.size_bytes = g.size_bytes;
                id.logical_sector_bytes = Some(g.logical_sector_bytes);
                id.physical_sector_bytes = Some(g.physical_sector_bytes);
            }
        }
        if let Some(sys) = whole_disk_sysfs(meta.rdev()) {
            fill_from_sysfs(&mut id, &sys);
        }
    } else {
        id.kind = "file".into();
        id.size_bytes = meta.len();
        if let Some(sys) = whole_disk_sysfs(meta.dev()) {
            fill_from_sysfs(&mut id, &sys);
        }
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn file_identity_has_kind_and_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        fs::write(&p, vec![0u8; 4096]).unwrap();
        let id = identify(&p);
        assert_eq!(id.kind, "file");
        assert_eq!(id.size_bytes, 4096);
        assert!(!id.key().is_empty());
    }
}
