//! File systems for tests that need one: `mkfs.ext4` on a device or image, and a mount
//! that is undone on drop, even when the test fails, so a failed test never leaves a
//! mount behind for the next one to trip over.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `mkfs.ext4 -q -F PATH`; panics with its stderr if it fails.
pub fn mkfs_ext4(path: &Path) {
    let mk = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(path)
        .output()
        .expect("mkfs.ext4");
    assert!(
        mk.status.success(),
        "mkfs.ext4 {}: {}",
        path.display(),
        String::from_utf8_lossy(&mk.stderr)
    );
}

/// A mount, unmounted on drop.
pub struct Mounted {
    /// Where it is mounted.
    pub at: PathBuf,
    mounted: bool,
}

impl Mounted {
    /// `mount OPTIONS SOURCE AT` (AT is created); panics with mount's stderr if it fails.
    /// `Mounted::new(&["-t", "ext4"], dev, dir)`, `Mounted::new(&["-t", "tmpfs", "-o",
    /// "size=4m"], "tmpfs", dir)`.
    pub fn new(options: &[&str], source: impl AsRef<OsStr>, at: &Path) -> Mounted {
        Mounted::try_new(options, source, at).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Mounted::new`] for a mount that may fail (a file system a power cut damaged):
    /// the error is mount's own message.
    pub fn try_new(
        options: &[&str],
        source: impl AsRef<OsStr>,
        at: &Path,
    ) -> Result<Mounted, String> {
        std::fs::create_dir_all(at).unwrap();
        let source = source.as_ref();
        let out = Command::new("mount")
            .args(options)
            .arg(source)
            .arg(at)
            .output()
            .expect("running mount");
        if !out.status.success() {
            return Err(format!(
                "mount {} on {} failed: {}",
                source.to_string_lossy(),
                at.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mounted {
            at: at.to_owned(),
            mounted: true,
        })
    }

    /// Unmounts now (lazily if it is busy or its device is gone). Idempotent.
    pub fn unmount(&mut self) {
        if self.mounted {
            super::umount(&self.at);
            self.mounted = false;
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.unmount();
    }
}
