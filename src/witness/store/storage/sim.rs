//! A simulated disk for the witness's storage that loses power at a chosen operation.
//!
//! Why it is built this way (after TigerBeetle's storage simulator and redb's
//! FailingBackend, and like the simulated drive in `crate::sim`): the pristine state is
//! kept apart from the fault layer. Each file has its `durable` bytes (what survives a
//! cut) and its list of `pending` writes and length changes since its last sync; the
//! directory has its durable names and its pending creates, removes and renames since
//! its last `sync_dir`. Reads see the newest state (`current`, the page cache). Faults
//! exist only at the cut, where they decide what of the pending state reaches the
//! durable one:
//!
//! - every pending write or length change of a file is kept or dropped on its own (a
//!   disk may destage unsynced writes in any order), the kept ones applied in the order
//!   they were made (a newer write is never overwritten by an older one);
//! - the last pending write of each file, if kept, may be torn at a sector boundary: only
//!   a prefix of it up to a multiple of [`SECTOR`] in file offsets survives;
//! - the pending name changes keep a random prefix (file systems journal metadata in
//!   order).
//!
//! The cut is an operation count, not a timer: [`SimDisk::boot`] with `cut_at = Some(n)`
//! cuts power at the n-th call of this boot (that call fails; if it is a write, the
//! write is in flight and subject to the faults above), and every later call of this
//! boot fails too. With a deterministic caller, one seed and one `n` replay exactly.

use super::{Storage, StorageFile};
use crate::record::SECTOR;
use crate::rng::Rng;
use crate::sync::lock;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const SECTOR_U64: u64 = SECTOR as u64;

/// A file's content change not yet synced.
#[derive(Clone, Debug)]
enum DataOp {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

/// A directory change not yet synced.
#[derive(Clone, Debug)]
enum NameOp {
    Link(PathBuf, usize),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf),
}

impl NameOp {
    fn dir(&self) -> &Path {
        match self {
            NameOp::Link(p, _) | NameOp::Unlink(p) | NameOp::Rename(p, _) => parent(p),
        }
    }
    fn apply(&self, names: &mut BTreeMap<PathBuf, usize>) {
        match self {
            NameOp::Link(p, inode) => {
                names.insert(p.clone(), *inode);
            }
            NameOp::Unlink(p) => {
                names.remove(p);
            }
            NameOp::Rename(from, to) => {
                if let Some(inode) = names.remove(from) {
                    names.insert(to.clone(), inode);
                }
            }
        }
    }
}

#[derive(Default)]
struct Inode {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<DataOp>,
}

fn apply_data(bytes: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { offset, data } => {
            let (start, end) = (*offset as usize, *offset as usize + data.len());
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[start..end].copy_from_slice(data);
        }
        DataOp::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

/// What the cuts of one disk did, for the test's report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutStats {
    pub cuts: u64,
    pub writes_dropped: u64,
    pub writes_kept: u64,
    pub writes_torn: u64,
    pub name_changes_dropped: u64,
}

struct Disk {
    faults: Rng,
    /// Power epoch: handles of an earlier boot fail.
    boot: u64,
    powered: bool,
    /// Calls made in this boot, and the one that cuts power.
    ops: u64,
    cut_at: Option<u64>,
    inodes: Vec<Inode>,
    names: BTreeMap<PathBuf, usize>,
    durable_names: BTreeMap<PathBuf, usize>,
    pending_names: Vec<NameOp>,
    stats: CutStats,
    /// Tears keep any subset of a write's sectors, not only a prefix.
    scattered_tears: bool,
}

/// The simulated disk, shared by every boot; see the module doc.
pub struct SimDisk {
    disk: Mutex<Disk>,
}

fn power_off() -> io::Error {
    io::Error::other("simulated power cut: the witness's disk is off")
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file", p.display()),
    )
}

impl SimDisk {
    /// An empty disk, powered off; `seed` drives every fault decision.
    pub fn new(seed: u64) -> Arc<SimDisk> {
        Arc::new(SimDisk {
            disk: Mutex::new(Disk {
                faults: Rng::new(seed).fork(0x5157),
                boot: 0,
                powered: false,
                ops: 0,
                cut_at: None,
                inodes: Vec::new(),
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                pending_names: Vec::new(),
                stats: CutStats::default(),
                scattered_tears: false,
            }),
        })
    }

