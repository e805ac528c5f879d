//! Verify's budget checked through the binary, before the target is read: `--memory` and
//! `--work-dir` kept to on every path (also the one that holds the whole log in memory),
//! a work directory that is missing, not a directory, not writable or on the drive under
//! test refused whatever the run's size, and a log no writer could produce refused for
//! the log even when the work directory is bad too.
//!
//! Every run here is of records never written to a blank target: judged, it FAILs (exit
//! 1, every record lost). So an exit 2 with the budget's message says the target was not
//! judged, and a test that expects a refusal fails if the check is missing.

use crate::common;

use plugpull::device::{FlushMethod, identity};
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, SECTOR};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const REC_BYTES: u64 = 4096;
const ACKS: u64 = 64;

/// A run of `ACKS` records of `rec_bytes` over `region_bytes` of `target` (a blank
/// sparse file made here unless it exists: a block device), none of them written. With
/// `impossible`, its last ack lies past the region's end (no writer sends that). The
/// descriptor names `written_to` as the run's drive (the target itself unless given).
/// Returns the log's path.
fn blank_run(
    target: &Path,
    written_to: Option<&Path>,
    region_bytes: u64,
    rec_bytes: u64,
    impossible: bool,
    log: &Path,
) -> PathBuf {
    if !target.exists() {
        let f = std::fs::File::create(target).unwrap();
        f.set_len(region_bytes).unwrap();
    }
    let run = RunId([0x5a; 16]);
    let acks: Vec<Ack> = (0..ACKS)
        .map(|i| {
            let offset = match impossible && i + 1 == ACKS {
                true => region_bytes,
                false => i * rec_bytes,
            };
            let record = RecordId {
                stream: 0,
                seq: i + 1,
                offset,
                sectors: (rec_bytes / SECTOR as u64) as u32,
                write_time_ns: 1_780_000_000_000_000_000 + i * 10_000,
            };
            Ack {
                record,
                flushed_ns: record.write_time_ns + 5_000,
            }
        })
        .collect();
    let d = RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(written_to.unwrap_or(target)),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes,
            record_bytes_min: rec_bytes,
            record_bytes_max: rec_bytes,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
    };
    let mut stream = acks.iter().copied();
    plugpull::witness::store::export::write_log_file_from(log, &d, &mut stream, &[], None).unwrap();
    log.to_path_buf()
}

/// A small run that fits the default `--memory` whole, on a blank file in `dir`.
fn small_run(dir: &Path, impossible: bool) -> (PathBuf, PathBuf) {
    let target = dir.join("t.img");
    let log = blank_run(
        &target,
        None,
        8 << 20,
        REC_BYTES,
        impossible,
        &dir.join("t.acklog"),
    );
    (target, log)
}

/// A region of 512 B records too large to judge in 512 parts of `--memory 64M` (about
/// 80 M slots fit): a sparse file of 48 GiB.
const HUGE_REGION_BYTES: u64 = 48 << 30;

/// A directory on another file system than `than`'s (/dev/shm, a tmpfs), for work
/// directories that must not be on the target's. None (the test skips) where there is
/// none.
pub fn dir_on_another_fs(than: &Path) -> Option<tempfile::TempDir> {
    let dev = std::fs::metadata(than).ok()?.dev();
    let shm = Path::new("/dev/shm");
    let other = std::fs::metadata(shm).ok().filter(|m| m.dev() != dev)?;
    other.is_dir().then(|| tempfile::tempdir_in(shm).unwrap())
}

fn verify(args: &[&str]) -> common::Run {
    let mut all = vec!["verify"];
    all.extend_from_slice(args);
    all.push("--rehearsal");
    common::run(all)
}

/// The fixture is judged FAIL when nothing stops verify: the refusals below are told
/// apart from a verdict by their exit code.
#[test]
fn the_blank_run_fails_when_judged() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), false);
    let r = verify(&[
        target.to_str().unwrap(),
        "--acks",
        log.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["verdict"], "FAIL", "{v:#}");
    // Never written: every acknowledged record is missing, none survived.
    assert_eq!(v["acked_records"], ACKS, "{v:#}");
    assert_eq!(v["counts"]["intact"], 0, "{v:#}");
}

