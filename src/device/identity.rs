//! Who the device is and what its cache does, read from sysfs. Reported, never changed:
//! writing `queue/write_cache` only changes the kernel's view and can make it stop sending
//! flushes, which would fake a good result.
//!
//! The identity is also how verify knows which drive a run belongs to. /dev names change
//! across reboots and loop devices get renumbered, so the name that counts is the most
//! stable one there is: a disk's WWN or serial (plus the partition number), a loop
//! device's backing file, a file's inode and file system. [`DeviceIdentity::key`] is the
//! witness's index ("the latest run for this drive"); [`DeviceIdentity::same_medium`] is
//! the test verify applies before judging a run against a target.

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
    /// World Wide Name of the disk (sysfs `wwid`): the most stable name a disk has.
    /// Absent when unknown, and in runs written before identities were compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    /// The partition number, when the target is a partition of `disk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// The file that holds the target's bytes: the target itself for a file, the backing
    /// file for a loop device. Absent for disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileIdentity>,
}

/// A file, named so that a copy, another file at the same path or the same path on
/// another file system are told apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Canonical path.
    pub path: String,
    /// Inode number (`st_ino`).
    pub inode: u64,
    /// Device number of the file system (`st_dev`, "major:minor"). It can change
    /// across reboots and remounts, so it only stands in for the path (see `same_file`).
    pub fs_dev: String,
    /// The file system's id (`statvfs` `f_fsid`, 16 hex digits) when the kernel gives
    /// one: derived from the file system UUID on ext4 and btrfs, so it survives reboots.
    pub fsid: Option<String>,
    /// Byte of the file where the target's byte 0 is: a loop device's `loop/offset`, 0 for
    /// a file target.
    pub offset: u64,
}

impl FileIdentity {
    /// Reads the identity of the file at `path`; None if it cannot be stat'ed.
    pub fn of(path: &Path, offset: u64) -> Option<FileIdentity> {
        let meta = fs::metadata(path).ok()?;
        let canonical = fs::canonicalize(path).ok()?;
        let fsid = nix::sys::statvfs::statvfs(path)
            .ok()
            // c_ulong: 32 bits on 32-bit targets.
            .map(|s| {
                #[allow(clippy::unnecessary_cast)]
                let id = s.filesystem_id() as u64;
                id
            })
            .filter(|&id| id != 0)
            .map(|id| format!("{id:016x}"));
        Some(FileIdentity {
            path: canonical.display().to_string(),
            inode: meta.ino(),
            fs_dev: format!("{}:{}", libc::major(meta.dev()), libc::minor(meta.dev())),
            fsid,
            offset,
        })
    }

    /// Same bytes: same inode and offset, at the same path, on the same file system.
    /// With an `fsid` on both sides, either the path or the file system's device
    /// number may have changed (a new mount point; a device renumbered at boot), not
    /// both (two clones of one file system share an fsid).
    fn same_file(&self, other: &FileIdentity) -> bool {
        let same_place = match (&self.fsid, &other.fsid) {
            (Some(a), Some(b)) => {
                a == b && (self.path == other.path || self.fs_dev == other.fs_dev)
            }
            _ => self.path == other.path,
        };
        same_place && self.inode == other.inode && self.offset == other.offset
    }

    fn describe(&self) -> String {
        let mut s = format!("file {} (inode {}", self.path, self.inode);
        match &self.fsid {
            Some(id) => s.push_str(&format!(", file system id {id}")),
            None => s.push_str(&format!(", file system {}", self.fs_dev)),
        }
        if self.offset != 0 {
            s.push_str(&format!(", from byte {}", self.offset));
        }
        s.push(')');
        s
    }
}

