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

use super::marker;
use super::stack::{self, Node, Via};
use crate::record::{SECTOR, content_matches, decode_stamp};
use anyhow::{Result, bail};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::Path;

/// What was found that makes a target unsafe to overwrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hazard {
    Mounted {
        device: String,
        at: String,
    },
    Swap(String),
    Held(String),
    /// A loop device reads and writes the target's bytes (it is its backing file or
    /// device, or shares one with it).
    LoopBacked(String),
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
            Hazard::LoopBacked(l) => write!(
                f,
                "loop device {l} uses its bytes (detach it with `losetup -d {l}` first)"
            ),
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

/// A target that does not exist in a directory of the `/dev` file system is a mistyped
/// device name: refuse it (plugpull would otherwise create a file there, in RAM) and list
/// the block devices there are. `/dev/shm` is its own file system and is not refused.
pub fn check_not_missing_device(target: &Path) -> Result<()> {
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
        bail!(
            "{} does not exist: there is no such device (plugpull never creates files in /dev). \
             Block devices on this machine: {}. Check the name (`lsblk` lists them).",
            target.display(),
            block_devices().join(", ")
        );
    }
    Ok(())
}

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

/// The warning to print and report when `target`'s bytes live in RAM: a file on tmpfs or
/// ramfs (statfs; `/dev` itself is tmpfs), a RAM disk (`ramN`, `zramN`), or a loop device
/// over one of those. A power cut empties RAM whatever the drive does, so the test would
/// say nothing about any drive.
pub fn ram_warning(target: &Path) -> Option<String> {
    let what = ram_medium(target, 0)?;
    Some(format!(
        "{} is {what}: this is RAM: a power-cut test means nothing here; write to a file or \
         device on the drive you mean to test",
        target.display()
    ))
}

/// How `path` (or, if it does not exist, its directory) is held in RAM, if it is.
fn ram_medium(path: &Path, depth: u32) -> Option<String> {
    use nix::sys::statfs::{FsType, TMPFS_MAGIC, statfs};
    // linux/magic.h; nix does not name it.
    const RAMFS_MAGIC: FsType = FsType(0x8584_58f6);
    match fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => {
            let name = stack::dev_name(m.rdev());
            let base = name.trim_start_matches("/dev/");
            if base.starts_with("zram") {
                return Some(format!("{name}, a compressed RAM disk"));
            }
            if base.starts_with("ram") {
                return Some(format!("{name}, a RAM disk"));
            }
            let backing = stack::loop_backing(m.rdev()).filter(|_| depth < 8)?;
            let under = ram_medium(Path::new(&backing), depth + 1)?;
            Some(format!("a loop device over {backing}, which is {under}"))
        }
        found => {
            let probe = match found {
                Ok(_) => path,
                Err(_) => path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new(".")),
            };
            let t = statfs(probe).ok()?.filesystem_type();
            if t == TMPFS_MAGIC {
                Some("on tmpfs (RAM)".into())
            } else if t == RAMFS_MAGIC {
                Some("on ramfs (RAM)".into())
            } else {
                None
            }
        }
    }
}