/// The target is a copy of the run's drive, accepted with --allow-identity-mismatch:
/// verify streams the log (`verify::streamed`). It must keep to the user's
/// --memory there too: 64 MiB cannot hold this region in 512 parts.
#[test]
fn a_copy_of_the_drive_keeps_to_memory() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let drive = dir.path().join("drive.img");
    let copy = dir.path().join("copy.img");
    std::fs::File::create(&drive)
        .unwrap()
        .set_len(HUGE_REGION_BYTES)
        .unwrap();
    let log = blank_run(
        &copy,
        Some(&drive),
        HUGE_REGION_BYTES,
        512,
        false,
        &dir.path().join("t.acklog"),
    );
    let Some(work) = dir_on_another_fs(&copy) else {
        common::skip_unless(false, "no second file system (/dev/shm) for the work files");
        return;
    };
    let (c, l) = (copy.to_str().unwrap(), log.to_str().unwrap());
    let w = work.path().to_str().unwrap();
    let r = verify(&[
        c,
        "--acks",
        l,
        "--allow-identity-mismatch",
        "--memory",
        "64M",
        "--work-dir",
        w,
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--memory 64.0 MiB is too little"),
        "{r:?}"
    );
    // The same run within the default budget is judged: it was the budget that refused.
    let judged = verify(&[c, "--acks", l, "--allow-identity-mismatch"]);
    assert_eq!(judged.code, 1, "{judged:?}");
}

/// The streamed path: --memory below what one part of the region needs.
#[test]
fn too_little_memory_is_refused_before_reading() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = dir.path().join("t.img");
    let log = blank_run(
        &target,
        None,
        HUGE_REGION_BYTES,
        512,
        false,
        &dir.path().join("t.acklog"),
    );
    let Some(work) = dir_on_another_fs(&target) else {
        common::skip_unless(false, "no second file system (/dev/shm) for the work files");
        return;
    };
    let r = verify(&[
        target.to_str().unwrap(),
        "--acks",
        log.to_str().unwrap(),
        "--memory",
        "64M",
        "--work-dir",
        work.path().to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--memory 64.0 MiB is too little") && r.stderr.contains("Give --memory"),
        "{r:?}"
    );
}

/// A --work-dir that is missing or not a directory is refused though the run fits the
/// memory whole and would never use it.
#[test]
fn a_bad_work_dir_is_refused_when_the_run_fits() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), false);
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let missing = dir.path().join("no-such-dir");
    let m = missing.to_str().unwrap();
    let r = verify(&[t, "--acks", l, "--work-dir", m]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(m)
            && r.stderr.contains("does not exist")
            && r.stderr.contains("--work-dir"),
        "{r:?}"
    );
    assert!(!missing.exists(), "verify made the work directory");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let r = verify(&[t, "--acks", l, "--work-dir", f]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(f) && r.stderr.contains("not a directory"),
        "{r:?}"
    );
}

/// A read-only work directory (root writes anywhere else) is refused whatever the run's
/// size: whole, and in parts.
#[test]
fn an_unwritable_work_dir_is_refused_before_reading() {
    if !common::skip_unless(common::is_root(), "mounting a read-only tmpfs needs root") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), false);
    let ro = common::Mounted::new(
        &["-t", "tmpfs", "-o", "ro,size=4m"],
        "tmpfs",
        &dir.path().join("ro"),
    );
    let (t, l, w) = (
        target.to_str().unwrap(),
        log.to_str().unwrap(),
        ro.at.to_str().unwrap(),
    );
    for memory in ["512M", "64M"] {
        let r = verify(&[t, "--acks", l, "--memory", memory, "--work-dir", w]);
        assert_eq!(r.code, 2, "--memory {memory}: {r:?}");
        assert!(
            r.stderr
                .contains(&format!("cannot write its work files in {w}"))
                && r.stderr.contains("--work-dir"),
            "--memory {memory}: {r:?}"
        );
    }
}

