//! Refusals before any write. plugpull overwrites its target, so it must never touch a
//! device that holds data unless the user names that exact device for destruction with
//! `--destroy-data-on PATH`. A previous plugpull target is recognised by its stamp and
//! may be reused freely.

use crate::record::{MAGIC, SECTOR};
use anyhow::{Result, bail};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What was found that makes a target unsafe to overwrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hazard {
    Mounted { device: String, at: String },
    Swap(String),
    Held(String),
    RootOrBoot(String),
    Signature(&'static str),
    ForeignFile,
    NotWritableKind,
    Unreadable(String),
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hazard::Mounted { device, at } => write!(f, "{device} is mounted at {at}"),
            Hazard::Swap(d) => write!(f, "{d} is in use as swap"),
            Hazard::Held(h) => write!(f, "it is held by {h} (device-mapper, RAID or LVM)"),
            Hazard::RootOrBoot(m) => write!(f, "it holds the {m} file system of this machine"),
            Hazard::Signature(s) => write!(f, "it holds {s}"),
            Hazard::ForeignFile => write!(f, "the file exists and is not a plugpull target"),
            Hazard::NotWritableKind => write!(f, "it is neither a regular file nor a block device"),
            Hazard::Unreadable(e) => write!(
                f,
                "its first 128 KiB cannot be read to check for data ({e})"
            ),
        }
    }
}

/// Fails with a clear message if writing to `target` could destroy data, unless
/// `destroy` names the same path. `region_offset` is where plugpull's records start.
pub fn check_write_target(target: &Path, destroy: Option<&Path>, region_offset: u64) -> Result<()> {
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
    // Mounted file systems and the root disk are never overwritten: the kernel would go
    // on using them and the machine could not be trusted afterwards.
    let hard = hazards.iter().any(|h| {
        matches!(
            h,
            Hazard::Mounted { .. }
                | Hazard::Swap(_)
                | Hazard::RootOrBoot(_)
                | Hazard::NotWritableKind
                | Hazard::Held(_)
        )
    });
    if hard {
        let hint = if hazards.contains(&Hazard::NotWritableKind) {
            "Give a block device or a file path."
        } else {
            "Unmount it or stop using it first, or pick another device; --destroy-data-on does not override this."
        };
        bail!("refusing to write to {}: {list}. {hint}", target.display());
    }
    if named {
        eprintln!(
            "plugpull: warning: destroying the contents of {} as asked ({list})",
            target.display()
        );
        return Ok(());
    }
    bail!(
        "refusing to write to {}: {list}. plugpull overwrites its target; if you mean to destroy \
         what is there, pass --destroy-data-on {}",
        target.display(),
        target.display()
    )
}

/// Everything that makes `target` unsafe to overwrite; empty if it is safe.
pub fn hazards(target: &Path, region_offset: u64) -> Result<Vec<Hazard>> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => bail!("cannot inspect {}: {e}", target.display()),
    };
    let mut found = vec![];
    if meta.file_type().is_block_device() {
        let devs = disk_and_partitions(meta.rdev());
        for (dev, at) in mounts() {
            if devs.contains(&dev) {
                found.push(Hazard::Mounted {
                    device: dev_name(dev),
                    at,
                });
            }
        }
        for (dev, name) in swaps() {
            if devs.contains(&dev) {
                found.push(Hazard::Swap(name));
            }
        }
        if let Some(sys) = super::identity::whole_disk_sysfs(meta.rdev()) {
            let held = fs::read_dir(sys.join("holders"))
                .map(|d| d.count())
                .unwrap_or(0);
            if held > 0 {
                found.push(Hazard::Held(format!(
                    "{held} holder(s) in {}",
                    sys.join("holders").display()
                )));
            }
        }
        for m in ["/", "/boot", "/boot/efi"] {
            if let Ok(md) = fs::metadata(m) {
                if devs.contains(&md.dev()) || devs.contains(&whole_disk_dev(md.dev())) {
                    found.push(Hazard::RootOrBoot(m.to_string()));
                }
            }
        }
        if !holds_plugpull(target, region_offset) {
            match signature(target) {
                Ok(Some(sig)) => found.push(Hazard::Signature(sig)),
                Ok(None) => {}
                // What we cannot read, we cannot call empty.
                Err(e) => found.push(Hazard::Unreadable(e.to_string())),
            }
        }
    } else if meta.is_file() {
        if meta.len() > 0 && !holds_plugpull(target, region_offset) {
            found.push(Hazard::ForeignFile);
        }
    } else {
        found.push(Hazard::NotWritableKind);
    }
    Ok(found)
}

/// True if the first sector of the region carries a plugpull stamp (of any run).
fn holds_plugpull(target: &Path, region_offset: u64) -> bool {
    let mut b = [0u8; SECTOR];
    match fs::File::open(target) {
        Ok(f) => f.read_exact_at(&mut b, region_offset).is_ok() && b[..MAGIC.len()] == MAGIC,
        Err(_) => false,
    }
}

/// Known partition-table and file-system signatures in the first 128 KiB.
pub fn signature(target: &Path) -> Result<Option<&'static str>> {
    let mut buf = vec![0u8; 128 * 1024];
    let mut f = fs::File::open(target)?;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(signature_in(&buf[..n]))
}

