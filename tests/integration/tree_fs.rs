//! File systems on the simulated drive: ext4, XFS and btrfs, each on a loop device whose
//! backing file is the drive's FUSE file (`common::FsStack`), cut by the drive's own
//! power cut while plugpull writes into the file system, powered on again with the file
//! system's own recovery at mount, then verified by a fresh `plugpull verify`.
//!
//! What is promised and checked here, on each of the three file systems:
//! - tree mode (`write DIR`, `verify DIR`), honest drive: PASS after each of 10 cut
//!   cycles on one aging file system (no false alarm from the file system's
//!   journalling, block allocation or recovery);
//! - a lying drive (flushes return at once, the cache is lost at the cut): FAIL;
//! - an honest drive under `--flush testing-only-skip-dir-fsync`, cut right after the
//!   ack of a renamed file: verify names the file (renamed-back); the same cut with
//!   `--flush fsync` PASSes (see `skipping_the_dir_fsync_loses_a_rename` for why renames);
//! - a file system that does not mount any more, even after its repair tool: verify on
//!   the bare mount point FAILs with every acknowledged file missing, it is not an error
//!   that hides the loss (ext4, with an all-zero medium); the same rule without a file
//!   system: a tree whose root is gone;
//! - device mode (a preallocated file in the file system, `write FILE`): honest PASS,
//!   lying FAIL; the test that first proved the stack, kept because it also covers the
//!   dead-target verdict when the file system does not come back.
//!
//! Seeds: every cycle prints its seed; `PLUGPULL_SEED=S` replays the drive's decisions
//! and the cut point (thread timing around the kill does not replay). Needs root,
//! /dev/fuse, losetup and each file system's mkfs and repair tool (.ci/run installs
//! them); without them a test says why it skipped, and fails under
//! PLUGPULL_REQUIRE_ALL_TESTS=1. Each test has its own drive, loop device, mount point
//! and witness, so the tests run in parallel safely; Drop guards tear every piece down
//! even when an assertion fails.

use crate::common;

use common::{FsKind, FsStack, Mount, WitnessProc};
use plugpull::model::RunSelector;
use plugpull::record::RunId;
use plugpull::rng::Rng;
use plugpull::tree::plan::{Arrival, TreeScale, plan};
use plugpull::witness::client::fetch;
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The device-mode target file's size: small, so the preallocation costs little.
const TARGET_MIB: u64 = 8;

/// A lying drive loses each flushed write it still holds unless an early destage (p =
/// 0.25) saved it, so after 20 acks at least one acked record is lost for all practical
/// purposes (0.25^20 < 1e-12).
const LYING_CUTS: (u64, u64) = (20, 60);

/// An honest drive is cut anywhere from the first ack on.
const HONEST_CUTS: (u64, u64) = (1, 200);

/// Proceeds when root with /dev/fuse and the file system's tools; else skips (or fails,
/// with PLUGPULL_REQUIRE_ALL_TESTS=1).
fn can_run(kind: FsKind) -> bool {
    let avail = kind.available();
    common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to mount the simulated drive over FUSE (CI runs as root)",
    ) && common::skip_unless(
        avail.is_ok(),
        &format!(
            "{}: {} (.ci/run installs xfsprogs and btrfs-progs)",
            kind.name(),
            avail.as_ref().err().map_or("", |e| e.as_str())
        ),
    )
}

fn base_seed() -> u64 {
    match std::env::var("PLUGPULL_SEED") {
        Ok(s) => s.parse().expect("PLUGPULL_SEED must be a number"),
        Err(_) => plugpull::rng::random_seed() % 1_000_000,
    }
}

/// A scratch directory on tmpfs when there is one (the drive's backing file is written
/// often); kept, with its path printed, when the test panics.
struct Scratch(Option<tempfile::TempDir>);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let prefix = format!("plugpull-{name}-");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix);
        let d = if Path::new("/dev/shm").is_dir() {
            b.tempdir_in("/dev/shm")
        } else {
            b.tempdir()
        };
        Scratch(Some(d.unwrap()))
    }
    fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(d) = self.0.take()
        {
            let kept = d.keep();
            let msg = format!("failed test's files kept in {}\n", kept.display());
            let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes());
        }
    }
}

