//! Helpers for tests that run the built binary: a witness on a free loopback port,
//! commands with their output and exit code, JSON reports.
#![allow(dead_code)]

use plugpull::ack::{RunDescriptor, WriterSettings};
use plugpull::device::FlushMethod;
use plugpull::device::identity::DeviceIdentity;
use plugpull::record::RunId;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_plugpull")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A run descriptor for tests that talk to the witness without a real writer: a file
/// target, a 1 GiB region of 4 KiB records, one stream, fdatasync. Tests change the
/// fields they care about.
pub fn test_descriptor(run_id: RunId) -> RunDescriptor {
    RunDescriptor {
        run_id,
        format_version: 1,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        device: DeviceIdentity {
            target: "/tmp/test.img".into(),
            kind: "file".into(),
            ..Default::default()
        },
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: 1 << 30,
            record_bytes_min: 4096,
            record_bytes_max: 4096,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
        },
        command: vec![],
    }
}

/// A `plugpull listen` child process, killed on drop.
pub struct WitnessProc {
    pub child: Child,
    pub addr: String,
    pub dir: PathBuf,
}

impl WitnessProc {
    pub fn start(dir: &Path) -> WitnessProc {
        Self::start_on(dir, free_port())
    }
    pub fn start_on(dir: &Path, port: u16) -> WitnessProc {
        let addr = format!("127.0.0.1:{port}");
        let child = Command::new(bin())
            .args(["listen", "--bind", &addr, "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start witness");
        let t0 = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "witness did not start listening on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        WitnessProc {
            child,
            addr,
            dir: dir.to_owned(),
        }
    }
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for WitnessProc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

pub fn run<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out: Output = Command::new(bin())
        .args(args)
        .output()
        .expect("run plugpull");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Skips (returns true) with a message saying why, when not root.
pub fn skip_unless_root(what: &str) -> bool {
    if !is_root() {
        eprintln!("SKIPPED {what}: needs root (loop devices / mounts); CI runs as root");
        return true;
    }
    false
}

/// A loop device over a file, detached on drop.
pub struct Loop {
    pub dev: String,
}

impl Loop {
    pub fn attach(file: &Path, direct: bool) -> Loop {
        let out = Command::new("losetup")
            .args([
                "-f",
                "--show",
                &format!("--direct-io={}", if direct { "on" } else { "off" }),
            ])
            .arg(file)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "losetup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop {
            dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}