/// What holds a target's bytes, as far as its identity can tell.
#[derive(Debug, PartialEq)]
enum Medium<'a> {
    /// A file: a file target, or a loop device's backing file.
    File(&'a FileIdentity),
    /// A disk or partition with a hardware name.
    Disk {
        wwn: Option<&'a str>,
        serial: Option<&'a str>,
        model: Option<&'a str>,
        partition: Option<u32>,
    },
    /// Only a path: a disk without WWN or serial, or a run written before identities
    /// were recorded (for a loop device then, its backing file's path).
    Path(&'a str),
}

impl DeviceIdentity {
    fn medium(&self) -> Medium<'_> {
        if let Some(f) = &self.file {
            return Medium::File(f);
        }
        if self.kind == "file" {
            return Medium::Path(&self.target);
        }
        if let Some(b) = &self.loop_backing_file {
            return Medium::Path(b);
        }
        fn known(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|s| !s.is_empty())
        }
        let (wwn, serial) = (known(&self.wwn), known(&self.serial));
        if wwn.is_some() || serial.is_some() {
            return Medium::Disk {
                wwn,
                serial,
                model: known(&self.model),
                partition: self.partition,
            };
        }
        Medium::Path(&self.target)
    }

    /// A short key that names the drive across runs, /dev renames and loop renumbering:
    /// the WWN or else the serial for a disk (with the partition number), the file for a
    /// file or a loop device (its backing file), else the model and disk name or the path.
    /// The witness uses it to find "the latest run for this device".
    pub fn key(&self) -> String {
        let part = |p: Option<u32>| p.map(|n| format!(":part{n}")).unwrap_or_default();
        match self.medium() {
            Medium::File(f) if f.offset != 0 => format!("file:{}@{}", f.path, f.offset),
            Medium::File(f) => format!("file:{}", f.path),
            Medium::Disk {
                wwn: Some(w),
                partition,
                ..
            } => format!("wwn:{w}{}", part(partition)),
            Medium::Disk {
                serial, partition, ..
            } => format!("serial:{}{}", serial.unwrap_or_default(), part(partition)),
            Medium::Path(p) if self.kind == "file" || self.loop_backing_file.is_some() => {
                format!("file:{p}")
            }
            Medium::Path(_) => match (&self.model, &self.disk) {
                (Some(m), Some(d)) => format!("model:{m}:{d}"),
                _ => format!("path:{}", self.target),
            },
        }
    }

    /// True if `self` and `other` name the same bytes: same WWN (or serial and model)
    /// and partition for disks; same inode, offset and file system for files and loop
    /// devices (a loop device and its backing file are the same medium); the same path
    /// when one side knows nothing better.
    /// Whether a run written to `other` may have overwritten bytes of a run written to
    /// `self`: the same medium, or partitions and whole of one disk (by WWN or serial).
    pub fn may_share_bytes(&self, other: &DeviceIdentity) -> bool {
        let same_disk = (self.wwn.is_some() && self.wwn == other.wwn)
            || (self.serial.is_some() && self.serial == other.serial && self.model == other.model);
        self.key() == other.key() || self.same_medium(other) || same_disk
    }

    pub fn same_medium(&self, other: &DeviceIdentity) -> bool {
        match (self.medium(), other.medium()) {
            (Medium::File(a), Medium::File(b)) => a.same_file(b),
            (Medium::Path(p), Medium::File(f)) | (Medium::File(f), Medium::Path(p)) => {
                f.offset == 0 && f.path == p
            }
            (Medium::Path(a), Medium::Path(b)) => a == b,
            (
                Medium::Disk {
                    wwn: w1,
                    serial: s1,
                    model: m1,
                    partition: p1,
                },
                Medium::Disk {
                    wwn: w2,
                    serial: s2,
                    model: m2,
                    partition: p2,
                },
            ) => {
                let same_disk = match (w1.zip(w2), s1.zip(s2)) {
                    (Some((a, b)), _) => a == b,
                    (None, Some((a, b))) => a == b && m1.zip(m2).is_none_or(|(x, y)| x == y),
                    (None, None) => false,
                };
                same_disk && p1 == p2
            }
            _ => false,
        }
    }

    /// One line naming the drive for a person: path, kind and the names that identify it.
    pub fn describe(&self) -> String {
        if let (Some(f), "file") = (&self.file, self.kind.as_str()) {
            return f.describe();
        }
        let mut s = format!("{} ({}", self.target, self.kind);
        if let Some(d) = &self.disk {
            s.push_str(&format!(" {d}"));
        }
        for (name, v) in [
            ("WWN", &self.wwn),
            ("serial", &self.serial),
            ("model", &self.model),
        ] {
            if let Some(v) = v {
                s.push_str(&format!(", {name} {v}"));
            }
        }
        if let Some(p) = self.partition {
            s.push_str(&format!(", partition {p}"));
        }
        match (&self.file, &self.loop_backing_file) {
            (Some(f), _) => s.push_str(&format!(", over {}", f.describe())),
            (None, Some(b)) => s.push_str(&format!(", over file {b}")),
            (None, None) => {}
        }
        s.push(')');
        s
    }
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The serial number in a SCSI Unit Serial Number VPD page (0x80): a 4-byte header
/// (page code at byte 1, length at bytes 2-3), then the serial, space-padded. SATA disks
/// behind libata have no sysfs `serial` file: this page is where their serial is.
fn vpd_serial(page: &[u8]) -> Option<String> {
    if page.len() < 4 || page[1] != 0x80 {
        return None;
    }
    let len = u16::from_be_bytes([page[2], page[3]]) as usize;
    let serial = page.get(4..4 + len).unwrap_or(&page[4..]);
    let s = String::from_utf8_lossy(serial)
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .to_string();
    (!s.is_empty()).then_some(s)
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
    id.serial = read_trim(sys.join("device/serial"))
        .or(read_trim(sys.join("serial")))
        .or(fs::read(sys.join("device/vpd_pg80"))
            .ok()
            .and_then(|b| vpd_serial(&b)));
    id.firmware = read_trim(sys.join("device/rev")).or(read_trim(sys.join("device/firmware_rev")));
    id.loop_backing_file = read_trim(sys.join("loop/backing_file"));
    id.wwn = read_trim(sys.join("wwid")).or(read_trim(sys.join("device/wwid")));
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
            id.file = loop_backing(&sys);
        }
        id.partition = partition_number(meta.rdev());
    } else {
        id.kind = "file".into();
        id.size_bytes = meta.len();
        if let Some(sys) = whole_disk_sysfs(meta.dev()) {
            fill_from_sysfs(&mut id, &sys);
        }
        // The disk fields above describe the disk under the file system; the file is
        // what the run's bytes live in.
        id.file = FileIdentity::of(target, 0);
    }
    id
}

