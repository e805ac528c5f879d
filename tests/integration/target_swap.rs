//! A target is opened once, checked on that handle, and that handle is written: what a
//! name points to after the checks does not matter. Each test holds the witness's reply
//! to the writer's handshake (a proxy that forwards the writer's bytes at once and the
//! witness's only when told), changes what the target's name means while the writer
//! waits (a symlink put in its place, a loop number re-attached to another image), then
//! lets the handshake finish and checks the thing now behind the name is untouched.
//! A static check makes sure no other code opens a write target by name.

use crate::common;
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use std::{fs, thread};

/// A one-connection proxy to a witness that holds the witness's bytes back.
struct HeldHandshake {
    addr: String,
    /// Fires once the writer has sent its first bytes (its checks are done).
    hello: mpsc::Receiver<()>,
    release: mpsc::Sender<()>,
}

fn held_handshake(witness: &str) -> HeldHandshake {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let witness = witness.to_string();
    let (hello_tx, hello) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    thread::spawn(move || {
        let Ok((mut writer, _)) = l.accept() else {
            return;
        };
        let mut w = TcpStream::connect(&witness).unwrap();
        let (mut writer2, mut w2) = (writer.try_clone().unwrap(), w.try_clone().unwrap());
        thread::spawn(move || {
            let mut buf = [0u8; 65536];
            let mut first = true;
            while let Ok(n) = writer2.read(&mut buf) {
                if n == 0 || w2.write_all(&buf[..n]).is_err() {
                    break;
                }
                if first {
                    first = false;
                    let _ = hello_tx.send(());
                }
            }
            let _ = w2.shutdown(std::net::Shutdown::Write);
        });
        let _ = release_rx.recv();
        let _ = std::io::copy(&mut w, &mut writer);
        let _ = writer.shutdown(std::net::Shutdown::Write);
    });
    HeldHandshake {
        addr,
        hello,
        release,
    }
}

fn start_write(witness: &str, target: &Path) -> Child {
    Command::new(bin())
        .arg("write")
        .arg(target)
        .args([
            "--witness",
            witness,
            "--count",
            "20",
            "--size",
            "1M",
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the writer's handshake, runs `swap` while the witness's answer is held,
/// lets it through, and returns the writer's end.
fn swap_during_handshake(w: &WitnessProc, target: &Path, swap: impl FnOnce()) -> Run {
    let proxy = held_handshake(&w.addr);
    let mut child = start_write(&proxy.addr, target);
    if proxy.hello.recv_timeout(Duration::from_secs(30)).is_err() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "the writer never started its handshake: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    swap();
    proxy.release.send(()).unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the writer did not end"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A user's file: 4 MiB that must survive.
fn victim(dir: &Path) -> (PathBuf, Vec<u8>) {
    let p = dir.join("thesis.bin");
    let bytes: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8).collect();
    fs::write(&p, &bytes).unwrap();
    (p, bytes)
}

#[test]
fn a_symlink_swapped_in_during_the_handshake_is_not_written() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let (v, bytes) = victim(d.path());
    let target = d.path().join("new-target.img");
    let r = swap_during_handshake(&w, &target, || {
        std::os::unix::fs::symlink(&v, &target).unwrap();
    });
    assert_eq!(
        fs::read(&v).unwrap(),
        bytes,
        "the user's file was written: {r:?}"
    );
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("appeared"), "{r:?}");
    assert!(
        fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the symlink put there was removed"
    );
}

#[test]
fn an_existing_target_replaced_during_the_handshake_is_not_written() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("target.img");
    let first = run([
        "write",
        target.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--count",
        "5",
        "--size",
        "1M",
        "--quiet",
    ]);
    assert_eq!(first.code, 0, "{first:?}");
    let (v, bytes) = victim(d.path());
    let r = swap_during_handshake(&w, &target, || {
        fs::remove_file(&target).unwrap();
        std::os::unix::fs::symlink(&v, &target).unwrap();
    });
    assert_eq!(
        fs::read(&v).unwrap(),
        bytes,
        "the user's file was written: {r:?}"
    );
    assert_eq!(
        r.code, 0,
        "the checked (now unlinked) target is written: {r:?}"
    );
}

fn backing_file(dev: &str) -> Option<PathBuf> {
    let n = dev.strip_prefix("/dev/")?;
    fs::read_to_string(format!("/sys/block/{n}/loop/backing_file"))
        .ok()
        .map(|s| PathBuf::from(s.trim()))
}

#[test]
fn a_loop_number_reattached_during_the_handshake_is_not_written() {
    if !skip_unless(
        is_root() && have_tool("losetup") && have_tool("mkfs.ext4"),
        "needs root, losetup and mkfs.ext4",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let checked = d.path().join("empty.img");
    fs::File::create(&checked)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let other = d.path().join("ext4.img");
    fs::File::create(&other).unwrap().set_len(16 << 20).unwrap();
    mkfs_ext4(&other);
    let other = fs::canonicalize(&other).unwrap();
    let before = fs::read(&other).unwrap();
    let lo = LoopDev::attach(&checked, false);
    let dev = lo.dev().to_string();
    let r = swap_during_handshake(&w, &lo.path(), || {
        let _ = Command::new("losetup").args(["-d", &dev]).status();
        // With the writer holding the device open the detach is only deferred and this
        // attach fails; with a writer that reopens by name it succeeds.
        let _ = Command::new("losetup")
            .arg(&dev)
            .arg(&other)
            .stderr(Stdio::null())
            .status();
    });
    if backing_file(&dev).as_deref() == Some(other.as_path()) {
        let _ = Command::new("losetup").args(["-d", &dev]).status();
    }
    drop(lo);
    assert_eq!(
        fs::read(&other).unwrap(),
        before,
        "the image re-attached to {dev} during the handshake was written: {r:?}"
    );
}

/// Opening a target for writing by name is done in one place, `device::open`
/// (`open_once`, `create_new`); everything else gets a handle from there or reopens that
/// handle through /proc/self/fd.
#[test]
fn only_device_open_opens_a_write_target_by_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<PathBuf> = ["write", "bench", "device/safety"]
        .iter()
        .flat_map(|d| {
            fs::read_dir(root.join(d))
                .unwrap()
                .flatten()
                .map(|e| e.path())
        })
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.extend(
        ["campaign/target.rs", "device/file.rs"]
            .iter()
            .map(|f| root.join(f)),
    );
    // bench's tree workload writes its own files in a directory, not a target device.
    files.retain(|p| !p.ends_with("bench/tree.rs"));
    let writes = [
        ".write(true)",
        "File::create(",
        "O_RDWR",
        "O_WRONLY",
        "create_new(true)",
        "open_write(",
    ];
    let mut found = vec![];
    for f in &files {
        for (i, line) in fs::read_to_string(f).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap();
            if writes.iter().any(|w| code.contains(w)) {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "write targets opened by name outside device/open.rs:\n{}",
        found.join("\n")
    );
    // In device/open.rs, only open_once and create_new open a name; reopen opens
    // /proc/self/fd.
    let text = fs::read_to_string(root.join("device/open.rs")).unwrap();
    let mut current = String::new();
    let mut openers = vec![];
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("pub fn ").or_else(|| t.strip_prefix("fn ")) {
            current = rest.split('(').next().unwrap().to_string();
        }
        if t.starts_with(".open(") {
            openers.push(current.clone());
        }
    }
    openers.sort();
    openers.dedup();
    assert_eq!(
        openers,
        ["create_new", "open_once", "reopen"],
        "{openers:?}"
    );
}
