//! The simulated drive for tests: a `plugpull simdrive` FUSE daemon over a backing file,
//! mounted on `DIR/mnt`, with its oracle in `DIR/oracle.jsonl`. A power cut is a SIGKILL
//! of the daemon ([`SimDrive::cut`]); power on is a new daemon on the same directory. The
//! mount is always cleaned up on drop, even when the test fails, because a dead FUSE
//! mount left behind hangs whatever touches it next.

use super::bin;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The file the daemon serves inside its mount.
const FILE_NAME: &str = "disk.img";

/// The drive's medium in its directory (`--backing`): what survives a cut.
pub const BACKING_NAME: &str = "backing.img";

/// A running `plugpull simdrive` and its mount; killed and unmounted on drop.
pub struct SimDrive {
    child: Option<Child>,
    mnt: PathBuf,
    mounted: bool,
}

impl SimDrive {
    /// Powers on a drive of `size_mib` MiB with `profile` and `seed`, whose state lives in
    /// `dir` (`backing.img`, `oracle.jsonl`, and one `simdrive-N.log` of stderr per start),
    /// and waits until the daemon says it is ready.
    pub fn start(dir: &Path, profile: &str, seed: u64, size_mib: u64) -> SimDrive {
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let n = (1..)
            .find(|n| !dir.join(format!("simdrive-{n}.log")).exists())
            .unwrap();
        let log_path = dir.join(format!("simdrive-{n}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new(bin())
            .arg("simdrive")
            .arg(&mnt)
            .arg("--backing")
            .arg(dir.join(BACKING_NAME))
            .args(["--size", &format!("{size_mib}M"), "--profile", profile])
            .args(["--seed", &seed.to_string()])
            .arg("--oracle")
            .arg(dir.join("oracle.jsonl"))
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("starting plugpull simdrive");
        let out = child.stdout.take().unwrap();
        let mut d = SimDrive {
            child: Some(child),
            mnt,
            mounted: true,
        };
        for line in BufReader::new(out).lines() {
            if line.unwrap().starts_with("ready") {
                return d;
            }
        }
        d.power_off();
        panic!(
            "seed {seed}: simdrive ({profile}) exited before it was ready:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
    }

    /// The drive: the file the daemon serves.
    pub fn file(&self) -> PathBuf {
        self.mnt.join(FILE_NAME)
    }

    /// The daemon's process id (to signal it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon is running").id()
    }

    /// Waits for the daemon to exit by itself (after a signal) and returns its status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("the daemon is running");
        c.wait().unwrap()
    }

    /// The power cut: SIGKILL only (the mount stays, dead, until [`Self::unmount`]).
    pub fn cut(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Unmounts the (dead or live) mount. Idempotent.
    pub fn unmount(&mut self) {
        if self.mounted {
            super::umount(&self.mnt);
            self.mounted = false;
        }
    }

    /// The cut and the unmount: what a test does before it powers the drive on again.
    pub fn power_off(&mut self) {
        self.cut();
        self.unmount();
    }
}

impl Drop for SimDrive {
    fn drop(&mut self) {
        self.power_off();
    }
}