/// A file target's work directory must not be on the file system that holds the file:
/// verify's writes would go to the drive under test.
#[test]
fn a_work_dir_beside_a_file_target_is_refused() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), false);
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (t, l, w) = (
        target.to_str().unwrap(),
        log.to_str().unwrap(),
        work.to_str().unwrap(),
    );
    let r = verify(&[t, "--acks", l, "--work-dir", w]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(w)
            && r.stderr.contains("the drive under test")
            && r.stderr
                .contains("choose a directory on another drive with --work-dir"),
        "{r:?}"
    );
    // On another file system it is taken.
    let Some(other) = dir_on_another_fs(&target) else {
        common::skip_unless(false, "no second file system (/dev/shm)");
        return;
    };
    let r = verify(&[t, "--acks", l, "--work-dir", other.path().to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
}

/// The default work directory (TMPDIR) is checked only when the run is judged in parts:
/// a run that fits is judged whatever TMPDIR is; one in parts is refused when TMPDIR is
/// on the target's file system.
#[test]
fn the_default_work_dir_is_checked_when_the_run_needs_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), false);
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let with_tmpdir = |memory: &str| {
        let out = std::process::Command::new(common::bin())
            .args(["verify", target.to_str().unwrap(), "--acks"])
            .arg(&log)
            .args(["--rehearsal", "--memory", memory])
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = with_tmpdir("512M");
    assert_eq!(code, Some(1), "{stderr}");
    let (code, stderr) = with_tmpdir("64M");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(tmp.to_str().unwrap()) && stderr.contains("the drive under test"),
        "{stderr}"
    );
}

/// A block device target: a work directory on a file system on the device itself, or
/// on a partition of it, is refused.
#[test]
fn a_work_dir_on_the_target_device_is_refused() {
    if !common::skip_unless(
        common::is_root() && common::have_tool("mkfs.ext4") && common::have_tool("partx"),
        "loop devices and mkfs.ext4 and partx need root and e2fsprogs and util-linux",
    ) {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // The device itself.
    let img = dir.path().join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let lo = common::LoopDev::attach(&img, false);
    common::mkfs_ext4(&lo.path());
    let mnt = common::Mounted::new(&["-t", "ext4"], lo.dev(), &dir.path().join("mnt"));
    let log = blank_run(
        &lo.path(),
        None,
        8 << 20,
        REC_BYTES,
        false,
        &dir.path().join("lo.acklog"),
    );
    let w = mnt.at.to_str().unwrap();
    let r = verify(&[lo.dev(), "--acks", log.to_str().unwrap(), "--work-dir", w]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(w) && r.stderr.contains("the drive under test"),
        "{r:?}"
    );
    drop(mnt);
    drop(lo);

    // A partition of it: an MBR with one partition from 1 MiB, added with partx.
    let disk = dir.path().join("disk.img");
    write_mbr_image(&disk, 64 << 20, 2048);
    let lo = common::LoopDev::attach(&disk, false);
    let parts = Partitions::add(&lo);
    common::mkfs_ext4(&parts.first);
    let mnt = common::Mounted::new(&["-t", "ext4"], &parts.first, &dir.path().join("pmnt"));
    let log = blank_run(
        &lo.path(),
        None,
        1 << 20,
        REC_BYTES,
        false,
        &dir.path().join("disk.acklog"),
    );
    let w = mnt.at.to_str().unwrap().to_string();
    let r = verify(&[lo.dev(), "--acks", log.to_str().unwrap(), "--work-dir", &w]);
    drop(mnt);
    drop(parts);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(&w) && r.stderr.contains("a partition"),
        "{r:?}"
    );
}

/// A sparse disk image of `bytes` with an MBR holding one Linux partition from sector
/// `start` to the end.
fn write_mbr_image(path: &Path, bytes: u64, start: u32) {
    let f = std::fs::File::create(path).unwrap();
    f.set_len(bytes).unwrap();
    let mut mbr = [0u8; 512];
    let entry = &mut mbr[446..462];
    entry[4] = 0x83;
    entry[8..12].copy_from_slice(&start.to_le_bytes());
    let sectors = (bytes / 512) as u32 - start;
    entry[12..16].copy_from_slice(&sectors.to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    std::os::unix::fs::FileExt::write_all_at(&f, &mbr, 0).unwrap();
}

/// The partitions of a loop device, added with `partx -a` (the loop device scans none
/// itself) and deleted on drop, before the device is detached: a freed loop device must
/// not keep them for its next user.
struct Partitions {
    disk: PathBuf,
    first: PathBuf,
}

impl Partitions {
    fn add(lo: &common::LoopDev) -> Partitions {
        let out = std::process::Command::new("partx")
            .arg("-a")
            .arg(lo.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "partx -a: {out:?}");
        let first = PathBuf::from(format!("{}p1", lo.dev()));
        common::eventually(
            std::time::Duration::from_secs(10),
            "the partition's device node",
            || first.exists(),
        );
        Partitions {
            disk: lo.path(),
            first,
        }
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        let _ = std::process::Command::new("partx")
            .arg("-d")
            .arg(&self.disk)
            .status();
    }
}

/// A log no writer could produce, with a work directory that is missing: refused for the
/// log (exit 3), the evidence problem before the usage one, whole and in parts.
#[test]
fn an_impossible_log_outranks_a_missing_work_dir() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), true);
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let missing = dir.path().join("no-such-dir");
    for memory in ["512M", "64M"] {
        let r = verify(&[
            t,
            "--acks",
            l,
            "--memory",
            memory,
            "--work-dir",
            missing.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 3, "--memory {memory}: {r:?}");
        assert!(
            r.stderr.contains("damaged or forged") && !r.stderr.contains("no-such-dir"),
            "--memory {memory}: {r:?}"
        );
    }
}

