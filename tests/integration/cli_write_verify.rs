//! End to end with the built binary: a witness on loopback, `write` to a file or loop
//! device, damage, `verify`, exit codes and JSON.

use crate::common;
use common::*;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

fn counts(r: &Run) -> serde_json::Value {
    r.json()["counts"].clone()
}

#[test]
fn round_trip_n_records_pass() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = write(&w, &t, &["--size", "8M", "--count", "500"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    assert_eq!(wr.json()["records_acked"], 500);
    assert_eq!(wr.json()["witness_durable"], 500);
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["counts"]["intact"], 500);
    assert_eq!(j["format"], "plugpull-verify/1");
}

#[test]
fn wrapping_run_passes() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    // 256 KiB region / 4 KiB = 64 places; 400 records wrap 6 times.
    let wr = write(&w, &t, &["--size", "256k", "--count", "400"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(counts(&v)["intact"], 64);
    assert_eq!(counts(&v)["superseded"], 400 - 64);
}

/// Writes 64 records of 4 KiB and returns the target path.
fn small_run(w: &WitnessProc, dir: &Path, name: &str) -> std::path::PathBuf {
    let t = dir.join(name);
    let wr = write(w, &t, &["--size", "256k", "--count", "64"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    t
}

#[test]
fn damage_is_classified_and_exits_1() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));

    // One bit flipped in record 10.
    let t = small_run(&w, d.path(), "bit.img");
    edit(&t, 10 * 4096 + 777, 1, |b| b[0] ^= 0x20);
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(
        (
            counts(&v)["corrupt"].as_u64(),
            counts(&v)["intact"].as_u64()
        ),
        (Some(1), Some(63))
    );
    assert_eq!(v.json()["corrupt_bits"], 1);

    // Second half of record 20 zeroed: shorn.
    let t = small_run(&w, d.path(), "shorn.img");
    edit(&t, 20 * 4096 + 2048, 2048, |b| b.fill(0));
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(
        (counts(&v)["shorn"].as_u64(), counts(&v)["intact"].as_u64()),
        (Some(1), Some(63))
    );

    // Record 5 copied over record 30's place: misdirected.
    let t = small_run(&w, d.path(), "mis.img");
    let mut five = vec![0u8; 4096];
    fs::File::open(&t)
        .unwrap()
        .read_exact_at(&mut five, 5 * 4096)
        .unwrap();
    edit(&t, 30 * 4096, 4096, |b| b.copy_from_slice(&five));
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(
        (
            counts(&v)["misdirected"].as_u64(),
            counts(&v)["intact"].as_u64()
        ),
        (Some(1), Some(63))
    );

    // Records 40..48 set back to their state before the run (zeros): lost, and holes.
    let t = small_run(&w, d.path(), "lost.img");
    edit(&t, 40 * 4096, 8 * 4096, |b| b.fill(0));
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(
        (counts(&v)["lost"].as_u64(), counts(&v)["intact"].as_u64()),
        (Some(8), Some(56))
    );
    assert_eq!(v.json()["ordering_holes"]["count"], 8);
    assert_eq!(v.json()["loss_window"]["bytes"], 8 * 4096);
}

