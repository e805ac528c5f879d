//! `plugpull simdrive`: the drive model served as one file, `disk.img`, over FUSE.
//!
//! Why FUSE: the machines we test on have no device-mapper, ublk or nbd, but FUSE and loop
//! devices work, so a FUSE file (optionally under `losetup --direct-io=on`) lets the real
//! writer reach the model through real syscalls. The facts this relies on are in
//! docs/fault-model.md: FSYNC (fdatasync) is the flush; FLUSH (close) is not durability;
//! FOPEN_DIRECT_IO keeps the kernel page cache out; a SIGKILL of this daemon is the power
//! cut, because the backing file already holds exactly what survives (see `media`).
//!
//! Deterministic cut: SIGUSR1 (or SIGTERM/SIGINT) applies the profile's cut, finalises the
//! oracle and exits; the mount is then dead like after a SIGKILL and must be unmounted
//! (`umount MNT`, or `umount -l MNT` while a descriptor is open). Starting the daemon
//! again on the same backing file is power on.

use super::drive::SimDrive;
use super::model::SimConfig;
use super::profile::Profile;
use crate::device::Device;
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use nix::sys::signal::{SigSet, Signal};
use std::ffi::OsStr;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

const FILE_NAME: &str = "disk.img";
const FILE_INO: INodeNo = INodeNo(2);
/// Attributes never change behind the kernel's back except by our own replies.
const TTL: Duration = Duration::from_secs(1);

struct SimFs {
    drive: Arc<SimDrive>,
}

fn errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

impl SimFs {
    fn attr(&self, ino: INodeNo) -> FileAttr {
        let (kind, perm, nlink, size) = if ino == FILE_INO {
            (FileType::RegularFile, 0o600, 1, self.drive.size_bytes())
        } else {
            (FileType::Directory, 0o755, 2, 0)
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// Clamps a request to the end of the drive.
    fn clamp(&self, offset: u64, len: u64) -> u64 {
        self.drive.size_bytes().saturating_sub(offset).min(len)
    }
}

impl Filesystem for SimFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent == INodeNo::ROOT && name == FILE_NAME {
            reply.entry(&TTL, &self.attr(FILE_INO), fuser::Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino == INodeNo::ROOT || ino == FILE_INO {
            reply.attr(&TTL, &self.attr(ino));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // A drive has a fixed size: truncating to it (O_TRUNC of a full file aside) is a
        // no-op, any other size is refused; times and modes are accepted and ignored.
        match size {
            Some(s) if s != self.drive.size_bytes() => reply.error(Errno::EINVAL),
            _ => reply.attr(&TTL, &self.attr(ino)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino != FILE_INO {
            return reply.error(Errno::EISDIR);
        }
        if !self.drive.is_powered() {
            // A dead drive: the device does not respond.
            return reply.error(Errno::EIO);
        }
        // No page cache in front of the "drive": every read and write reaches the model.
        reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
    }

    #[allow(clippy::too_many_arguments)]
    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let n = self.clamp(offset, size as u64) as usize;
        let mut buf = vec![0u8; n];
        match self.drive.read_at(&mut buf, offset) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(errno(&e)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let n = self.clamp(offset, data.len() as u64) as usize;
        if n == 0 && !data.is_empty() {
            return reply.error(Errno::ENOSPC);
        }
        match self.drive.write_at(&data[..n], offset) {
            Ok(()) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(): not a durability point. A drive knows nothing of file descriptors.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // fsync/fdatasync, and every block-layer flush of a loop device on this file.
        match self.drive.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino != INodeNo::ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (INodeNo::ROOT, FileType::Directory, "."),
            (INodeNo::ROOT, FileType::Directory, ".."),
            (FILE_INO, FileType::RegularFile, FILE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(*ino, (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // Punch hole / zero range read back as zeros (a discard or write-zeroes, cached
        // like any write). Plain allocation within the drive is a no-op.
        let zeroing = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0;
        if !zeroing {
            return reply.ok();
        }
        let len = self.clamp(offset, length);
        match self.drive.zero(offset, len) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }
}

/// What `plugpull simdrive` serves, and where.
#[derive(Clone, Debug)]
pub struct SimdriveOptions {
    /// Directory to mount the drive on; it shows one file, `disk.img`.
    pub mountpoint: PathBuf,
    /// Backing file of the durable image (created if missing; an existing one is power
    /// on with its contents).
    pub backing: PathBuf,
    pub size_bytes: u64,
    pub profile: Profile,
    /// `None`: a random seed, printed at start.
    pub seed: Option<u64>,
    /// Where to append the oracle log of injected faults (JSON lines).
    pub oracle: Option<PathBuf>,
}

/// Why the daemon could not serve the drive.
#[derive(Debug, thiserror::Error)]
pub enum SimdriveError {
    #[error("blocking signals")]
    BlockSignals(#[source] nix::Error),
    #[error("starting the simulated drive on {}", backing.display())]
    Start {
        backing: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("mounting FUSE on {}", mountpoint.display())]
    Mount {
        mountpoint: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for a signal")]
    WaitSignal(#[source] nix::Error),
    #[error("applying the deterministic cut")]
    Cut(#[source] std::io::Error),
}

/// The signals that mean "cut the power now", blocked before any thread exists so only
/// our sigwait sees them.
fn block_cut_signals() -> Result<SigSet, SimdriveError> {
    let mut signals = SigSet::empty();
    for s in [Signal::SIGUSR1, Signal::SIGTERM, Signal::SIGINT] {
        signals.add(s);
    }
    signals
        .thread_block()
        .map_err(SimdriveError::BlockSignals)?;
    Ok(signals)
}

/// Runs the daemon until a deterministic cut signal (or forever until SIGKILL). Never
/// returns on success: after the cut the process exits without unmounting, as a power
/// cut would.
pub fn serve(o: SimdriveOptions) -> Result<std::convert::Infallible, SimdriveError> {
    let profile = o.profile;
    let seed = o.seed.unwrap_or_else(crate::rng::random_seed);
    let signals = block_cut_signals()?;
    let drive = Arc::new(
        SimDrive::start(SimConfig {
            size_bytes: o.size_bytes,
            profile: profile.clone(),
            seed,
            backing: Some(o.backing.clone()),
            oracle: o.oracle.clone(),
        })
        .map_err(|source| SimdriveError::Start {
            backing: o.backing.clone(),
            source,
        })?,
    );
    println!("plugpull simdrive: seed {seed} profile {profile}");
    if !drive.is_powered() {
        println!("plugpull simdrive: the drive is dead after the last cut; disk.img will not open");
    }
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::FSName("plugpull-simdrive".into()),
        MountOption::RW,
        MountOption::DefaultPermissions,
    ];
    cfg.n_threads = Some(4);
    let session = fuser::spawn_mount(
        SimFs {
            drive: drive.clone(),
        },
        &o.mountpoint,
        &cfg,
    )
    .map_err(|source| SimdriveError::Mount {
        mountpoint: o.mountpoint.clone(),
        source,
    })?;
    println!("ready {}", o.mountpoint.join(FILE_NAME).display());
    std::io::stdout().flush().ok();
    let sig = signals.wait().map_err(SimdriveError::WaitSignal)?;
    drive.cut().map_err(SimdriveError::Cut)?;
    eprintln!(
        "plugpull simdrive: {sig:?}: power cut applied (seed {seed}); unmount {} now",
        o.mountpoint.display()
    );
    // Exit without unmounting, as a power cut would: the mount answers ENOTCONN.
    std::mem::forget(session);
    std::process::exit(0)
}