    /// Powers the disk on (cutting it first if it is still on) and returns its storage
    /// for this boot; `cut_at = Some(n)` cuts power at the n-th call of the boot.
    pub fn boot(self: &Arc<Self>, cut_at: Option<u64>) -> Arc<dyn Storage> {
        let mut d = lock(&self.disk);
        if d.powered {
            d.cut();
        }
        d.boot += 1;
        d.powered = true;
        d.ops = 0;
        d.cut_at = cut_at;
        Arc::new(SimStorage {
            disk: self.clone(),
            boot: d.boot,
        })
    }

    /// From now on a torn write keeps any subset of its sectors (page cache writeback
    /// may persist a later page of one write and not an earlier one), not only a prefix.
    pub fn set_scattered_tears(&self, on: bool) {
        lock(&self.disk).scattered_tears = on;
    }

    /// Cuts power now (the same faults as a cut at an operation).
    pub fn cut_now(&self) {
        let mut d = lock(&self.disk);
        if d.powered {
            d.cut();
        }
    }

    /// Calls made in the current (or last) boot, including the one that cut it.
    pub fn ops(&self) -> u64 {
        lock(&self.disk).ops
    }

    /// Whether the current boot's power is off (it was cut).
    pub fn is_off(&self) -> bool {
        !lock(&self.disk).powered
    }

    pub fn stats(&self) -> CutStats {
        lock(&self.disk).stats.clone()
    }

    /// The bytes of `path` as reads see them, without counting an operation (for tests
    /// that inspect what a cut left).
    pub fn peek(&self, path: &Path) -> Option<Vec<u8>> {
        let d = lock(&self.disk);
        d.names.get(path).map(|&i| d.inodes[i].current.clone())
    }
}

impl Disk {
    /// Counts one call of `boot`; `Ok(true)` when this call is the one that cuts power.
    fn begin(&mut self, boot: u64) -> io::Result<bool> {
        if boot != self.boot || !self.powered {
            return Err(power_off());
        }
        self.ops += 1;
        Ok(self.cut_at == Some(self.ops))
    }

    /// Like `begin`, but cuts right away: for calls that change nothing before the cut.
    fn enter(&mut self, boot: u64) -> io::Result<()> {
        if self.begin(boot)? {
            self.cut();
            return Err(power_off());
        }
        Ok(())
    }

    /// Power is gone: decide what of the pending state reached the disk.
    fn cut(&mut self) {
        self.powered = false;
        self.stats.cuts += 1;
        // How likely an unsynced write survives, per cut: none, all, or any mix.
        let keep_p = match self.faults.below(4) {
            0 => 0.0,
            1 => 1.0,
            _ => (self.faults.below(1000) as f64) / 1000.0,
        };
        let kept_names = self.faults.below(self.pending_names.len() as u64 + 1) as usize;
        self.stats.name_changes_dropped += (self.pending_names.len() - kept_names) as u64;
        for op in self.pending_names.drain(..kept_names) {
            op.apply(&mut self.durable_names);
        }
        self.pending_names.clear();
        self.names = self.durable_names.clone();
        for i in 0..self.inodes.len() {
            let pending = std::mem::take(&mut self.inodes[i].pending);
            let last_write = pending
                .iter()
                .rposition(|op| matches!(op, DataOp::Write { .. }));
            for (k, op) in pending.iter().enumerate() {
                if !self.faults.chance(keep_p) {
                    self.stats.writes_dropped += 1;
                    continue;
                }
                let ops = match op {
                    DataOp::Write { offset, data } if Some(k) == last_write => {
                        self.maybe_tear(*offset, data)
                    }
                    other => vec![other.clone()],
                };
                self.stats.writes_kept += 1;
                for op in &ops {
                    apply_data(&mut self.inodes[i].durable, op);
                }
            }
            let inode = &mut self.inodes[i];
            inode.current.clone_from(&inode.durable);
        }
    }

