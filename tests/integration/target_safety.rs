//! The safety rules before any write, run with the built binary: what is recognised as an
//! earlier plugpull target (a whole checked sector, not four letters), what is in use
//! (loop backing files, stacked loop devices, mounts), mistyped /dev paths, targets in
//! RAM, and what a failed attempt leaves behind (nothing that blocks the retry).
//!
//! Tests that need loop devices and mounts need root: as root they always run (and
//! `PLUGPULL_REQUIRE_ALL_TESTS=1` makes a skip a failure); otherwise they say why they
//! skip on stderr past the test harness's capture.

use crate::common;
use common::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn write(witness: &str, target: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "write".to_string(),
        target.display().to_string(),
        "--witness".into(),
        witness.to_string(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    run(args)
}

fn bench(target: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<String> = [
        "bench",
        "--quiet",
        "--size",
        "16M",
        "--sweep-sizes",
        "4k-8k",
        "--time-per-size",
        "20ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(target.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    run(args)
}

fn needs_loops() -> bool {
    skip_unless(
        is_root() && have_tool("losetup") && have_tool("mkfs.ext4") && have_tool("mount"),
        "needs root, losetup, mkfs.ext4 and mount (loop devices, a mounted ext4)",
    )
}

/// An ext4 image file, `mb` MiB.
fn ext4_image(dir: &Path, mb: usize) -> PathBuf {
    let img = dir.join("fs.img");
    fs::write(&img, vec![0u8; mb << 20]).unwrap();
    mkfs_ext4(&img);
    img
}

fn blkid_type(dev: &str) -> String {
    let o = Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE", dev])
        .output()
        .expect("blkid");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

// ---- four bytes "PLUG" are not a plugpull target ----

#[test]
fn plug_prefixed_text_file_is_not_a_plugpull_target() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let p = d.path().join("plugins.conf");
    let text = "PLUGINS enabled: audio, video, net\n".repeat(100);
    fs::write(&p, &text).unwrap();
    let r = write(&w.addr, &p, &["--size", "1M", "--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("not a plugpull target") && r.stderr.contains("--destroy-data-on"),
        "{r:?}"
    );
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        text,
        "the file was changed"
    );
    let b = bench(&p, &[]);
    assert_eq!(b.code, 2, "{b:?}");
    assert_eq!(
        fs::read_to_string(&p).unwrap(),
        text,
        "bench changed the file"
    );
}

#[test]
fn ext4_with_patched_magic_is_refused() {
    if !needs_loops() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let img = ext4_image(d.path(), 32);
    let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.write_all_at(b"PLUG", 0).unwrap();
    drop(f);
    let before = fs::read(&img).unwrap();
    let lo = LoopDev::attach(&img, false);
    assert_eq!(
        blkid_type(lo.dev()),
        "ext4",
        "the test needs blkid to see ext4"
    );
    let r = write(&w.addr, Path::new(lo.dev()), &["--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("ext2/3/4"), "{r:?}");
    let b = bench(Path::new(lo.dev()), &[]);
    assert_eq!(b.code, 2, "{b:?}");
    drop(lo);
    assert_eq!(
        fs::read(&img).unwrap(),
        before,
        "the ext4 image was changed"
    );
}

// ---- what is in use is refused, even with --destroy-data-on ----

#[test]
fn backing_file_of_mounted_loop_is_refused() {
    if !needs_loops() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let img = ext4_image(d.path(), 32);
    let lo = LoopDev::attach(&img, false);
    let mnt = Mounted::new(&[], lo.dev(), &d.path().join("mnt"));
    fs::write(mnt.at.join("precious"), b"keep me").unwrap();
    let s = img.display().to_string();
    let r = write(&w.addr, &img, &["--count", "10", "--destroy-data-on", &s]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(lo.dev()) && r.stderr.contains("mounted"),
        "{r:?}"
    );
    let b = bench(&img, &["--destroy-data-on", &s]);
    assert_eq!(b.code, 2, "{b:?}");
    drop(mnt);
    drop(lo);
    assert_eq!(blkid_type(&s), "ext4", "the file system was overwritten");
}

#[test]
fn backing_file_of_unmounted_loop_is_refused() {
    if !needs_loops() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let img = d.path().join("plain.img");
    fs::write(&img, vec![7u8; 4 << 20]).unwrap();
    let lo = LoopDev::attach(&img, false);
    let s = img.display().to_string();
    let r = write(&w.addr, &img, &["--count", "10", "--destroy-data-on", &s]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(lo.dev()) && r.stderr.contains("losetup -d"),
        "{r:?}"
    );
    drop(lo);
    assert!(
        fs::read(&img).unwrap().iter().all(|&b| b == 7),
        "a file in use by a loop device was changed"
    );
}

#[test]
fn hard_link_to_deleted_backing_file_of_mounted_loop_is_refused() {
    if !needs_loops() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let img = ext4_image(d.path(), 32);
    let link = d.path().join("link.img");
    fs::hard_link(&img, &link).unwrap();
    let lo = LoopDev::attach(&img, false);
    let mnt = Mounted::new(&[], lo.dev(), &d.path().join("mnt"));
    fs::write(mnt.at.join("precious"), b"keep me").unwrap();
    // The name the loop device was set up with is gone; the file lives on as `link`.
    fs::remove_file(&img).unwrap();
    let s = link.display().to_string();
    let r = write(&w.addr, &link, &["--count", "10", "--destroy-data-on", &s]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(lo.dev()) && r.stderr.contains("mounted"),
        "{r:?}"
    );
    let b = bench(&link, &["--destroy-data-on", &s]);
    assert_eq!(b.code, 2, "{b:?}");
    drop(mnt);
    drop(lo);
    assert_eq!(blkid_type(&s), "ext4", "the file system was overwritten");
}

#[test]
fn stacked_loop_on_mounted_loop_is_refused() {
    if !needs_loops() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let img = ext4_image(d.path(), 32);
    let lower = LoopDev::attach(&img, false);
    let upper = LoopDev::attach(Path::new(lower.dev()), false);
    let mnt = Mounted::new(&[], lower.dev(), &d.path().join("mnt"));
    let r = write(
        &w.addr,
        Path::new(upper.dev()),
        &["--count", "10", "--destroy-data-on", upper.dev()],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(lower.dev()) && r.stderr.contains("mounted"),
        "{r:?}"
    );
    // The other way round: the lower device while a loop device sits on it.
    drop(mnt);
    let r = write(
        &w.addr,
        Path::new(lower.dev()),
        &["--count", "10", "--destroy-data-on", lower.dev()],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains(upper.dev()), "{r:?}");
    drop(upper);
    drop(lower);
    assert_eq!(blkid_type(&img.display().to_string()), "ext4");
}

// ---- a mistyped /dev path, and targets in RAM ----

#[test]
fn mistyped_dev_path_is_not_created() {
    let name = format!("/dev/sdzz-plugpull-test-{}", std::process::id());
    let p = Path::new(&name);
    let r = write("127.0.0.1:9", p, &["--size", "1M", "--count", "1"]);
    let created = p.exists();
    let _ = fs::remove_file(p);
    assert!(!created, "write created {name}: {r:?}");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("does not exist") && r.stderr.contains("Block devices"),
        "{r:?}"
    );
    let b = bench(p, &[]);
    let created = p.exists();
    let _ = fs::remove_file(p);
    assert!(!created, "bench created {name}: {b:?}");
    assert_eq!(b.code, 2, "{b:?}");
    assert!(b.stderr.contains("does not exist"), "{b:?}");
}

#[test]
fn tmpfs_target_warns_ram() {
    let shm = Path::new("/dev/shm");
    let on_tmpfs = nix::sys::statfs::statfs(shm)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    if !skip_unless(on_tmpfs, "needs /dev/shm on tmpfs") {
        return;
    }
    let d = tempfile::tempdir_in(shm).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let r = write(&w.addr, &t, &["--size", "1M", "--count", "20"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("this is RAM"), "{r:?}");
    assert!(
        r.json()["ram_warning"]
            .as_str()
            .is_some_and(|s| s.contains("this is RAM")),
        "{r:?}"
    );
    let v = run([
        "verify",
        &t.display().to_string(),
        "--rehearsal",
        "--witness",
        &w.addr,
        "--json",
    ]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stderr.contains("this is RAM"), "{v:?}");
    assert!(
        v.json()["ram_warning"]
            .as_str()
            .is_some_and(|s| s.contains("this is RAM")),
        "{v:?}"
    );
    let text = run([
        "verify",
        &t.display().to_string(),
        "--rehearsal",
        "--witness",
        &w.addr,
    ]);
    assert!(text.stdout.contains("this is RAM"), "{text:?}");
    let b = bench(&d.path().join("b.img"), &[]);
    assert_eq!(b.code, 0, "{b:?}");
    assert!(b.stderr.contains("this is RAM"), "{b:?}");
    // A file on a disk file system gets no warning.
    let disk = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let r = write(
        &w.addr,
        &disk.path().join("t.img"),
        &["--size", "1M", "--count", "5"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.json()["ram_warning"].is_null(), "{r:?}");
}

// ---- a failed attempt leaves nothing that blocks the retry ----

/// The retry of a failed attempt on `t` succeeds (with a witness that is up).
fn retry_succeeds(t: &Path, w: &WitnessProc) {
    let r = write(&w.addr, t, &["--size", "1M", "--count", "10"]);
    assert_eq!(r.code, 0, "the retry was refused: {r:?}");
    assert_eq!(r.json()["records_acked"], 10);
}

#[test]
fn failed_write_leaves_no_file_blocking_retry_witness_unreachable() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.img");
    let nobody = format!("127.0.0.1:{}", free_port());
    let r = write(&nobody, &t, &["--size", "1M", "--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cannot reach the witness"), "{r:?}");
    assert!(!t.exists(), "the failed attempt left {}", t.display());
    retry_succeeds(&t, &WitnessProc::start(&d.path().join("w")));
}

#[test]
fn failed_write_leaves_no_file_blocking_retry_bad_witness_address() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.img");
    let r = write("localhost", &t, &["--size", "1M", "--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("HOST:PORT") && !r.stderr.contains("is `plugpull listen` running"),
        "a bad address is not a witness that is down: {r:?}"
    );
    assert!(!t.exists(), "the failed attempt left {}", t.display());
    retry_succeeds(&t, &WitnessProc::start(&d.path().join("w")));
}

#[test]
fn failed_write_leaves_no_file_blocking_retry_size_too_small() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    for size in ["100", "1000", "2k"] {
        let r = write(&w.addr, &t, &["--size", size, "--count", "10"]);
        assert_eq!(r.code, 2, "--size {size}: {r:?}");
        assert!(r.stderr.contains("--size"), "{r:?}");
        assert!(!t.exists(), "--size {size} left {}", t.display());
    }
    retry_succeeds(&t, &w);
}

#[test]
fn failed_write_leaves_no_file_blocking_retry_no_space() {
    if !skip_unless(
        is_root() && have_tool("mount"),
        "needs root and mount (a small tmpfs)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let small = d.path().join("small");
    fs::create_dir(&small).unwrap();
    let _m = Mounted::new(&["-t", "tmpfs", "-o", "size=4m"], "tmpfs", &small);
    let t = small.join("t.img");
    let r = write(&w.addr, &t, &["--size", "64M", "--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("free"), "{r:?}");
    assert!(!t.exists(), "the failed attempt left {}", t.display());
    retry_succeeds(&t, &w);
}

/// Starts `write` of a big region to `t` and waits until the file exists (preallocation
/// has begun).
fn start_big_write(w: &WitnessProc, t: &Path) -> Child {
    let child = Command::new(bin())
        .args(["write", &t.display().to_string(), "--witness", &w.addr])
        .args(["--size", "4G", "--count", "10", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while fs::metadata(t).map(|m| m.len()).unwrap_or(0) < 8 << 20 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "preallocation did not start"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

#[test]
fn failed_write_leaves_no_file_blocking_retry_ctrl_c_in_preallocation() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let child = start_big_write(&w, &t);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !t.exists(),
        "Ctrl-C in preallocation left {} ({stderr})",
        t.display()
    );
    assert!(stderr.contains("removed"), "{stderr}");
    retry_succeeds(&t, &w);
}

#[test]
fn killed_write_leaves_a_file_recognised_on_retry() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let mut child = start_big_write(&w, &t);
    child.kill().unwrap();
    let _ = child.wait();
    assert!(t.exists(), "the test needs the killed attempt's file");
    // The file keeps its size from the big attempt; the retry uses it as it is.
    let r = write(&w.addr, &t, &["--count", "10"]);
    assert_eq!(r.code, 0, "the retry was refused: {r:?}");
    assert_eq!(r.json()["records_acked"], 10);
}