/// The partition number of block device `rdev`, when it is a partition.
fn partition_number(rdev: u64) -> Option<u32> {
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    read_trim(format!("/sys/dev/block/{maj}:{min}/partition")).and_then(|s| s.parse().ok())
}

/// The backing file of the loop device whose sysfs directory is `sys`, if it is one
/// (and the file is still there: a deleted backing file reads "PATH (deleted)").
fn loop_backing(sys: &Path) -> Option<FileIdentity> {
    let path = read_trim(sys.join("loop/backing_file"))?;
    let offset = read_trim(sys.join("loop/offset")).map_or(Some(0), |s| s.parse().ok())?;
    FileIdentity::of(Path::new(&path), offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a SATA disk behind libata shows in sysfs (read in the lab's guest from QEMU's
    /// AHCI disk): no `serial` file, the serial in VPD page 0x80, the WWID with it.
    #[test]
    fn a_sata_disks_serial_is_read_from_vpd_page_0x80() {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("sda");
        fs::create_dir_all(sys.join("device")).unwrap();
        let mut page = vec![0x00, 0x80, 0x00, 20];
        page.extend_from_slice(b"   PLUGPULL-LAB-0001");
        fs::write(sys.join("device/vpd_pg80"), &page).unwrap();
        fs::write(sys.join("device/model"), "PLUGPULL LAB SAT\n").unwrap();
        let mut id = DeviceIdentity::default();
        fill_from_sysfs(&mut id, &sys);
        assert_eq!(id.serial.as_deref(), Some("PLUGPULL-LAB-0001"));
        assert_eq!(id.model.as_deref(), Some("PLUGPULL LAB SAT"));
    }

    #[test]
    fn a_vpd_page_that_is_not_page_0x80_or_is_empty_gives_no_serial() {
        assert_eq!(vpd_serial(&[0, 0x83, 0, 4, b'A', b'B', b'C', b'D']), None);
        assert_eq!(vpd_serial(&[0, 0x80, 0, 4, b' ', b' ', 0, 0]), None);
        assert_eq!(vpd_serial(&[0, 0x80]), None);
        assert_eq!(
            vpd_serial(&[0, 0x80, 0, 9, b'X', b'Y']).as_deref(),
            Some("XY")
        );
    }

    #[test]
    fn file_identity_has_kind_and_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        fs::write(&p, vec![0u8; 4096]).unwrap();
        let id = identify(&p);
        assert_eq!(id.kind, "file");
        assert_eq!(id.size_bytes, 4096);
        let f = id.file.as_ref().expect("a file target has a file identity");
        assert_eq!(f.inode, fs::metadata(&p).unwrap().ino());
        assert_eq!(f.offset, 0);
    }

    /// The key names this file and no other (it used to be checked only for being
    /// non-empty): its canonical path, the same through a symlink, different for a
    /// second file and for a copy.
    #[test]
    fn file_key_names_the_file_itself() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        fs::write(&a, vec![1u8; 4096]).unwrap();
        fs::write(&b, vec![1u8; 4096]).unwrap();
        let link = d.path().join("link-to-a");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let canonical = fs::canonicalize(&a).unwrap();
        let (ia, ib, il) = (identify(&a), identify(&b), identify(&link));
        assert_eq!(ia.key(), format!("file:{}", canonical.display()));
        assert_eq!(il.key(), ia.key());
        assert!(il.same_medium(&ia));
        assert_ne!(ib.key(), ia.key());
        assert!(!ib.same_medium(&ia));
        // Same content, same size, another inode: another medium.
        let copy = d.path().join("copy");
        fs::copy(&a, &copy).unwrap();
        assert!(!identify(&copy).same_medium(&ia));
        // A file replaced at the same path is another medium too (the old one is kept
        // under another name so that its inode number cannot be reused).
        fs::rename(&b, d.path().join("b.old")).unwrap();
        fs::write(&b, vec![1u8; 4096]).unwrap();
        assert!(!identify(&b).same_medium(&ib));
    }

    fn file_id(path: &str, inode: u64, fsid: Option<&str>) -> FileIdentity {
        FileIdentity {
            path: path.into(),
            inode,
            fs_dev: "8:1".into(),
            fsid: fsid.map(Into::into),
            offset: 0,
        }
    }

    fn loop_dev(n: u32, file: FileIdentity) -> DeviceIdentity {
        DeviceIdentity {
            target: format!("/dev/loop{n}"),
            kind: "block".into(),
            disk: Some(format!("loop{n}")),
            loop_backing_file: Some(file.path.clone()),
            file: Some(file),
            ..Default::default()
        }
    }

    /// A loop device is its backing file: renumbering keeps the key and the medium, a
    /// loop over another file or at another offset is another medium.
    #[test]
    fn loop_key_follows_the_backing_file_not_the_number() {
        let f = file_id("/srv/t.img", 12, Some("00000000deadbeef"));
        let (l1, l7) = (loop_dev(1, f.clone()), loop_dev(7, f.clone()));
        assert_eq!(l1.key(), "file:/srv/t.img");
        assert_eq!(l1.key(), l7.key());
        assert!(l1.same_medium(&l7));
        let other = loop_dev(1, file_id("/srv/u.img", 13, Some("00000000deadbeef")));
        assert!(!other.same_medium(&l1));
        assert_ne!(other.key(), l1.key());
        let shifted = loop_dev(
            1,
            FileIdentity {
                offset: 1 << 20,
                ..f.clone()
            },
        );
        assert!(!shifted.same_medium(&l1));
        assert_eq!(shifted.key(), "file:/srv/t.img@1048576");
        // The loop device and its backing file given directly hold the same bytes.
        let direct = DeviceIdentity {
            target: f.path.clone(),
            kind: "file".into(),
            file: Some(f.clone()),
            ..Default::default()
        };
        assert!(direct.same_medium(&l7));
        assert_eq!(direct.key(), l7.key());
        // The file system moved to another mount point: the fsid and device number
        // still say it is the same file; without an fsid the path has to agree.
        let moved = file_id("/mnt/t.img", 12, Some("00000000deadbeef"));
        assert!(loop_dev(2, moved.clone()).same_medium(&l1));
        let moved_no_fsid = file_id("/mnt/t.img", 12, None);
        assert!(!loop_dev(2, moved_no_fsid).same_medium(&l1));
        // A clone of the file system (same fsid) mounted elsewhere on another device.
        let clone = FileIdentity {
            fs_dev: "7:3".into(),
            ..moved
        };
        assert!(!loop_dev(2, clone).same_medium(&l1));
    }

    fn disk(
        target: &str,
        wwn: Option<&str>,
        serial: Option<&str>,
        part: Option<u32>,
    ) -> DeviceIdentity {
        DeviceIdentity {
            target: target.into(),
            kind: "block".into(),
            disk: Some("sda".into()),
            model: Some("M".into()),
            wwn: wwn.map(Into::into),
            serial: serial.map(Into::into),
            partition: part,
            ..Default::default()
        }
    }

    /// Disks are known by WWN, else serial, never by /dev name; partitions of one disk
    /// are different media.
    #[test]
    fn disks_are_told_apart_by_wwn_serial_and_partition() {
        let sdb = disk("/dev/sdb", Some("naa.5000c5"), Some("S1"), None);
        let renamed = disk("/dev/sdc", Some("naa.5000c5"), Some("S1"), None);
        assert!(sdb.same_medium(&renamed));
        assert_eq!(sdb.key(), "wwn:naa.5000c5");
        assert_eq!(sdb.key(), renamed.key());
        let other = disk("/dev/sdb", Some("naa.5000c6"), Some("S2"), None);
        assert!(!other.same_medium(&sdb), "same /dev name, another disk");
        let p1 = disk("/dev/sdb1", Some("naa.5000c5"), Some("S1"), Some(1));
        let p2 = disk("/dev/sdb2", Some("naa.5000c5"), Some("S1"), Some(2));
        assert!(!p1.same_medium(&p2));
        assert!(!p1.same_medium(&sdb));
        assert_eq!(p2.key(), "wwn:naa.5000c5:part2");
        let s = disk("/dev/vdb", None, Some("S9"), None);
        assert_eq!(s.key(), "serial:S9");
        assert!(s.same_medium(&disk("/dev/vdc", None, Some("S9"), None)));
        assert!(!s.same_medium(&disk("/dev/vdb", None, Some("S8"), None)));
        // No hardware name at all: the path is all there is.
        let bare = disk("/dev/vdb", None, None, None);
        assert!(bare.same_medium(&disk("/dev/vdb", None, None, None)));
        assert!(!bare.same_medium(&disk("/dev/vdc", None, None, None)));
        assert_eq!(bare.key(), "model:M:sda");
    }

    /// A run descriptor written before identities were compared has no `file`, `wwn`
    /// or `partition`: it still parses, keeps its old key and matches by path.
    #[test]
    fn old_descriptors_compare_by_path() {
        let old: DeviceIdentity = serde_json::from_str(
            r#"{"target":"/srv/t.img","kind":"file","disk":"vda","model":null,"serial":null,
            "firmware":null,"size_bytes":4096,"logical_sector_bytes":null,
            "physical_sector_bytes":null,"rotational":null,"write_cache":null,"fua":null,
            "loop_backing_file":null}"#,
        )
        .unwrap();
        assert_eq!(old.key(), "file:/srv/t.img");
        let now = DeviceIdentity {
            target: "/srv/t.img".into(),
            kind: "file".into(),
            file: Some(file_id("/srv/t.img", 5, None)),
            ..Default::default()
        };
        assert!(old.same_medium(&now));
        assert_eq!(old.key(), now.key());
        // Unknown new fields are left out, so such descriptors serialise as before.
        let json = serde_json::to_string(&old).unwrap();
        assert!(
            !json.contains("wwn") && !json.contains("\"file\":"),
            "{json}"
        );
    }
}