/// The same when the work directory is refused by the spill (too little free space) or
/// the memory by the plan of parts.
#[test]
fn an_impossible_log_outranks_a_full_work_dir_and_too_little_memory() {
    if !common::skip_unless(common::is_root(), "mounting a small tmpfs needs root") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = small_run(dir.path(), true);
    let small = common::Mounted::new(
        &["-t", "tmpfs", "-o", "size=32m"],
        "tmpfs",
        &dir.path().join("small"),
    );
    let r = verify(&[
        target.to_str().unwrap(),
        "--acks",
        log.to_str().unwrap(),
        "--memory",
        "64M",
        "--work-dir",
        small.at.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("damaged or forged") && !r.stderr.contains("too little"),
        "{r:?}"
    );
    let huge = dir.path().join("huge.img");
    let log = blank_run(
        &huge,
        None,
        HUGE_REGION_BYTES,
        512,
        true,
        &dir.path().join("huge.acklog"),
    );
    // Work files off the target's file system, so that only the memory is refused.
    let r = verify(&[
        huge.to_str().unwrap(),
        "--acks",
        log.to_str().unwrap(),
        "--memory",
        "64M",
        "--work-dir",
        small.at.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("damaged or forged") && !r.stderr.contains("too little"),
        "{r:?}"
    );
}

/// Through the witness: a log read from the witness's directory (held in memory, with
/// its journal) is judged within the user's --memory and --work-dir: at 64 MiB in parts,
/// whose spill finds the small work directory too short of space; `--witness`, for the
/// drive's latest run and for a named one, refuses a missing --work-dir before the
/// target is read.
#[test]
fn the_witness_paths_keep_to_the_budget() {
    if !common::skip_unless(common::is_root(), "mounting a small tmpfs needs root") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = common::WitnessProc::start(&dir.path().join("w"));
    let target = dir.path().join("t.img");
    let wr = common::write(
        &w,
        &target,
        &["--size", "8M", "--count", "200", "--record-size", "4K"],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    let run_id = wr.json()["run_id"].as_str().unwrap().to_string();
    let log = w.dir.join(format!("{run_id}.acklog"));
    assert!(
        !plugpull::witness::store::reader::streamable(&log),
        "the witness directory's log is read whole"
    );
    let small = common::Mounted::new(
        &["-t", "tmpfs", "-o", "size=32m"],
        "tmpfs",
        &dir.path().join("small"),
    );
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let s = small.at.to_str().unwrap();
    let r = verify(&[t, "--acks", l, "--memory", "64M", "--work-dir", s]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("too little") && r.stderr.contains("Nothing was read from the target"),
        "{r:?}"
    );
    // Within the default budget it is judged whole (INCONCLUSIVE: a witness's own log
    // has no end mark to prove it whole): it was the budget that refused.
    let judged = verify(&[t, "--acks", l, "--work-dir", s]);
    assert_eq!(judged.code, 3, "{judged:?}");
    assert!(
        judged.stdout.contains("VERDICT: INCONCLUSIVE"),
        "{judged:?}"
    );

    let missing = dir.path().join("no-such-dir");
    let m = missing.to_str().unwrap();
    for extra in [vec![], vec!["--run", run_id.as_str()]] {
        let mut args = extra.clone();
        args.extend(["--work-dir", m]);
        let r = common::verify(&w, &target, &args);
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(
            r.stderr.contains(m) && r.stderr.contains("does not exist"),
            "{extra:?}: {r:?}"
        );
    }
}
