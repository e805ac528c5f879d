//! A whole storage stack for power-cut tests of file systems: ext4, XFS or btrfs on a
//! loop device whose backing file is the simulated drive's FUSE file. The cut is the
//! drive's (SIGKILL of its daemon, [`FsStack::cut`]); power on is a new daemon on the
//! same backing file, a new loop device over it and a plain mount, which is where the
//! file system's own recovery runs (ext4 and XFS replay their journal, btrfs its log
//! tree), so verify always reads what the file system recovered, as a user would.
//!
//! Why each piece is here:
//! - the loop device gives the file system a real block device with a volatile write
//!   cache (`write back`, no FUA): its cache flushes reach the drive model as FSYNC, so
//!   the profile decides what a flush keeps (docs/GUIDE-simdrive.md);
//! - the file system is made before the drive's first power on, so a cut only ever hits
//!   what the test wrote, never mkfs's own writes;
//! - teardown order is fixed by the field order (file system, then loop device, then
//!   the drive) and runs on drop, so a failed assertion leaves no mount, loop device or
//!   daemon behind. Loop device numbers are never assumed (see [`super::loopdev`]).
//!
//! When a drive lied, the file system may not mount at all. Then [`FsStack::power_on`]
//! does what a user would: it runs the file system's repair tool once and mounts again
//! (see [`FsKind::repair`]); if that fails too, the stack stays powered with nothing
//! mounted and says so ([`Mount::Unmountable`]). A test then still runs verify on the
//! bare mount point: acknowledged data it cannot read is a failure (verify FAILs, a dead
//! target or missing files), never an error that hides the drive's lie.

use super::{LoopDev, Mounted, SimDrive};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The file systems the stack can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
}