/// A child process killed on drop.
struct Proc(Option<Child>);

impl Proc {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Waits up to a minute (killing it after that); returns exit code, stdout, stderr.
    /// Its output is small (`--json --quiet`), so the pipes never fill while it runs.
    fn wait(mut self) -> (i32, String, String) {
        let t0 = Instant::now();
        let c = self.child();
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                let mut out = String::new();
                let mut err = String::new();
                c.stdout.take().unwrap().read_to_string(&mut out).ok();
                c.stderr.take().unwrap().read_to_string(&mut err).ok();
                self.0 = None;
                return (st.code().unwrap_or(-1), out, err);
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "process {} still running after 60 s",
                c.id()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The seeded number of durable acks the cut waits for.
fn acks_before_cut(seed: u64, (min, max): (u64, u64)) -> u64 {
    Rng::new(seed ^ 0xF5).range(min, max)
}

/// Waits for the writer after the cut: it must have seen the target fail (exit 4) after
/// at least one ack; returns its run.
fn writer_result(w: Proc, ctx: &str) -> RunId {
    let (code, out, err) = w.wait();
    assert_eq!(
        code, 4,
        "{ctx}: the writer should have seen the cut (exit 4)\nstdout:\n{out}\nstderr:\n{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{ctx}: write --json output: {e}\n{out}\n{err}"));
    assert!(
        v["records_acked"].as_u64().unwrap_or(0) > 0,
        "{ctx}: nothing was acknowledged before the cut: {v}"
    );
    RunId::parse(v["run_id"].as_str().unwrap()).unwrap()
}

/// `plugpull verify TARGET --run RUN --json`: exit 0 or 1 (a verdict), and the report.
fn verify(w: &WitnessProc, target: &Path, run: RunId, ctx: &str) -> (i32, serde_json::Value) {
    let r = common::verify(w, target, &["--run", &run.hex(), "--read-timeout", "10s"]);
    assert!(
        r.code == 0 || r.code == 1,
        "{ctx}: verify must give a verdict (exit 0 or 1), got {}\n{r:?}",
        r.code
    );
    (r.code, r.json())
}

/// One device-mode cycle on `kind`: a file preallocated and synced on an honest drive,
/// then `plugpull write FILE` on a `profile` drive, cut after a seeded number of acks,
/// power on honest (mount = recovery), verify. Returns verify's exit code, its report
/// and how the file system came up.
fn device_cycle(kind: FsKind, profile: &str, seed: u64, cut_at: (u64, u64)) -> (i32, Mount) {
    let ctx = format!(
        "{} device mode, profile {profile}, seed {seed} (reproduce: PLUGPULL_SEED={seed})",
        kind.name()
    );
    eprintln!("cycle: {ctx}");
    let dir = Scratch::new(&format!("fs-{}", kind.name()));
    let witness = WitnessProc::start(&dir.path().join("witness"));
    let mut stack = FsStack::create(dir.path(), kind);
    let target = stack.mount_point().join("plugpull.target");

    let up = stack.power_on("honest", seed.wrapping_add(1));
    assert!(
        up.is_clean(),
        "{ctx}: a clean file system must mount: {up:?}"
    );
    let dd = Command::new("dd")
        .args(["if=/dev/zero", "bs=1M", "conv=fsync", "status=none"])
        .arg(format!("count={TARGET_MIB}"))
        .arg(format!("of={}", target.display()))
        .status()
        .unwrap();
    assert!(dd.success(), "{ctx}: dd");
    stack.power_off_clean();

    let up = stack.power_on(profile, seed.wrapping_add(2));
    assert!(
        up.is_clean(),
        "{ctx}: the synced file system must mount: {up:?}"
    );
    let mut writer = Proc(Some(
        Command::new(common::bin())
            .arg("write")
            .arg(&target)
            .args(["--witness", &witness.addr, "--json", "--quiet"])
            .args(["--size", &format!("{TARGET_MIB}M")])
            .args(["--seed", &seed.to_string()])
            .arg("--destroy-data-on")
            .arg(&target)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let n = acks_before_cut(seed, cut_at);
    common::wait_for_durable_acks(&witness, n, writer.child());
    stack.cut();
    let run = writer_result(writer, &ctx);

    let up = stack.power_on("honest", seed.wrapping_add(3));
    let (code, report) = verify(&witness, &target, run, &ctx);
    eprintln!(
        "  {}: verdict {} after {n}+ acks, counts {}",
        up.describe(),
        report["verdict"],
        report["counts"]
    );
    if let Mount::Unmountable { .. } = up {
        assert!(
            report["dead_device"].is_string(),
            "{ctx}: with nothing mounted the target is gone: {report}"
        );
    }
    (code, up)
}

fn honest_passes_lying_fails_device_mode(kind: FsKind) {
    if !can_run(kind) {
        return;
    }
    let base = base_seed();
    let (code, up) = device_cycle(kind, "honest", base, HONEST_CUTS);
    assert!(
        up.is_clean(),
        "{}: honest drive, seed {base}: {up:?}",
        kind.name()
    );
    assert_eq!(
        code,
        0,
        "{}: honest drive, seed {base}: must PASS",
        kind.name()
    );
    let seed = base.wrapping_add(10);
    let (code, _) = device_cycle(kind, "lying", seed, LYING_CUTS);
    assert_eq!(
        code,
        1,
        "{}: lying drive, seed {seed}: must FAIL",
        kind.name()
    );
}

/// The runs in the witness's directory (one `RUN.acklog` each).
fn runs_on(w: &WitnessProc) -> HashSet<RunId> {
    std::fs::read_dir(&w.dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    RunId::parse(name.strip_suffix(".acklog")?)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the witness holds `n` durable acks of a run not in `before` (the writer's
/// new run) and returns that run. Panics if the writer exits first or a minute passes.
fn wait_for_new_run_acks(
    w: &WitnessProc,
    before: &HashSet<RunId>,
    n: u64,
    writer: &mut Proc,
    ctx: &str,
) -> RunId {
    let t0 = Instant::now();
    loop {
        let run = runs_on(w).into_iter().find(|r| !before.contains(r));
        let durable = run
            .and_then(|r| fetch(&w.addr, &RunSelector::Run(r)).ok())
            .map_or(0, |log| log.acks.len() as u64);
        if let Some(r) = run
            && durable >= n
        {
            return r;
        }
        if let Ok(Some(st)) = writer.child().try_wait() {
            panic!("{ctx}: the writer exited ({st}) with {durable} of {n} durable acks");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{ctx}: only {durable} of {n} durable acks after 60 s"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Files in each tree run: more than a cycle writes before its cut, so the writer is
/// always cut mid-tree.
const TREE_FILES: u32 = 2_000;

/// One tree cycle on a powered-off stack: power on a `profile` drive, `plugpull write
/// DIR --flush FLUSH` into the mounted file system, cut after a seeded number of acked
/// files, power on honest (the file system's recovery), `plugpull verify DIR --run`, and
/// a clean power off. Returns verify's exit code, its report and how the file system
/// came up after the cut.
fn tree_cycle(
    stack: &mut FsStack,
    w: &WitnessProc,
    profile: &str,
    flush: &str,
    seed: u64,
    cut_at: (u64, u64),
) -> (i32, serde_json::Value, Mount) {
    let kind = stack.kind().name();
    let ctx = format!(
        "{kind} tree, profile {profile}, --flush {flush}, seed {seed} (reproduce: PLUGPULL_SEED={seed})"
    );
    let up = stack.power_on(profile, seed);
    assert!(
        up.is_clean(),
        "{ctx}: the file system must mount before the run: {up:?}"
    );
    let dir = stack.mount_point();
    let before = runs_on(w);
    let mut writer = Proc(Some(
        Command::new(common::bin())
            .arg("write")
            .arg(&dir)
            .args(["--witness", &w.addr, "--quiet", "--flush", flush])
            .args(["--files", &TREE_FILES.to_string()])
            .args(["--seed", &seed.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let n = acks_before_cut(seed, cut_at);
    let run = wait_for_new_run_acks(w, &before, n, &mut writer, &ctx);
    stack.cut();
    let (code, out, err) = writer.wait();
    assert_eq!(
        code, 4,
        "{ctx}: the writer should have seen the cut (exit 4)\nstdout:\n{out}\nstderr:\n{err}"
    );
    let up = stack.power_on("honest", seed.wrapping_add(1));
    let (code, report) = verify(w, &dir, run, &ctx);
    eprintln!(
        "  {ctx}: {}; verdict {} after {n}+ acks; files {}",
        up.describe(),
        report["verdict"],
        report["tree"]["file_counts"]
    );
    stack.power_off_clean();
    (code, report, up)
}

/// Honest cycles per file system: each must PASS.
const HONEST_CYCLES: u64 = 10;

/// Cuts for honest tree cycles: from the first acked file on.
const TREE_HONEST_CUTS: (u64, u64) = (1, 60);

/// `HONEST_CYCLES` honest cut cycles on one aging file system (each run adds a tree
/// beside the earlier ones): every one must PASS; then a lying drive must FAIL.
fn honest_trees_pass_lying_fails(kind: FsKind) {
    if !can_run(kind) {
        return;
    }
    let base = base_seed();
    let dir = Scratch::new(&format!("tree-{}", kind.name()));
    let w = WitnessProc::start(&dir.path().join("witness"));
    let mut stack = FsStack::create(&dir.path().join("drive"), kind);
    for i in 0..HONEST_CYCLES {
        let seed = base.wrapping_add(i * 2);
        let (code, report, up) =
            tree_cycle(&mut stack, &w, "honest", "fsync", seed, TREE_HONEST_CUTS);
        assert!(
            up.is_clean(),
            "{}: honest drive, seed {seed}: {up:?}",
            kind.name()
        );
        assert_eq!(
            code,
            0,
            "{}: honest drive, seed {seed}: a false alarm: {}",
            kind.name(),
            report["tree"]
        );
    }
    let seed = base.wrapping_add(1000);
    let (code, report, up) = tree_cycle(&mut stack, &w, "lying", "fsync", seed, LYING_CUTS);
    assert_eq!(
        code,
        1,
        "{}: lying drive, seed {seed} ({}): must FAIL: {}",
        kind.name(),
        up.describe(),
        report["tree"]
    );
}

/// The first seed from `base` on whose plan puts a file that arrives by a rename among
/// its first `within` files, and that file's id.
fn seed_with_early_rename(base: u64, within: usize) -> (u64, u64) {
    let scale = TreeScale::scaled_down(TREE_FILES);
    (base..)
        .find_map(|seed| {
            let p = plan(seed, scale);
            let f = p
                .files()
                .take(within)
                .find(|f| matches!(f.arrival, Arrival::Renamed { .. }))?;
            Some((seed, f.id))
        })
        .unwrap()
}

/// An honest drive whose flushes take 100 ms and which keeps none of its unflushed
/// writes at a cut (an honest drive may keep any subset): the cut below lands while the
/// writer's next flush is still under way.
const SLOW_HONEST: &str = "honest,flush_latency_us=100000,early_destage_p=0";

/// A cut right after the witness made the ack of a renamed file durable, on an honest
/// drive, with `--flush FLUSH`: returns verify's exit code, report, and the file's id.
fn cut_after_rename(kind: FsKind, flush: &str, base: u64) -> (i32, serde_json::Value, u64) {
    let (seed, id) = seed_with_early_rename(base, 8);
    let ctx = format!(
        "{} tree, {SLOW_HONEST}, --flush {flush}, seed {seed}, cut after file {id}'s ack (reproduce: PLUGPULL_SEED={base})",
        kind.name()
    );
    let dir = Scratch::new(&format!("rename-{}", kind.name()));
    let w = WitnessProc::start(&dir.path().join("witness"));
    let mut stack = FsStack::create(&dir.path().join("drive"), kind);
    let up = stack.power_on(SLOW_HONEST, seed);
    assert!(up.is_clean(), "{ctx}: {up:?}");
    let mnt = stack.mount_point();
    let mut writer = Proc(Some(
        Command::new(common::bin())
            .arg("write")
            .arg(&mnt)
            .args(["--witness", &w.addr, "--quiet", "--flush", flush])
            .args(["--files", &TREE_FILES.to_string()])
            .args(["--seed", &seed.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let t0 = Instant::now();
    let run = loop {
        let run = runs_on(&w).into_iter().next();
        let acked = run
            .and_then(|r| fetch(&w.addr, &RunSelector::Run(r)).ok())
            .is_some_and(|log| log.acks.iter().any(|a| a.record.seq == id));
        if acked {
            break run.unwrap();
        }
        if let Ok(Some(st)) = writer.child().try_wait() {
            panic!("{ctx}: the writer exited ({st}) before file {id} was acknowledged");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{ctx}: no ack of file {id} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    stack.cut();
    let (code, out, err) = writer.wait();
    assert_eq!(
        code, 4,
        "{ctx}: the writer should have seen the cut\n{out}\n{err}"
    );
    let up = stack.power_on("honest", seed.wrapping_add(1));
    assert!(
        up.is_clean(),
        "{ctx}: an honest drive's file system must mount: {up:?}"
    );
    let (code, report) = verify(&w, &mnt, run, &ctx);
    eprintln!(
        "  {ctx}: verdict {}; files {}; findings {}",
        report["verdict"], report["tree"]["file_counts"], report["tree"]["findings"]
    );
    (code, report, id)
}

/// The testing-only flush mode that skips the directory fsync loses a rename on an
/// honest drive, and verify names the file; the same cut with `--flush fsync` keeps it
/// (PASS), so the finding is the skipped fsync's doing, not the drive's or the test's.
///
/// Why a rename: ext4 and XFS commit their whole journal up to the file on fsync(file),
/// and btrfs logs a new file's name with it, so a new file written in place keeps its
/// name on all three even without the directory fsync (10 cycles each with cuts after
/// 40-120 acks lost nothing). A rename after the file's fsync is a directory change only
/// the directory fsync makes durable; cut before anything else commits it (the next
/// file's flush takes 100 ms on this drive) and the old name is what survives.
fn skipping_the_dir_fsync_loses_a_rename(kind: FsKind) {
    if !can_run(kind) {
        return;
    }
    let base = base_seed();
    let (code, report, id) = cut_after_rename(kind, "testing-only-skip-dir-fsync", base);
    let findings = report["tree"]["findings"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let named = findings.iter().find(|f| f["id"] == id);
    assert!(
        code == 1 && named.is_some_and(|f| f["class"] == "renamed-back" || f["class"] == "missing"),
        "{}, base seed {base}: without the directory fsync the rename of file {id} must be \
         lost and named (renamed-back or missing): exit {code}, {}",
        kind.name(),
        report["tree"]
    );
    let (code, report, _) = cut_after_rename(kind, "fsync", base);
    assert_eq!(
        code,
        0,
        "{}, base seed {base}: with the directory fsync the same cut keeps the rename: {}",
        kind.name(),
        report["tree"]
    );
}

#[test]
fn ext4_skipping_the_dir_fsync_loses_a_rename() {
    skipping_the_dir_fsync_loses_a_rename(FsKind::Ext4);
}

#[test]
fn xfs_skipping_the_dir_fsync_loses_a_rename() {
    skipping_the_dir_fsync_loses_a_rename(FsKind::Xfs);
}

#[test]
fn btrfs_skipping_the_dir_fsync_loses_a_rename() {
    skipping_the_dir_fsync_loses_a_rename(FsKind::Btrfs);
}

/// A run whose root directory is gone (a lost mkdir, a file system that did not mount
/// where it was) lost every acknowledged file: verify FAILs and names them missing; it
/// is not an error that would hide the loss. No root or FUSE needed.
#[test]
fn a_tree_whose_root_is_gone_fails_with_every_file_missing() {
    let dir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&dir.path().join("witness"));
    let target = dir.path().join("t");
    std::fs::create_dir(&target).unwrap();
    let r = common::run([
        "write".as_ref(),
        target.as_os_str(),
        "--witness".as_ref(),
        w.addr.as_ref(),
        "--quiet".as_ref(),
        "--files".as_ref(),
        "40".as_ref(),
        "--count".as_ref(),
        "5".as_ref(),
        "--seed".as_ref(),
        "7".as_ref(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let run = runs_on(&w)
        .into_iter()
        .next()
        .expect("the run is on the witness");
    let root = target.join(format!("plugpull-{}", run.hex()));
    assert!(root.is_dir(), "the run's root {}", root.display());
    std::fs::remove_dir_all(&root).unwrap();
    let (code, report) = verify(&w, &target, run, "root removed");
    assert_eq!(code, 1, "a lost root is a FAIL: {report}");
    assert_eq!(
        report["tree"]["file_counts"]["missing"], 5,
        "{}",
        report["tree"]
    );
    let layer = report["tree"]["findings"][0]["layer"]
        .as_str()
        .unwrap_or("");
    assert!(
        layer.contains("root"),
        "the finding says the root is gone: {layer}"
    );
}

/// A file system the drive destroyed (here: the medium comes back all zeros, so neither
/// a mount nor `e2fsck` finds a superblock) leaves a bare mount point. Verify of the run
/// there is a FAIL with every acknowledged file missing, not an error.
#[test]
fn ext4_that_no_longer_mounts_is_a_fail_not_an_error() {
    if !can_run(FsKind::Ext4) {
        return;
    }
    let dir = Scratch::new("gone-ext4");
    let w = WitnessProc::start(&dir.path().join("witness"));
    let drive = dir.path().join("drive");
    let mut stack = FsStack::create(&drive, FsKind::Ext4);
    let up = stack.power_on("honest", 1);
    assert!(up.is_clean(), "{up:?}");
    let mnt = stack.mount_point();
    let r = common::run([
        "write".as_ref(),
        mnt.as_os_str(),
        "--witness".as_ref(),
        w.addr.as_ref(),
        "--quiet".as_ref(),
        "--files".as_ref(),
        "40".as_ref(),
        "--count".as_ref(),
        "10".as_ref(),
        "--seed".as_ref(),
        "5".as_ref(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let run = runs_on(&w)
        .into_iter()
        .next()
        .expect("the run is on the witness");
    stack.power_off_clean();
    let image = drive.join(common::simdrive::BACKING_NAME);
    let len = std::fs::metadata(&image).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .unwrap();
    f.set_len(0).unwrap();
    f.set_len(len).unwrap();
    drop(f);
    let up = stack.power_on("honest", 2);
    assert!(
        matches!(up, Mount::Unmountable { .. }),
        "an all-zero medium must not mount: {up:?}"
    );
    let (code, report) = verify(&w, &mnt, run, "file system gone");
    assert_eq!(
        code, 1,
        "acked files on a file system that is gone: FAIL: {report}"
    );
    assert_eq!(
        report["tree"]["file_counts"]["missing"], 10,
        "{}",
        report["tree"]
    );
}

#[test]
fn ext4_trees_honest_pass_lying_fails() {
    honest_trees_pass_lying_fails(FsKind::Ext4);
}

#[test]
fn xfs_trees_honest_pass_lying_fails() {
    honest_trees_pass_lying_fails(FsKind::Xfs);
}

#[test]
fn btrfs_trees_honest_pass_lying_fails() {
    honest_trees_pass_lying_fails(FsKind::Btrfs);
}

#[test]
fn ext4_device_mode_honest_passes_lying_fails() {
    honest_passes_lying_fails_device_mode(FsKind::Ext4);
}

#[test]
fn xfs_device_mode_honest_passes_lying_fails() {
    honest_passes_lying_fails_device_mode(FsKind::Xfs);
}

#[test]
fn btrfs_device_mode_honest_passes_lying_fails() {
    honest_passes_lying_fails_device_mode(FsKind::Btrfs);
}
