//! Which other block devices and files share bytes with a target, so the safety checks
//! judge all of them and not only the path the user typed.
//!
//! Why: "mounted devices are refused" must also hold for the file behind a mounted loop
//! device and for a loop device stacked on a mounted one; writing to either overwrites
//! the mounted file system all the same. The kernel shows the stacking in sysfs:
//! `/sys/block/loopN/loop/backing_file` (the file or device under a loop device),
//! `slaves/` (what a device-mapper or RAID device sits on), `holders/` (what sits on a
//! device) and partitions. [`related`] walks down from the target to everything its
//! bytes land on, then up to everything that reads or writes the same bytes.

use std::collections::VecDeque;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// A block device (by device number) or a file (by file system and inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Block(u64),
    File { dev: u64, ino: u64 },
}

impl Node {
    /// The node for an existing path, following symlinks.
    pub fn of(path: &Path) -> Option<Node> {
        let m = fs::metadata(path).ok()?;
        Some(if m.file_type().is_block_device() {
            Node::Block(m.rdev())
        } else {
            Node::File {
                dev: m.dev(),
                ino: m.ino(),
            }
        })
    }
}

/// How a node was reached from the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// The target itself.
    Target,
    /// Under the target: a loop device's backing file or device, a device-mapper or RAID
    /// device's member, or a partition's disk.
    Below,
    /// A partition of a disk reached otherwise.
    Partition,
    /// A device-mapper, RAID or similar device that holds a reached device.
    Holder,
    /// A loop device whose backing file or device was reached.
    Loop,
    /// A loop device whose backing file could not be identified, so it may be the
    /// target's: reached from any target.
    Unknown,
}

/// One device or file that shares bytes with the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reached {
    pub node: Node,
    pub via: Via,
    /// `/dev/NAME` for a block device, the path for a file.
    pub name: String,
}

/// An attached loop device.
#[derive(Clone, Debug)]
struct LoopDev {
    rdev: u64,
    /// What it maps; `None` when that could not be told (then every target is refused
    /// while it is attached: it might be this one).
    backing: Option<Node>,
    backing_path: String,
}

/// Every attached loop device. Its backing file is identified by what the kernel holds
/// open (device and inode, from `LOOP_GET_STATUS64`), not by the name sysfs shows: after
/// the name is unlinked sysfs reads "PATH (deleted)" while the file lives on under any
/// other hard link, and resolving that name would lose the loop device. Only where the
/// ioctl cannot be made (no /dev node, not allowed) is the sysfs name resolved, and a
/// name that no longer resolves leaves the backing unknown rather than dropping the
/// loop device from the checks.
fn loops() -> Vec<LoopDev> {
    let Ok(rd) = fs::read_dir("/sys/block") else {
        return vec![];
    };
    rd.flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("loop"))
        .filter_map(|e| {
            let sys = e.path();
            // No backing_file: the device is not attached to anything.
            let backing_path = read_trim(&sys.join("loop/backing_file"))?;
            let rdev = parse_majmin(&read_trim(&sys.join("dev"))?)?;
            let dev_node = Path::new("/dev").join(e.file_name());
            let backing = match loop_status(&dev_node, rdev) {
                Status::Backing(n) => Some(n),
                // Detached since sysfs was read.
                Status::Unbound => return None,
                Status::Unknown => by_name(&backing_path),
            };
            Some(LoopDev {
                rdev,
                backing,
                backing_path,
            })
        })
        .collect()
}

/// The sysfs name of a backing file resolved, unless the kernel marked it unlinked (the
/// name may now be another file, or nothing).
fn by_name(backing_path: &str) -> Option<Node> {
    if backing_path.ends_with(" (deleted)") {
        return None;
    }
    Node::of(Path::new(backing_path))
}

/// What `LOOP_GET_STATUS64` said about a loop device.
enum Status {
    Backing(Node),
    /// ENXIO: no longer attached.
    Unbound,
    /// The device could not be asked.
    Unknown,
}

/// `struct loop_info64` of linux/loop.h; the libc crate does not define it.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// Asks loop device `rdev` (its node `/dev/loopN`, opened read-only, which changes
/// nothing) what it maps: the device and inode of its backing file, or the device
/// number of a backing block device. The node is checked to be `rdev`: a /dev name can
/// lag behind sysfs.
fn loop_status(node: &Path, rdev: u64) -> Status {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(node)
    else {
        return Status::Unknown;
    };
    match f.metadata() {
        Ok(m) if m.file_type().is_block_device() && m.rdev() == rdev => {}
        _ => return Status::Unknown,
    }
    // SAFETY: all-zero bytes are a valid LoopInfo64 (integers and byte arrays only).
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: `f` is an open descriptor for the whole call, and LOOP_GET_STATUS64 writes
    // exactly one `struct loop_info64`, which `info` is laid out as (repr(C), the
    // kernel's field order and sizes).
    let r = unsafe {
        libc::ioctl(
            f.as_raw_fd(),
            LOOP_GET_STATUS64 as _,
            &mut info as *mut LoopInfo64,
        )
    };
    if r != 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENXIO) => Status::Unbound,
            _ => Status::Unknown,
        };
    }
    // The kernel encodes these as stat(2) does, so they compare with st_dev/st_rdev.
    Status::Backing(if info.lo_rdevice != 0 {
        Node::Block(info.lo_rdevice)
    } else {
        Node::File {
            dev: info.lo_device,
            ino: info.lo_inode,
        }
    })
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub fn parse_majmin(s: &str) -> Option<u64> {
    let (a, b) = s.split_once(':')?;
    Some(libc::makedev(a.parse().ok()?, b.parse().ok()?))
}