#[test]
fn another_runs_records_are_stale() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = small_run(&w, d.path(), "stale.img");
    let first = verify(&w, &t, &[]).json()["run"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    // A second run over the first 16 records' places, acknowledged to another witness:
    // this witness cannot know it came later, so its records are another run's data.
    // (A later run this witness saw supersedes instead: tests/integration/trust.rs.)
    let w2 = WitnessProc::start(&d.path().join("w2"));
    let wr = write(&w2, &t, &["--size", "256k", "--count", "16"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let v = verify(&w, &t, &["--run", &first]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(
        (
            counts(&v)["stale"].as_u64(),
            counts(&v)["intact"].as_u64(),
            counts(&v)["corrupt"].as_u64()
        ),
        (Some(16), Some(48), Some(0))
    );
    // The latest run for this target at the other witness is the second one; it passes.
    let v2 = verify(&w2, &t, &[]);
    assert_eq!(v2.code, 0, "{v2:?}");
    assert_ne!(v2.json()["run"]["run_id"].as_str().unwrap(), first);
}

#[test]
fn writer_killed_mid_run_is_no_false_alarm() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("killed.img");
    let mut child = Command::new(bin())
        .args([
            "write",
            t.to_str().unwrap(),
            "--witness",
            &w.addr,
            "--size",
            "4M",
            "--quiet",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed on an event (the witness holds 20 durable acks), not after a sleep.
    wait_for_durable_acks(&w, 20, &mut child);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(
        v.json()["acked_records"].as_u64().unwrap() > 10,
        "the writer should have acked records before the kill: {v:?}"
    );
}

#[test]
fn flush_none_with_lost_cache_fails() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("none.img");
    let wr = write(
        &w,
        &t,
        &["--size", "1M", "--count", "200", "--flush", "none"],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    // The last flushed image of this run is the preallocated one: all zeros.
    edit(&t, 0, 1 << 20, |b| b.fill(0));
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(counts(&v)["lost"], 200);
}

#[test]
fn verify_never_writes_to_the_target() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = small_run(&w, d.path(), "ro.img");
    edit(&t, 3 * 4096, 4096, |b| b.fill(0));
    let before = fs::read(&t).unwrap();
    let mtime = fs::metadata(&t).unwrap().modified().unwrap();
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(fs::read(&t).unwrap(), before);
    assert_eq!(fs::metadata(&t).unwrap().modified().unwrap(), mtime);
}

#[test]
fn verify_with_exported_acks_file() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = small_run(&w, d.path(), "export.img");
    let acks = d.path().join("run.acklog");
    let f = run([
        "fetch",
        "--witness",
        &w.addr,
        "--target",
        t.to_str().unwrap(),
        "-o",
        acks.to_str().unwrap(),
    ]);
    assert_eq!(f.code, 0, "{f:?}");
    let v = run([
        "verify",
        t.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        acks.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(counts(&v)["intact"], 64);
}

#[test]
fn usage_errors_exit_2_with_a_hint() {
    let d = tempfile::tempdir().unwrap();
    let precious = d.path().join("precious.txt");
    fs::write(&precious, b"do not touch").unwrap();
    let r = run([
        "write",
        precious.to_str().unwrap(),
        "--witness",
        "127.0.0.1:1",
        "--count",
        "1",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--destroy-data-on"), "{r:?}");
    assert_eq!(fs::read(&precious).unwrap(), b"do not touch");
    let r = run([
        "write",
        d.path().join("x").to_str().unwrap(),
        "--witness",
        "127.0.0.1:1",
        "--record-size",
        "1000",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = run([
        "write",
        d.path().join("y").to_str().unwrap(),
        "--witness",
        "127.0.0.1:1",
        "--count",
        "1",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("witness"),
        "an unreachable witness is named: {r:?}"
    );
    let r = run([
        "verify",
        "/nonexistent/target",
        "--rehearsal",
        "--acks",
        "/nonexistent/log",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn no_acks_is_inconclusive_exit_3() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("zero.img");
    let wr = write(&w, &t, &["--size", "256k", "--count", "0"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let v = verify(&w, &t, &[]);
    assert_eq!(v.code, 3, "{v:?}");
    assert_eq!(v.json()["verdict"], "INCONCLUSIVE");
}

#[test]
fn loop_device_round_trip() {
    if !skip_unless(
        is_root() && have_tool("losetup"),
        "needs root and losetup (loop devices)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let backing = d.path().join("loop.img");
    fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    let lo = LoopDev::attach(&backing, true);
    let dev = Path::new(lo.dev());
    let wr = write(&w, dev, &["--count", "300", "--record-size", "4k-16k"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let v = verify(&w, dev, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    assert_eq!(
        j["counts"]["intact"].as_u64().unwrap() + j["counts"]["superseded"].as_u64().unwrap(),
        300
    );
    assert_eq!(j["device"]["kind"], "block");
    assert_eq!(j["device"]["logical_sector_bytes"], 512);
    // Unaligned records are refused on a real block device with O_DIRECT.
    let bad = write(&w, dev, &["--count", "1", "--offset", "100"]);
    assert_eq!(bad.code, 2, "{bad:?}");
}

#[test]
fn refuses_ext4_signature_and_mounted_loop_devices() {
    if !skip_unless(
        is_root() && have_tool("losetup") && have_tool("mkfs.ext4"),
        "needs root, losetup and mkfs.ext4 (loop devices, a mounted ext4)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let backing = d.path().join("fs.img");
    fs::write(&backing, vec![0u8; 32 << 20]).unwrap();
    let lo = LoopDev::attach(&backing, false);
    mkfs_ext4(&lo.path());
    let before = fs::read(&backing).unwrap();

    let r = write(&w, Path::new(lo.dev()), &["--count", "10"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("ext2/3/4") && r.stderr.contains("--destroy-data-on"),
        "{r:?}"
    );
    assert_eq!(
        fs::read(&backing).unwrap(),
        before,
        "a refused target must be untouched"
    );

    // Mounted: refused even when named for destruction.
    let mut mounted = Mounted::new(&[], lo.dev(), &d.path().join("mnt"));
    let r = write(
        &w,
        Path::new(lo.dev()),
        &["--count", "10", "--destroy-data-on", lo.dev()],
    );
    mounted.unmount();
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("mounted"), "{r:?}");

    // Named explicitly and not mounted: allowed, and verify passes.
    let r = write(
        &w,
        Path::new(lo.dev()),
        &["--count", "10", "--destroy-data-on", lo.dev()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let v = verify(&w, Path::new(lo.dev()), &[]);
    assert_eq!(v.code, 0, "{v:?}");
}

#[test]
fn vanished_target_with_named_run_is_a_dead_device() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = small_run(&w, d.path(), "gone.img");
    let id = verify(&w, &t, &[]).json()["run"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    fs::rename(&t, d.path().join("elsewhere")).unwrap();
    let v = verify(&w, &t, &["--run", &id]);
    assert_eq!(v.code, 1, "{v:?}");
    assert!(v.json()["dead_device"].is_string());
    assert_eq!(counts(&v)["unreadable"], 64);
    // Without a named run, a missing path is a usage error that says what to do.
    let u = verify(&w, &t, &[]);
    assert_eq!(u.code, 2, "{u:?}");
    assert!(u.stderr.contains("--run"), "{u:?}");
}

/// Guarantee 5: verify reads the device, not the page cache. The loop device's page cache
/// is filled with the good records by a buffered read, then the backing file is damaged
/// underneath it: a verify that trusted the cache would pass.
#[test]
fn verify_sees_the_device_not_a_stale_page_cache() {
    if !skip_unless(
        is_root() && have_tool("losetup"),
        "needs root and losetup (loop devices)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let backing = d.path().join("cache.img");
    fs::write(&backing, vec![0u8; 4 << 20]).unwrap();
    let lo = LoopDev::attach(&backing, false);
    let dev = Path::new(lo.dev());
    let wr = write(
        &w,
        dev,
        &[
            "--count",
            "64",
            "--size",
            "256k",
            "--destroy-data-on",
            lo.dev(),
        ],
    );
    assert_eq!(wr.code, 0, "{wr:?}");
    // Fill the block device's page cache with what is there now (all records intact),
    // and keep it open: the kernel drops a block device's cache at its last close.
    let holder = fs::File::open(dev).unwrap();
    let cached = fs::read(dev).unwrap();
    assert_eq!(&cached[..4], b"PLUG");
    // Damage records 10..14 in the backing file, behind the loop device's cache.
    edit(&backing, 10 * 4096, 4 * 4096, |b| b.fill(0));
    let mut again = vec![0u8; 4096];
    holder.read_exact_at(&mut again, 10 * 4096).unwrap();
    assert_eq!(
        &again[..4],
        b"PLUG",
        "the test needs a stale cache: a buffered read still sees the record"
    );
    let v = verify(&w, dev, &[]);
    assert_eq!(v.code, 1, "verify trusted the page cache: {v:?}");
    assert_eq!(counts(&v)["lost"], 4);
    drop(holder);
}