/// Everything that makes `target` unsafe to overwrite; empty if it is safe.
pub fn hazards(target: &Path, region_offset: u64) -> Result<Vec<Hazard>> {
    let meta = match fs::metadata(target) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => bail!("cannot inspect {}: {e}", target.display()),
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

/// Hazards of the kernel using the target's bytes: everything that shares them
/// ([`stack::related`]) that is mounted, swap, the root or boot file system, a holder, or
/// a loop device.
fn in_use(target: Node) -> Vec<Hazard> {
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

/// True if a sector of the target checks out as plugpull's: the one at the region's start
/// or the one at 0 holds a record sector at its own home with both CRCs right, or the
/// target marker written for that offset. A file's length must be whole sectors.
fn holds_plugpull(target: &Path, region_offset: u64) -> bool {
    let Ok(f) = fs::File::open(target) else {
        return false;
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    if len % SECTOR as u64 != 0 {
        return false;
    }
    [region_offset, 0].into_iter().any(|at| {
        let mut b = [0u8; SECTOR];
        f.read_exact_at(&mut b, at).is_ok() && is_plugpull_sector(&b, at, len)
    })
}

/// True if `sector`, read at byte `at` of a target of `len` bytes, is plugpull's: a
/// valid record stamp whose home is `at` and whose record ends inside the target, with
/// the content CRC right; or the target marker written for `at`.
pub fn is_plugpull_sector(sector: &[u8], at: u64, len: u64) -> bool {
    if marker::decode(sector, at).is_some() {
        return true;
    }
    decode_stamp(sector)
        .is_ok_and(|s| s.home() == at && s.record.end() <= len && content_matches(sector, &s))
}

/// Known partition-table and file-system signatures in the first 128 KiB, skipping any
/// whose bytes lie wholly inside sectors that are plugpull's ([`is_plugpull_sector`]):
/// those bytes are plugpull's record content, not a file system. A signature anywhere
/// else counts, whatever the first sector holds.
pub fn signature(target: &Path) -> Result<Option<&'static str>> {
    let mut buf = vec![0u8; 128 * 1024];
    let mut f = fs::File::open(target)?;
    let len = match f.metadata()? {
        m if m.is_file() => m.len(),
        _ => u64::MAX,
    };
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    let b = &buf[..n];
    let ours: Vec<bool> = b
        .chunks_exact(SECTOR)
        .enumerate()
        .map(|(i, s)| is_plugpull_sector(s, (i * SECTOR) as u64, len))
        .collect();
    Ok(signature_outside(b, &ours))
}

/// Looks for signatures in the leading bytes of a device.
pub fn signature_in(b: &[u8]) -> Option<&'static str> {
    signature_outside(b, &[])
}

/// Looks for signatures in `b`, ignoring those whose bytes all lie in sectors `i` with
/// `ours[i]` true.
fn signature_outside(b: &[u8], ours: &[bool]) -> Option<&'static str> {
    let is_ours = |off: usize, len: usize| {
        (off / SECTOR..=(off + len - 1) / SECTOR).all(|i| ours.get(i).copied().unwrap_or(false))
    };
    let at = |off: usize, sig: &[u8]| {
        b.len() >= off + sig.len() && &b[off..off + sig.len()] == sig && !is_ours(off, sig.len())
    };
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

    /// A file holding one record of a run at `offset`, the rest zeros.
    fn plugpull_file(p: &Path, offset: u64) {
        use crate::record::{RecordId, RunId, fill_record};
        let run = RunId([3; 16]);
        let rec = RecordId {
            stream: 0,
            seq: 1,
            offset,
            sectors: 8,
            write_time_ns: 1,
        };
        let mut img = vec![0u8; offset as usize + 8192];
        fill_record(
            &mut img[offset as usize..][..4096],
            &crate::rng::RunKey::new(run),
            run,
            &rec,
        );
        fs::write(p, &img).unwrap();
    }

    #[test]
    fn missing_and_plugpull_files_are_fine() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_write_target(&d.path().join("new"), None, 0).is_ok());
        let p = d.path().join("old-target");
        plugpull_file(&p, 0);
        assert_eq!(hazards(&p, 0).unwrap(), vec![]);
        let m = d.path().join("created-marker");
        let mut img = vec![0u8; 8192];
        img[4096..4608].copy_from_slice(&marker::encode(marker::Creator::Write, 4096));
        fs::write(&m, &img).unwrap();
        assert_eq!(hazards(&m, 4096).unwrap(), vec![]);
        assert_eq!(
            hazards(&m, 0).unwrap(),
            vec![Hazard::ForeignFile],
            "a marker counts only at the offset it was written for"
        );
    }

    /// The magic alone, or a stamp that fails any check, is not a plugpull target: the
    /// recognition needs the whole sector (both CRCs) at its own home.
    #[test]
    fn magic_alone_or_a_damaged_stamp_is_a_foreign_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        let mut s = vec![0u8; 1024];
        s[..4].copy_from_slice(b"PLUG");
        fs::write(&p, &s).unwrap();
        assert_eq!(hazards(&p, 0).unwrap(), vec![Hazard::ForeignFile]);
        plugpull_file(&p, 0);
        let good = fs::read(&p).unwrap();
        for (what, at) in [("stamp", 20), ("content", 300)] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            fs::write(&p, &bad).unwrap();
            assert_eq!(
                hazards(&p, 0).unwrap(),
                vec![Hazard::ForeignFile],
                "a flipped {what} bit"
            );
        }
        // A record sector copied away from its home.
        let mut moved = vec![0u8; 512];
        moved.extend_from_slice(&good[..512]);
        fs::write(&p, &moved).unwrap();
        assert_eq!(hazards(&p, 512).unwrap(), vec![Hazard::ForeignFile]);
        // A record sector whose record would run past the end of the file.
        fs::write(&p, &good[..1024]).unwrap();
        assert_eq!(hazards(&p, 0).unwrap(), vec![Hazard::ForeignFile]);
    }

    #[test]
    fn plug_prefixed_text_file_is_not_a_plugpull_target() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("plugins.conf");
        let text = "PLUGINS enabled: audio, video\n".repeat(40);
        fs::write(&p, &text).unwrap();
        let err = check_write_target(&p, None, 0).unwrap_err().to_string();
        assert!(err.contains("not a plugpull target"), "{err}");
        assert_eq!(fs::read_to_string(&p).unwrap(), text);
    }

    /// A valid plugpull sector at 0 does not hide an ext4 superblock at 1024.
    #[test]
    fn plugpull_sector_does_not_hide_other_signatures() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("img");
        plugpull_file(&p, 0);
        let mut img = fs::read(&p).unwrap();
        img.resize(64 * 1024, 0);
        img[4096..].fill(0);
        img[1080] = 0x53;
        img[1081] = 0xEF;
        // Sector 2 (1024..1536) now fails its CRCs: it is not ours, the signature counts.
        fs::write(&p, &img).unwrap();
        assert_eq!(
            hazards(&p, 0).unwrap(),
            vec![Hazard::Signature("an ext2/3/4 file system")]
        );
        // The same bytes inside a verified plugpull sector are record content.
        let mut ours = vec![false; 128];
        ours[2] = true;
        assert_eq!(signature_outside(&img, &ours), None);
    }

    #[test]
    fn directories_are_refused() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_write_target(d.path(), Some(d.path()), 0).is_err());
    }
}