impl FsKind {
    /// The name `mount -t` and `mkfs.` use.
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
        }
    }

    /// The tools the stack runs for this file system (besides losetup and mount).
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            FsKind::Ext4 => &["losetup", "mkfs.ext4", "e2fsck"],
            FsKind::Xfs => &["losetup", "mkfs.xfs", "xfs_repair"],
            FsKind::Btrfs => &["losetup", "mkfs.btrfs", "btrfs"],
        }
    }

    /// The smallest simulated drive the default `mkfs` accepts, rounded up: mkfs.xfs
    /// refuses a file system under 300 MB since xfsprogs 5.19 and mkfs.btrfs a device
    /// under 114 MiB. The drive's backing file is sparse, so size costs nothing until
    /// written.
    pub fn drive_mib(self) -> u64 {
        match self {
            FsKind::Ext4 => 64,
            FsKind::Xfs => 320,
            FsKind::Btrfs => 128,
        }
    }

    /// Whether this machine can run the stack: the kernel knows the file system and the
    /// tools are installed.
    pub fn available(self) -> Result<(), String> {
        let known = std::fs::read_to_string("/proc/filesystems")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().last() == Some(self.name()));
        if !known {
            return Err(format!("the kernel has no {} support", self.name()));
        }
        let missing: Vec<&str> = self
            .tools()
            .iter()
            .copied()
            .filter(|t| !tool_runs(t))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("{} not installed", missing.join(", ")))
        }
    }

    /// Makes the file system on `dev` (a device or an image file) with its defaults;
    /// panics with mkfs's output.
    pub fn mkfs(self, dev: &Path) {
        let mut c = Command::new(format!("mkfs.{}", self.name()));
        match self {
            FsKind::Ext4 => c.args(["-q", "-F"]),
            FsKind::Xfs | FsKind::Btrfs => c.args(["-q", "-f"]),
        };
        c.arg(dev);
        let mut out = c.output().expect("running mkfs");
        // mkfs.btrfs stats every mount point to see whether `dev` is mounted, and fails
        // on a FUSE mount whose daemon another test just killed (its power cut) before
        // that test unmounts it: "cannot check mount status ... Transport endpoint is not
        // connected". Seen once in CI; the stale mount is gone within moments.
        for _ in 0..10 {
            let busy = String::from_utf8_lossy(&out.stderr).contains("cannot check mount status");
            if out.status.success() || !busy {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
            out = c.output().expect("running mkfs");
        }
        assert!(
            out.status.success(),
            "mkfs.{} {}: {}{}",
            self.name(),
            dev.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// What a user runs when the file system does not mount after a power cut, and
    /// whether it says the file system is consistent now; the output is returned for the
    /// test's log. ext4: `e2fsck -fy` (exit 0 to 2: consistent now). XFS: `xfs_repair`,
    /// and `xfs_repair -L` (zero the log, losing its unreplayed transactions) when it
    /// refuses because the log is dirty and cannot be replayed by a mount (exit 2).
    /// btrfs: `btrfs rescue zero-log` (drop a log tree whose replay failed); btrfs has
    /// no safe general repair (`btrfs check --repair` is documented as a last resort),
    /// so the mount after it is the real test.
    pub fn repair(self, dev: &Path) -> (bool, String) {
        let run = |prog: &str, args: &[&str]| {
            let out = Command::new(prog)
                .args(args)
                .arg(dev)
                .output()
                .unwrap_or_else(|e| panic!("running {prog}: {e}"));
            let code = out.status.code().unwrap_or(-1);
            let text = format!(
                "$ {prog} {} {}\n{}{}(exit {code})\n",
                args.join(" "),
                dev.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            (code, text)
        };
        match self {
            FsKind::Ext4 => {
                let (code, text) = run("e2fsck", &["-fy"]);
                ((0..=2).contains(&code), text)
            }
            FsKind::Xfs => {
                let (code, mut text) = run("xfs_repair", &[]);
                if code == 2 {
                    let (code, more) = run("xfs_repair", &["-L"]);
                    text.push_str(&more);
                    return (code == 0, text);
                }
                (code == 0, text)
            }
            FsKind::Btrfs => {
                let (code, text) = run("btrfs", &["rescue", "zero-log"]);
                (code == 0, text)
            }
        }
    }
}

/// Whether `tool` can be started (mkfs tools have no common `--version`, so "found on
/// PATH and executable" is the test).
fn tool_runs(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            let p = d.join(tool);
            std::fs::metadata(&p).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
    }) || ["/sbin", "/usr/sbin"]
        .iter()
        .any(|d| Path::new(d).join(tool).exists())
}

/// How the file system came up after power on. `repair` (what the repair tool said) is
/// read only by the `{:?}` of a failed assertion, which dead-code analysis does not
/// count.
#[derive(Debug)]
#[allow(dead_code)]
pub enum Mount {
    /// A plain mount worked (with whatever journal or log replay it did).
    Clean,
    /// The plain mount failed; the repair tool ran and the second mount worked.
    Repaired { error: String, repair: String },
    /// Nothing would mount: the mount point is a bare directory.
    Unmountable { error: String, repair: String },
}

impl Mount {
    pub fn is_clean(&self) -> bool {
        matches!(self, Mount::Clean)
    }

    /// One line for the test's log.
    pub fn describe(&self) -> String {
        match self {
            Mount::Clean => "mounted".into(),
            Mount::Repaired { error, .. } => format!("mounted after repair ({error})"),
            Mount::Unmountable { error, .. } => format!("unmountable even after repair ({error})"),
        }
    }
}

/// A file system on a loop device on the simulated drive, in `dir` (the drive's files,
/// `fs/` the mount point, `repair-N.log` for every repair). Torn down on drop.
pub struct FsStack {
    // Field order is teardown order: the file system, then the loop device, then the
    // drive.
    fs: Option<Mounted>,
    lp: Option<LoopDev>,
    drive: Option<SimDrive>,
    dir: PathBuf,
    kind: FsKind,
    /// Power-ons so far: names repair logs.
    starts: u32,
}

impl FsStack {
    /// A fresh drive in `dir` that comes with a `kind` file system on it, powered off.
    /// mkfs runs on the drive's backing file, which is the drive's medium (src/sim/
    /// media.rs), so this is the same as mkfs on an honest drive and a clean power off,
    /// without pushing mkfs's writes through the drive model: that took 16 s for ext4 on
    /// 64 MiB (its discard step) and 17 s for XFS on 320 MiB (64 MiB of log zeroing) on
    /// the loaded CI machine, for nothing a test checks.
    pub fn create(dir: &Path, kind: FsKind) -> FsStack {
        std::fs::create_dir_all(dir).unwrap();
        let image = dir.join(super::simdrive::BACKING_NAME);
        let f = std::fs::File::create(&image).unwrap();
        f.set_len(kind.drive_mib() << 20).unwrap();
        drop(f);
        kind.mkfs(&image);
        FsStack {
            fs: None,
            lp: None,
            drive: None,
            dir: dir.to_owned(),
            kind,
            starts: 0,
        }
    }

    pub fn kind(&self) -> FsKind {
        self.kind
    }

    /// Where the file system is mounted (a bare directory when it is not).
    pub fn mount_point(&self) -> PathBuf {
        self.dir.join("fs")
    }

    /// Powers on a drive with `profile` and `seed`, attaches a loop device and mounts
    /// the file system (repairing once if the plain mount fails, see the module docs).
    /// After a [`FsStack::cut`] it first tears the dead stack down; on a live one it
    /// pulls the plug the same way (call [`FsStack::power_off_clean`] first for a
    /// clean stop).
    pub fn power_on(&mut self, profile: &str, seed: u64) -> Mount {
        self.teardown();
        self.starts += 1;
        let drive = SimDrive::start(&self.dir, profile, seed, self.kind.drive_mib());
        let lp = LoopDev::attach(&drive.file(), true);
        let dev = lp.path();
        self.drive = Some(drive);
        self.lp = Some(lp);
        let at = self.mount_point();
        let opts = ["-t", self.kind.name()];
        let error = match Mounted::try_new(&opts, &dev, &at) {
            Ok(m) => {
                self.fs = Some(m);
                return Mount::Clean;
            }
            Err(e) => e,
        };
        let (consistent, repair) = self.kind.repair(&dev);
        let log = self.dir.join(format!("repair-{}.log", self.starts));
        let _ = std::fs::write(&log, format!("{error}\n{repair}"));
        if consistent && let Ok(m) = Mounted::try_new(&opts, &dev, &at) {
            self.fs = Some(m);
            return Mount::Repaired { error, repair };
        }
        Mount::Unmountable { error, repair }
    }

    /// The power cut: SIGKILL of the drive's daemon while the file system is mounted.
    /// Everything above it stays until the next [`FsStack::power_on`] (or drop) tears it
    /// down as a reboot would: the file system is unmounted (its writes fail now, and the
    /// kernel logs I/O errors), the loop device detached, the dead FUSE mount removed. A
    /// test waits for its writer to see the cut and exit first, so the unmount is not
    /// busy.
    pub fn cut(&mut self) {
        if let Some(d) = &mut self.drive {
            d.cut();
        }
    }

    /// A clean power off: unmount (the file system writes back and syncs everything),
    /// detach, then stop the drive.
    pub fn power_off_clean(&mut self) {
        if let Some(mut fs) = self.fs.take() {
            fs.unmount();
        }
        if let Some(mut lp) = self.lp.take() {
            lp.detach();
        }
        self.flush_drive();
        self.teardown();
    }

    fn teardown(&mut self) {
        if let Some(mut fs) = self.fs.take() {
            fs.unmount();
        }
        if let Some(mut lp) = self.lp.take() {
            lp.detach();
        }
        if let Some(mut d) = self.drive.take() {
            d.power_off();
        }
    }

    /// Asks the drive itself to flush its cache (an fsync of the FUSE file): after a
    /// clean unmount nothing the file system wrote may be left only in the drive's cache
    /// when the daemon stops. Fails quietly on a dead drive (nothing to save there).
    fn flush_drive(&self) {
        if let Some(d) = &self.drive
            && let Ok(f) = std::fs::OpenOptions::new().write(true).open(d.file())
        {
            let _ = f.sync_all();
        }
    }
}
