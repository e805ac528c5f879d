//! Loop devices for tests that need a real block device. Other processes on this machine
//! attach and detach loop devices at any time, and a freed /dev/loopN is often taken at
//! once, so a test never assumes a device number: `losetup -f --show` picks one and says
//! which, and the device is only ever touched while it still backs our file (sysfs
//! `loop/backing_file`). A detach never retries blindly by number, which could detach
//! another process's device.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A loop device over a file, detached on drop.
pub struct LoopDev {
    dev: Option<String>,
    /// The backing file as the kernel names it (absolute, symlinks resolved).
    file: PathBuf,
}

impl LoopDev {
    /// `losetup -f --show --direct-io=on|off FILE`; panics if losetup fails or the device
    /// it named does not back `file` right after.
    pub fn attach(file: &Path, direct: bool) -> LoopDev {
        let out = Command::new("losetup")
            .args([
                "-f",
                "--show",
                &format!("--direct-io={}", if direct { "on" } else { "off" }),
            ])
            .arg(file)
            .output()
            .expect("running losetup");
        assert!(
            out.status.success(),
            "losetup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lp = LoopDev {
            dev: Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
            file: std::fs::canonicalize(file).unwrap_or_else(|_| file.to_owned()),
        };
        assert!(
            lp.is_ours(),
            "{} does not back {} right after losetup attached it",
            lp.dev(),
            file.display()
        );
        lp
    }

    /// The device node, `/dev/loopN`.
    pub fn dev(&self) -> &str {
        self.dev.as_deref().expect("the loop device is attached")
    }

    /// The device node as a path.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(self.dev())
    }

    /// A sysfs attribute of the loop device (`backing_file`, `dio`).
    fn sysfs(dev: &str, name: &str) -> Option<String> {
        let n = dev.strip_prefix("/dev/")?;
        std::fs::read_to_string(format!("/sys/block/{n}/loop/{name}"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Whether the device still backs the file we attached (also once that name is
    /// unlinked: the kernel then shows "PATH (deleted)").
    pub fn is_ours(&self) -> bool {
        self.dev.as_deref().is_some_and(|d| {
            Self::sysfs(d, "backing_file").is_some_and(|b| {
                let b = b.strip_suffix(" (deleted)").unwrap_or(&b);
                Path::new(b) == self.file
            })
        })
    }

    /// Whether the kernel does direct I/O to the backing file (`--direct-io=on` took).
    pub fn direct_io(&self) -> bool {
        self.dev
            .as_deref()
            .and_then(|d| Self::sysfs(d, "dio"))
            .is_some_and(|v| v == "1")
    }

    /// `losetup -d`, retried only while the device is still ours (an opener may hold it
    /// briefly). Idempotent.
    pub fn detach(&mut self) {
        for _ in 0..50 {
            if !self.is_ours() {
                self.dev = None;
                return;
            }
            let ok = Command::new("losetup")
                .arg("-d")
                .arg(self.path())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                self.dev = None;
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(d) = self.dev.take() {
            eprintln!("warning: could not detach {d}");
        }
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        self.detach();
    }
}