/// Looks for signatures in the leading bytes of a device.
pub fn signature_in(b: &[u8]) -> Option<&'static str> {
    let at = |off: usize, sig: &[u8]| b.len() >= off + sig.len() && &b[off..off + sig.len()] == sig;
    const CHECKS: &[(usize, &[u8], &str)] = &[
        (512, b"EFI PART", "a GPT partition table"),
        (4096, b"EFI PART", "a GPT partition table"),
        (1080, &[0x53, 0xEF], "an ext2/3/4 file system"),
        (0, b"XFSB", "an XFS file system"),
        (65600, b"_BHRfS_M", "a btrfs file system"),
        (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
        (3, b"NTFS    ", "an NTFS file system"),
        (54, b"FAT1", "a FAT file system"),
        (82, b"FAT32   ", "a FAT32 file system"),
        (3, b"EXFAT   ", "an exFAT file system"),
        (32769, b"CD001", "an ISO 9660 file system"),
        (536, b"LVM2 001", "an LVM physical volume"),
        (4086, b"SWAPSPACE2", "a swap area"),
        (4086, b"SWAP-SPACE", "a swap area"),
        (65536, b"_BHRfS_M", "a btrfs file system"),
        (1024, b"\x10\x20\xf5\xf2", "an F2FS file system"),
        (4096, b"\xfc\x4e\x2b\xa9", "a bcachefs file system"),
    ];
    for (off, sig, what) in CHECKS {
        if at(*off, sig) {
            return Some(what);
        }
    }
    // MBR: boot signature plus at least one non-empty partition entry.
    if at(510, &[0x55, 0xAA]) && (0..4).any(|i| b[446 + 16 * i + 4] != 0) {
        return Some("an MBR partition table");
    }
    None
}

fn dev_name(dev: u64) -> String {
    let p = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    fs::canonicalize(&p)
        .ok()
        .and_then(|p| {
            p.file_name()
                .map(|n| format!("/dev/{}", n.to_string_lossy()))
        })
        .unwrap_or(p)
}

fn whole_disk_dev(dev: u64) -> u64 {
    super::identity::whole_disk_sysfs(dev)
        .and_then(|s| fs::read_to_string(s.join("dev")).ok())
        .and_then(|s| parse_majmin(s.trim()))
        .unwrap_or(dev)
}

fn parse_majmin(s: &str) -> Option<u64> {
    let (a, b) = s.split_once(':')?;
    Some(libc::makedev(a.parse().ok()?, b.parse().ok()?))
}

/// Device numbers of the whole disk holding `rdev` and all of its partitions.
fn disk_and_partitions(rdev: u64) -> Vec<u64> {
    let mut out = vec![rdev];
    let Some(sys) = super::identity::whole_disk_sysfs(rdev) else {
        return out;
    };
    let mut dirs: Vec<PathBuf> = vec![sys.clone()];
    if let Ok(rd) = fs::read_dir(&sys) {
        dirs.extend(
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("partition").exists()),
        );
    }
    for d in dirs {
        if let Some(dev) = fs::read_to_string(d.join("dev"))
            .ok()
            .and_then(|s| parse_majmin(s.trim()))
        {
            if !out.contains(&dev) {
                out.push(dev);
            }
        }
    }
    out
}

/// (device number, mount point) of every mount, from /proc/self/mountinfo.
fn mounts() -> Vec<(u64, String)> {
    let text = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Some((parse_majmin(f.get(2)?)?, f.get(4)?.to_string()))
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_ext4_and_gpt_and_mbr() {
        let mut b = vec![0u8; 128 * 1024];
        assert_eq!(signature_in(&b), None);
        b[1080] = 0x53;
        b[1081] = 0xEF;
        assert_eq!(signature_in(&b), Some("an ext2/3/4 file system"));
        let mut g = vec![0u8; 8192];
        g[512..520].copy_from_slice(b"EFI PART");
        assert_eq!(signature_in(&g), Some("a GPT partition table"));
        let mut m = vec![0u8; 1024];
        m[510] = 0x55;
        m[511] = 0xAA;
        assert_eq!(
            signature_in(&m),
            None,
            "boot signature alone with no partitions is not a table"
        );
        m[446 + 4] = 0x83;
        assert_eq!(signature_in(&m), Some("an MBR partition table"));
    }

    #[test]
    fn foreign_file_refused_unless_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("precious");
        fs::write(&p, b"my thesis").unwrap();
        let err = check_write_target(&p, None, 0).unwrap_err().to_string();
        assert!(err.contains("--destroy-data-on"), "{err}");
        assert!(check_write_target(&p, Some(&p), 0).is_ok());
        let other = d.path().join("other");
        fs::write(&other, b"x").unwrap();
        assert!(
            check_write_target(&p, Some(&other), 0).is_err(),
            "naming another path must not unlock this one"
        );
        assert_eq!(fs::read(&p).unwrap(), b"my thesis");
    }

    #[test]
    fn missing_and_plugpull_files_are_fine() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_write_target(&d.path().join("new"), None, 0).is_ok());
        let p = d.path().join("old-target");
        let mut s = vec![0u8; 1024];
        s[..MAGIC.len()].copy_from_slice(&MAGIC);
        fs::write(&p, &s).unwrap();
        assert!(check_write_target(&p, None, 0).is_ok());
    }

    #[test]
    fn directories_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_write_target(d.path(), Some(d.path()), 0).is_err());
    }
}