    /// A write that may be torn: half the time only a prefix of it up to a sector
    /// boundary (in file offsets) survives, or with scattered tears any subset of its
    /// sector pieces.
    fn maybe_tear(&mut self, offset: u64, data: &[u8]) -> Vec<DataOp> {
        let piece = |from: u64, to: u64| DataOp::Write {
            offset: from,
            data: data[(from - offset) as usize..(to - offset) as usize].to_vec(),
        };
        let first = offset.div_ceil(SECTOR_U64) * SECTOR_U64;
        let end = offset + data.len() as u64;
        // Sector boundaries strictly inside the write.
        let inside = if first > offset {
            first
        } else {
            first + SECTOR_U64
        };
        if inside >= end || !self.faults.chance(0.5) {
            return vec![piece(offset, end)];
        }
        self.stats.writes_torn += 1;
        if self.scattered_tears {
            let mut cuts = vec![offset];
            cuts.extend((inside..end).step_by(SECTOR));
            cuts.push(end);
            return cuts
                .windows(2)
                .filter(|_| self.faults.chance(0.5))
                .map(|w| piece(w[0], w[1]))
                .collect();
        }
        let boundaries = (end - 1 - inside) / SECTOR_U64 + 1;
        let cut = inside + self.faults.below(boundaries) * SECTOR_U64;
        vec![piece(offset, cut)]
    }

    fn inode_of(&self, path: &Path) -> io::Result<usize> {
        self.names.get(path).copied().ok_or_else(|| not_found(path))
    }
}

/// One boot of a [`SimDisk`] as a [`Storage`].
pub struct SimStorage {
    disk: Arc<SimDisk>,
    boot: u64,
}

struct SimFile {
    disk: Arc<SimDisk>,
    boot: u64,
    inode: usize,
    writable: bool,
}

impl SimStorage {
    fn file(&self, inode: usize, writable: bool) -> Box<dyn StorageFile> {
        Box::new(SimFile {
            disk: self.disk.clone(),
            boot: self.boot,
            inode,
            writable,
        })
    }
}

impl Storage for SimStorage {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        if d.names.contains_key(path) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        let inode = d.inodes.len();
        d.inodes.push(Inode::default());
        d.names.insert(path.to_path_buf(), inode);
        d.pending_names
            .push(NameOp::Link(path.to_path_buf(), inode));
        Ok(self.file(inode, true))
    }
    fn open(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        let inode = d.inode_of(path)?;
        Ok(self.file(inode, true))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        let inode = d.inode_of(path)?;
        Ok(self.file(inode, false))
    }
    fn exists(&self, path: &Path) -> io::Result<bool> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        Ok(d.names.contains_key(path))
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        d.inode_of(path)?;
        d.names.remove(path);
        d.pending_names.push(NameOp::Unlink(path.to_path_buf()));
        Ok(())
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        if parent(from) != parent(to) {
            return Err(io::Error::other(
                "the simulated disk renames only within one directory",
            ));
        }
        let inode = d.inode_of(from)?;
        d.names.remove(from);
        d.names.insert(to.to_path_buf(), inode);
        d.pending_names
            .push(NameOp::Rename(from.to_path_buf(), to.to_path_buf()));
        Ok(())
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        let (here, elsewhere): (Vec<NameOp>, Vec<NameOp>) = std::mem::take(&mut d.pending_names)
            .into_iter()
            .partition(|op| op.dir() == dir);
        for op in &here {
            op.apply(&mut d.durable_names);
        }
        d.pending_names = elsewhere;
        Ok(())
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        Ok(d.names
            .keys()
            .filter(|p| parent(p) == dir)
            .cloned()
            .collect())
    }
}

impl SimFile {
    fn check_writable(&self) -> io::Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "file opened read-only",
            ))
        }
    }

    /// Records a change: in the page cache now, on the disk only after a sync. A change
    /// made by the call that cuts power is in flight: the cut decides its fate.
    fn change(&self, op: DataOp) -> io::Result<()> {
        self.check_writable()?;
        let mut d = lock(&self.disk.disk);
        let cut = d.begin(self.boot)?;
        let inode = &mut d.inodes[self.inode];
        apply_data(&mut inode.current, &op);
        inode.pending.push(op);
        if cut {
            d.cut();
            return Err(power_off());
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        let inode = &mut d.inodes[self.inode];
        inode.durable.clone_from(&inode.current);
        inode.pending.clear();
        Ok(())
    }
}

impl StorageFile for SimFile {
    fn size(&self) -> io::Result<u64> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        Ok(d.inodes[self.inode].current.len() as u64)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut d = lock(&self.disk.disk);
        d.enter(self.boot)?;
        let bytes = &d.inodes[self.inode].current;
        let start = (offset as usize).min(bytes.len());
        let n = buf.len().min(bytes.len() - start);
        buf[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.change(DataOp::Write {
            offset,
            data: data.to_vec(),
        })
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.change(DataOp::SetLen(len))
    }
    fn sync_data(&self) -> io::Result<()> {
        self.sync()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.sync()
    }
}

#[cfg(test)]
mod tests;
