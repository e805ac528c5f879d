//! Whether a target's bytes live in RAM. Why a separate check from the refusals: RAM is
//! not dangerous to overwrite, it makes the test meaningless, so it is a loud warning
//! that `write`, `verify` and `bench` print and report, not a refusal.

use super::super::stack;
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

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
