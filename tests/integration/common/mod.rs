//! The one harness for tests that run the built binary: commands with their output and
//! exit code, JSON reports, the gate that skips (or, in CI, fails) a test the machine
//! cannot run, and the fixtures in the submodules: a witness ([`witness`]), the
//! simulated drive over FUSE ([`simdrive`]), loop devices ([`loopdev`]), file systems
//! ([`mount`]), a file system on a loop device on the simulated drive ([`fsstack`]).
//! Every test file uses these instead of its own copy, so a fix to how a fixture starts
//! or cleans up is made once.

pub mod fsstack;
pub mod loopdev;
pub mod mount;
pub mod simdrive;
pub mod witness;

pub use fsstack::{FsKind, FsStack, Mount};
pub use loopdev::LoopDev;
pub use mount::{Mounted, mkfs_ext4};
pub use simdrive::SimDrive;
pub use witness::{InProcessWitness, Listen, WitnessProc};

use plugpull::device::FlushMethod;
use plugpull::device::identity::DeviceIdentity;
use plugpull::model::{RunDescriptor, WriterSettings};
use plugpull::record::RunId;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_plugpull")
}

/// A loopback port nothing listens on right now (for an address that must be
/// unreachable, or a config that needs a port up front). A witness needs none: it binds
/// port 0 and the harness reads back what it got.
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
        format_version: plugpull::record::FORMAT_VERSION,
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
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
        tree: None,
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

/// Whether this process can mount the simulated drive over FUSE (root and /dev/fuse).
pub fn can_mount_fuse() -> bool {
    is_root() && Path::new("/dev/fuse").exists()
}

/// Whether `tool --version` runs (the tool is installed and on PATH).
pub fn have_tool(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The one gate for tests that need something the machine may lack (root, /dev/fuse, a
/// tool). Returns true when the test should proceed (`cond` holds). Otherwise:
/// - with `PLUGPULL_REQUIRE_ALL_TESTS=1` (set by `.ci/run`) it panics, so a test that
///   cannot run fails CI instead of passing without checking anything;
/// - else it prints `SKIPPED <test>: <reason>` straight to the process's stderr (the
///   harness captures `eprintln!`, which would hide the skip) and returns false.
///
/// Use: `if !common::skip_unless(common::is_root(), "needs root") { return; }`
pub fn skip_unless(cond: bool, reason: &str) -> bool {
    if cond {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    if std::env::var("PLUGPULL_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1") {
        panic!(
            "{test} would be skipped ({reason}) but PLUGPULL_REQUIRE_ALL_TESTS=1: \
             install what it needs (.ci/run does) and run as root"
        );
    }
    let line = format!("SKIPPED {test}: {reason}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    false
}

/// `umount PATH`, and a lazy unmount when that fails (a dead FUSE daemon's mount, a
/// device still busy): a test must never leave a mount behind.
pub fn umount(path: &Path) {
    let ok = Command::new("umount")
        .arg(path)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(path)
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits until `done` holds, polling every 20 ms; panics naming `what` after `limit`.
/// For what a test must see happen, in place of a sleep that hopes it happened by then.
pub fn eventually(limit: std::time::Duration, what: &str, mut done: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Blocks until the witness holds at least `n` durable acks of the one run in its
/// directory, so a test cuts on an event of the run, not after a wall-clock sleep that a
/// loaded machine stretches. Panics if `writer` exits first or a minute passes.
pub fn wait_for_durable_acks(w: &WitnessProc, n: u64, writer: &mut Child) {
    let t0 = Instant::now();
    loop {
        let durable = durable_acks(w);
        if durable >= n {
            return;
        }
        if let Ok(Some(status)) = writer.try_wait() {
            panic!("the writer exited ({status}) with {durable} of {n} durable acks");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "only {durable} of {n} durable acks after 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// How many durable acks the witness holds of the one run in its directory (0 before
/// the run has a log).
pub fn durable_acks(w: &WitnessProc) -> u64 {
    use plugpull::model::RunSelector;
    let run = std::fs::read_dir(&w.dir).ok().and_then(|d| {
        d.filter_map(|e| e.ok()).find_map(|e| {
            let name = e.file_name().into_string().ok()?;
            RunId::parse(name.strip_suffix(".acklog")?)
        })
    });
    run.and_then(|r| plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(r)).ok())
        .map_or(0, |log| log.acks.len() as u64)
}

/// `plugpull write TARGET --witness W --json EXTRA...`.
pub fn write(w: &WitnessProc, target: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "write".to_string(),
        target.display().to_string(),
        "--witness".into(),
        w.addr.clone(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    run(args)
}

/// `plugpull verify TARGET --witness W --json --rehearsal EXTRA...`: these tests judge
/// runs whose writer ended by itself, on purpose (plugpull testing itself), so they say
/// so; a test of the rule that such a run gets no PASS calls [`verify_as_after_a_cut`].
pub fn verify(w: &WitnessProc, target: &Path, extra: &[&str]) -> Run {
    let mut all = vec!["--rehearsal"];
    all.extend_from_slice(extra);
    verify_as_after_a_cut(w, target, &all)
}

/// `plugpull verify TARGET --witness W --json EXTRA...`, as a user runs it after a power
/// cut: without `--rehearsal`.
pub fn verify_as_after_a_cut(w: &WitnessProc, target: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "verify".to_string(),
        target.display().to_string(),
        "--witness".into(),
        w.addr.clone(),
        "--json".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    run(args)
}

/// Overwrites `len` bytes of the file at `offset` with what `f` makes of them, synced:
/// damage a test does on purpose to a target or a log.
pub fn edit(path: &Path, offset: u64, len: usize, f: impl FnOnce(&mut [u8])) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = vec![0u8; len];
    file.read_exact_at(&mut b, offset).unwrap();
    f(&mut b);
    file.write_all_at(&b, offset).unwrap();
    file.sync_all().unwrap();
}

/// `plugpull fetch --run RUN_ID -o OUT` from the witness at `addr`, which must succeed.
pub fn fetch_to(addr: &str, run_id: &str, out: &Path) {
    let r = run([
        "fetch",
        "--witness",
        addr,
        "--run",
        run_id,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
}
