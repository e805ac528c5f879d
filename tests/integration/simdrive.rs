//! The simulated drive through the real binary and a real FUSE mount: write with O_DIRECT
//! and fdatasync, SIGKILL the daemon (the power cut), unmount, start a new daemon on the
//! same backing file (power on), read back on the fresh mount.
//!
//! Needs root and /dev/fuse; without them each test prints why it was skipped (and fails
//! when PLUGPULL_REQUIRE_ALL_TESTS=1, as in CI): see `common::skip_unless`.

use crate::common;

use common::SimDrive;
use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The simulated drive of this file: 8 MiB.
fn mount(dir: &Path, profile: &str, seed: u64) -> SimDrive {
    SimDrive::start(dir, profile, seed, 8)
}

fn block(i: u64) -> Vec<u8> {
    (0..4096u64).map(|j| (i * 31 + j * 7 + 1) as u8).collect()
}

/// Aligned buffer for O_DIRECT.
fn aligned(data: &[u8]) -> (Vec<u8>, usize) {
    let mut v = vec![0u8; data.len() + 4096];
    let off = v.as_ptr().align_offset(4096);
    v[off..off + data.len()].copy_from_slice(data);
    (v, off)
}

/// Writes blocks 0..8 with fdatasync after each, blocks 8..16 without; cuts; powers on.
/// Returns (flushed blocks intact, unflushed blocks intact).
fn cycle(profile: &str, seed: u64) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut m = mount(dir.path(), profile, seed);
    {
        let f = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(m.file())
            .unwrap();
        for i in 0..16u64 {
            let (buf, off) = aligned(&block(i));
            f.write_all_at(&buf[off..off + 4096], i * 4096).unwrap();
            if i < 8 {
                f.sync_data().unwrap();
            }
        }
    }
    m.power_off();
    let m2 = mount(dir.path(), "honest", seed + 1);
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(m2.file())
        .unwrap();
    let mut counts = (0, 0);
    for i in 0..16u64 {
        let (mut buf, off) = aligned(&[0u8; 4096]);
        f.read_exact_at(&mut buf[off..off + 4096], i * 4096)
            .unwrap();
        if buf[off..off + 4096] == block(i)[..] {
            if i < 8 { counts.0 += 1 } else { counts.1 += 1 }
        }
    }
    let faults = plugpull::sim::resolve(&dir.path().join("oracle.jsonl")).unwrap();
    if profile == "honest" {
        assert!(faults.is_empty(), "seed {seed}: honest oracle {faults:?}");
    } else {
        // Every flushed block that did not survive is named by the oracle.
        assert_eq!(
            faults.iter().map(|f| f.records.len()).sum::<usize>(),
            0,
            "seed {seed}: blocks are not plugpull records, so no records are named"
        );
        assert_eq!(faults.len(), 8 - counts.0, "seed {seed}: {faults:?}");
    }
    (counts.0, counts.1)
}

#[test]
fn honest_keeps_flushed_writes_across_sigkill() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to mount the simulated drive over FUSE",
    ) {
        return;
    }
    for seed in 1..4 {
        let (flushed, _unflushed) = cycle("honest", seed);
        assert_eq!(flushed, 8, "seed {seed}: honest drive lost flushed writes");
    }
}

#[test]
fn lying_loses_flushed_writes_across_sigkill() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to mount the simulated drive over FUSE",
    ) {
        return;
    }
    let (flushed, unflushed) = cycle("lying,early_p=0", 9);
    assert_eq!(flushed, 0, "seed 9: lying drive kept flushed writes");
    assert_eq!(unflushed, 0);
}

#[test]
fn deterministic_cut_with_sigusr1() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to mount the simulated drive over FUSE",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut m = mount(dir.path(), "honest", 5);
    {
        let f = OpenOptions::new().write(true).open(m.file()).unwrap();
        f.write_all_at(&block(1), 0).unwrap();
        f.sync_data().unwrap();
    }
    let pid = m.pid() as i32;
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    let status = m.wait();
    assert!(status.success());
    m.power_off();
    let text = std::fs::read_to_string(dir.path().join("oracle.jsonl")).unwrap();
    assert!(text.contains("\"event\":\"cut\""), "{text}");
    let m2 = mount(dir.path(), "honest", 6);
    let mut got = vec![0u8; 4096];
    let f = OpenOptions::new().read(true).open(m2.file()).unwrap();
    f.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(got, block(1));
}

/// `plugpull simdrive` with `args`, expected to refuse before it mounts anything. A
/// build that does not refuse serves instead: it is stopped after a while, its mount
/// undone, and `None` returned.
fn simdrive_refusal(dir: &Path, args: &[&str]) -> Option<(i32, String)> {
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mut child = std::process::Command::new(common::bin())
        .arg("simdrive")
        .arg(&mnt)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(20) {
        if child.try_wait().unwrap().is_some() {
            let o = child.wait_with_output().unwrap();
            return Some((
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    common::umount(&mnt);
    None
}

#[test]
fn backing_symlink_to_a_users_file_is_refused_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let notes = d.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    let link = d.path().join("link.img");
    std::os::unix::fs::symlink(&notes, &link).unwrap();
    let backing = ["--backing", link.to_str().unwrap(), "--size", "1M"];
    let r = simdrive_refusal(d.path(), &backing);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    let (code, err) = r.expect("simdrive served through the link");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    // The file itself, named directly: not an image of this size, so not taken either.
    let backing = ["--backing", notes.to_str().unwrap(), "--size", "1M"];
    let r = simdrive_refusal(d.path(), &backing);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    let (code, err) = r.expect("simdrive served on a text file");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("not this drive's image"), "{err}");
}

#[test]
fn oracle_naming_a_users_file_is_refused_unchanged() {
    let d = tempfile::tempdir().unwrap();
    let notes = d.path().join("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    let img = d.path().join("drive.img");
    let args = [
        "--backing",
        img.to_str().unwrap(),
        "--size",
        "1M",
        "--oracle",
        notes.to_str().unwrap(),
    ];
    let r = simdrive_refusal(d.path(), &args);
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    let (code, err) = r.expect("simdrive served with a text file as its oracle");
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("not an oracle log"), "{err}");
}