/// The sysfs directory of block device `rdev` (a disk or a partition).
fn sys_dir(rdev: u64) -> Option<PathBuf> {
    fs::canonicalize(format!(
        "/sys/dev/block/{}:{}",
        libc::major(rdev),
        libc::minor(rdev)
    ))
    .ok()
}

/// `/dev/NAME` of block device `rdev` (the sysfs path if it has no name).
pub fn dev_name(rdev: u64) -> String {
    let p = format!("/sys/dev/block/{}:{}", libc::major(rdev), libc::minor(rdev));
    fs::canonicalize(&p)
        .ok()
        .and_then(|p| {
            p.file_name()
                .map(|n| format!("/dev/{}", n.to_string_lossy()))
        })
        .unwrap_or(p)
}

/// Device numbers of the block devices listed in a sysfs directory (`holders/`,
/// `slaves/`) or of the partition subdirectories of a disk's directory.
fn devs_in(dir: &Path, partitions_only: bool) -> Vec<u64> {
    let Ok(rd) = fs::read_dir(dir) else {
        return vec![];
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| !partitions_only || p.join("partition").exists())
        .filter_map(|p| parse_majmin(&read_trim(&p.join("dev"))?))
        .collect()
}

fn name_of(node: Node, loops: &[LoopDev]) -> String {
    match node {
        Node::Block(d) => dev_name(d),
        Node::File { .. } => loops
            .iter()
            .find(|l| l.backing == Some(node))
            .map(|l| l.backing_path.clone())
            .unwrap_or_else(|| "a file".into()),
    }
}

/// What the bytes of `node` land on.
fn below(node: Node, loops: &[LoopDev]) -> Vec<Node> {
    let Node::Block(d) = node else {
        return vec![];
    };
    let mut out: Vec<Node> = loops
        .iter()
        .filter(|l| l.rdev == d)
        .filter_map(|l| l.backing)
        .collect();
    if let Some(sys) = sys_dir(d) {
        out.extend(
            devs_in(&sys.join("slaves"), false)
                .into_iter()
                .map(Node::Block),
        );
        if sys.join("partition").exists() {
            let disk = sys.parent().and_then(|p| read_trim(&p.join("dev")));
            out.extend(disk.and_then(|s| parse_majmin(&s)).map(Node::Block));
        }
    }
    out
}

/// What else reads or writes the bytes of `node`.
fn above(node: Node, loops: &[LoopDev]) -> Vec<(Node, Via)> {
    let mut out: Vec<(Node, Via)> = loops
        .iter()
        .filter(|l| l.backing == Some(node))
        .map(|l| (Node::Block(l.rdev), Via::Loop))
        .collect();
    if let Node::Block(d) = node {
        if let Some(sys) = sys_dir(d) {
            for h in devs_in(&sys.join("holders"), false) {
                out.push((Node::Block(h), Via::Holder));
            }
            for p in devs_in(&sys, true) {
                out.push((Node::Block(p), Via::Partition));
            }
        }
    }
    out
}

/// The target and every device or file that shares bytes with it.
///
/// 1. Everything below the target, transitively (all of them get its bytes).
/// 2. Above each node below: the loop devices over it (a loop device maps all of its
///    backing store), and a disk's partitions (a partition target is judged with its
///    whole disk, as before). Not the other holders of a node below: device-mapper and
///    RAID map only parts of their members, so another logical volume on the same
///    physical volume shares no bytes with the target.
/// 3. Everything above the target and above the loop devices of step 2, transitively
///    (partitions, holders, loop devices): all of it is built on the target's bytes.
/// 4. Every loop device whose backing file could not be identified and that was not
///    reached otherwise: it may map the target, and not knowing is no reason to write.
pub fn related(target: Node) -> Vec<Reached> {
    let loops = loops();
    let mut seen: Vec<Reached> = vec![];
    let push = |seen: &mut Vec<Reached>, node: Node, via: Via| {
        if seen.iter().any(|r| r.node == node) {
            return false;
        }
        seen.push(Reached {
            node,
            via,
            name: name_of(node, &loops),
        });
        true
    };
    push(&mut seen, target, Via::Target);
    let mut down = VecDeque::from([target]);
    let mut up = VecDeque::from([target]);
    while let Some(n) = down.pop_front() {
        for b in below(n, &loops) {
            if push(&mut seen, b, Via::Below) {
                down.push_back(b);
            }
        }
        if n == target {
            continue;
        }
        for (a, via) in above(n, &loops) {
            let expand = match via {
                Via::Loop => true,
                Via::Partition => false,
                _ => continue,
            };
            if push(&mut seen, a, via) && expand {
                up.push_back(a);
            }
        }
    }
    while let Some(n) = up.pop_front() {
        for (a, via) in above(n, &loops) {
            if push(&mut seen, a, via) {
                up.push_back(a);
            }
        }
    }
    for l in loops.iter().filter(|l| l.backing.is_none()) {
        push(&mut seen, Node::Block(l.rdev), Via::Unknown);
    }
    seen
}

/// The file or device behind loop device `rdev`, if it is one.
pub fn loop_backing(rdev: u64) -> Option<String> {
    loops()
        .into_iter()
        .find(|l| l.rdev == rdev)
        .map(|l| l.backing_path)
}
