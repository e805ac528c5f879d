//! docs/GUIDE-simdrive.md, run as a user pastes it: the `sh` blocks of its sections "The
//! cycle, step by step", "Through a block device, and ext4" and "Clean up", in order, in
//! one bash reading them from its standard input, with the freshly built `plugpull`
//! first on PATH. The verdicts the blocks promise (their `#   VERDICT: X` comment lines)
//! must be the verdicts verify prints, in the same order, and the clean-up block must
//! leave no backing file in /dev/shm and no /tmp/pp behind.
//!
//! Why from the guide's own text: the guide is what people paste, and a block that
//! starts verify 4 ms after the drive daemon (before its "ready") gave a false
//! dead-device verdict; a copy of the commands in a test would not have caught the guide
//! drifting from what works.
//!
//! Needs root, /dev/fuse, losetup, mkfs.ext4 and e2fsck (skipped otherwise, a failure
//! with PLUGPULL_REQUIRE_ALL_TESTS=1). Uses the guide's fixed paths (/tmp/pp,
//! /dev/shm/pp-drive.img) and port 7420, as written (another free port when something
//! else holds 7420, the only change made to the text).

use crate::common;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GUIDE: &str = include_str!("../../docs/GUIDE-simdrive.md");
const SECTIONS: [&str; 3] = [
    "The cycle, step by step",
    "Through a block device, and ext4",
    "Clean up",
];
const BACKING: &str = "/dev/shm/pp-drive.img";
const SCRATCH: &str = "/tmp/pp";
const LIMIT: Duration = Duration::from_secs(300);

/// The `sh` blocks of the named `## ` sections, in the order they appear.
fn session_blocks(md: &str, sections: &[&str]) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut section = "";
    let mut block: Option<String> = None;
    for line in md.lines() {
        if let Some(b) = block.as_mut() {
            if line.trim_end() == "```" {
                blocks.push(block.take().unwrap());
            } else {
                b.push_str(line);
                b.push('\n');
            }
        } else if let Some(h) = line.strip_prefix("## ") {
            section = h.trim();
        } else if line.trim_end() == "```sh" && sections.contains(&section) {
            block = Some(String::new());
        }
    }
    blocks
}

/// The verdict words of `prefix VERDICT: X ...` lines, in order.
fn verdicts(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix("VERDICT: "))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

/// Whatever a failed or interrupted run of the guide left: mounts, loop devices over
/// the drive's file, the backing file and the scratch directory.
fn clean_up_leftovers() {
    common::umount(&Path::new(SCRATCH).join("fs"));
    let disk = Path::new(SCRATCH).join("mnt/disk.img");
    if let Ok(out) = Command::new("losetup").arg("-j").arg(&disk).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(dev) = line.split(':').next() {
                let _ = Command::new("losetup").args(["-d", dev]).status();
            }
        }
    }
    common::umount(&Path::new(SCRATCH).join("mnt"));
    let _ = std::fs::remove_file(BACKING);
    let _ = std::fs::remove_file(format!("{BACKING}.faults"));
    let _ = std::fs::remove_dir_all(SCRATCH);
}

#[test]
fn the_guide_extracts_its_session_blocks() {
    let blocks = session_blocks(GUIDE, &SECTIONS);
    assert!(blocks.len() >= 6, "found {} blocks", blocks.len());
    let all = blocks.concat();
    // Every daemon start is followed by a wait for its ready line.
    for (start, ready) in [
        ("plugpull simdrive /", "until grep -q '^ready'"),
        ("plugpull listen ", "until grep -q listening"),
    ] {
        let starts = all.lines().filter(|l| l.starts_with(start)).count();
        let waits = all.matches(ready).count();
        assert!(
            starts > 0 && starts == waits,
            "{start}: {starts} starts, {waits} waits"
        );
    }
    // Each wait reads a log of its own: a wait on a reused log file can see the line
    // the previous daemon wrote there before the new one truncates it (a race that made
    // verify start before the drive was back).
    let mut waited_on: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("until grep -q "))
        .filter_map(|l| l.split(';').next()?.split_whitespace().last())
        .collect();
    let waits = waited_on.len();
    waited_on.sort();
    waited_on.dedup();
    assert_eq!(waited_on.len(), waits, "a log file waited on twice: {all}");
    assert_eq!(verdicts(&all, "#   "), ["FAIL", "PASS", "PASS"]);
    let cleanup = blocks.last().unwrap();
    assert!(cleanup.contains(&format!("rm -f {BACKING}")), "{cleanup}");
}

#[test]
fn the_guide_runs_as_pasted_and_gets_the_verdicts_it_shows() {
    let tools = ["losetup", "mkfs.ext4", "e2fsck"];
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to mount the simulated drive (CI runs as root)",
    ) || !common::skip_unless(
        tools.iter().all(|t| common::have_tool(t)),
        "needs losetup, mkfs.ext4 and e2fsck (.ci/run installs them)",
    ) {
        return;
    }
    clean_up_leftovers();

    let mut script = session_blocks(GUIDE, &SECTIONS).concat();
    assert!(
        script.contains("127.0.0.1:7420"),
        "the guide's witness port moved"
    );
    // The guide's port, unless something else holds it on this machine (tests of other
    // binaries, a user's own witness): then the same script on a free port.
    if std::net::TcpListener::bind("127.0.0.1:7420").is_err() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        eprintln!("port 7420 is taken here; running the guide on port {port}");
        script = script.replace("127.0.0.1:7420", &format!("127.0.0.1:{port}"));
    }
    let promised = verdicts(&script, "#   ");
    let bin_dir = Path::new(common::bin()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = tempfile::NamedTempFile::new().unwrap();
    // One open file for both streams, so their lines interleave as on a terminal.
    let out = log.reopen().unwrap();
    // Its own process group, so whatever a broken step leaves running is ended with it.
    let mut bash = Command::new("bash")
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("bash");
    bash.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = bash.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // SAFETY: kill(2) on the process group this test created; no memory is involved.
    unsafe { libc::kill(-(bash.id() as i32), libc::SIGKILL) };
    let _ = bash.wait();
    let output = std::fs::read_to_string(log.path()).unwrap();
    // Kept for a look after a failure (the assertion message holds it too).
    let kept = Path::new(env!("CARGO_TARGET_TMPDIR")).join("guide-simdrive.out");
    let _ = std::fs::write(&kept, &output);
    let left_backing = Path::new(BACKING).exists();
    let left_scratch = Path::new(SCRATCH).exists();
    clean_up_leftovers();

    let ctx = format!(
        "the guide's blocks printed (kept in {}):\n{output}",
        kept.display()
    );
    assert!(status.is_some(), "not done after {LIMIT:?}; {ctx}");
    assert_eq!(verdicts(&output, ""), promised, "{ctx}");
    assert_eq!(
        output.matches("writer exit 4").count(),
        3,
        "every cut must end a writer with exit 4; {ctx}"
    );
    assert!(
        !left_backing && !left_scratch,
        "the clean-up block left {BACKING} ({left_backing}) or {SCRATCH} ({left_scratch}); {ctx}"
    );
}
