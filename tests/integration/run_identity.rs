//! Which run belongs to which drive: verify knows a drive by its
//! identity (WWN/serial, a loop device's backing file, a file's path and file system) and
//! by the run stamps on its medium, never by the /dev name alone.
//!
//! A run named for the wrong drive is refused (exit 2) instead of giving a false FAIL; a
//! drive whose /dev name changed (a renumbered loop device) still finds its run; a copy
//! of a target finds its run from the stamps it carries.

use crate::common;
use common::*;
use std::fs;
use std::path::Path;

/// Writes 64 records of 4 KiB to `target` and returns the run id.
fn small_run(w: &WitnessProc, target: &Path) -> String {
    let wr = write(w, target, &["--size", "256k", "--count", "64"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    wr.json()["run_id"].as_str().unwrap().to_string()
}

fn run_id_of(v: &Run) -> String {
    v.json()["run"]["run_id"].as_str().unwrap().to_string()
}

/// `verify A --run <run written to B>` judged B's records against A and said
/// FAIL (exit 1). It must refuse, naming both drives, unless told to go ahead.
#[test]
fn verify_refuses_run_of_another_drive() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let a = d.path().join("a.img");
    let b = d.path().join("b.img");
    let run_a = small_run(&w, &a);
    let run_b = small_run(&w, &b);
    let a_before = fs::read(&a).unwrap();

    let v = verify(&w, &a, &["--run", &run_b]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stdout.is_empty(), "a refusal prints no report: {v:?}");
    let a_canon = fs::canonicalize(&a).unwrap().display().to_string();
    let b_canon = fs::canonicalize(&b).unwrap().display().to_string();
    assert!(v.stderr.contains(&a_canon), "names the target: {v:?}");
    assert!(v.stderr.contains(&b_canon), "names the run's drive: {v:?}");
    assert!(
        v.stderr.contains("--allow-identity-mismatch"),
        "says how to override: {v:?}"
    );
    assert_eq!(fs::read(&a).unwrap(), a_before, "verify changed the target");

    // The user insists: verify proceeds and judges the run against A (A holds none of
    // its records, so that is a FAIL, as asked for).
    let o = verify(&w, &a, &["--run", &run_b, "--allow-identity-mismatch"]);
    assert_eq!(o.code, 1, "{o:?}");
    assert_eq!(o.json()["verdict"], "FAIL");
    assert_eq!(run_id_of(&o), run_b);

    // The right drive is not refused, with or without --run.
    let ok = verify(&w, &a, &["--run", &run_a]);
    assert_eq!(ok.code, 0, "{ok:?}");
    let latest = verify(&w, &b, &[]);
    assert_eq!(latest.code, 0, "{latest:?}");
    assert_eq!(run_id_of(&latest), run_b);
}

/// The other side: a loop device gets a new number when it is attached again
/// (`no run for device path:/dev/loop1 ... pass --run`). The run belongs to the backing
/// file, so verify finds it under any number.
#[test]
fn verify_finds_run_after_loop_device_renumbered() {
    if !skip_unless(is_root(), "needs root for loop devices") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let backing = d.path().join("loop.img");
    fs::write(&backing, vec![0u8; 16 << 20]).unwrap();
    let dummy_file = d.path().join("dummy.img");
    fs::write(&dummy_file, vec![0u8; 1 << 20]).unwrap();

    let first = LoopDev::attach(&backing, true);
    let first_dev = first.dev().to_string();
    let wr = write(&w, Path::new(&first_dev), &["--count", "200"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let run = wr.json()["run_id"].as_str().unwrap().to_string();
    drop(first);

    // The dummy takes the freed number (or another process did): the backing file comes
    // back under a different one.
    let _dummy = LoopDev::attach(&dummy_file, true);
    let again = LoopDev::attach(&backing, true);
    assert_ne!(again.dev(), first_dev, "the loop device was not renumbered");

    let v = verify(&w, &again.path(), &[]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(v.json()["verdict"], "PASS");
    assert_eq!(run_id_of(&v), run);
    assert_eq!(v.json()["counts"]["intact"], 200);
    // And with the run named, the new number is the same drive: no refusal.
    let named = verify(&w, &again.path(), &["--run", &run]);
    assert_eq!(named.code, 0, "{named:?}");
}

/// When the witness has no run under the target's identity (a copy of a
/// target, a file moved to another file system) and knows several runs, verify reads
/// the run id from the stamps on the medium instead of giving up.
#[test]
fn verify_reads_run_id_from_medium() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let a = d.path().join("a.img");
    let b = d.path().join("b.img");
    let run_a = small_run(&w, &a);
    let run_b = small_run(&w, &b);
    assert_ne!(run_a, run_b);
    // A copy of A: another file (another identity), A's stamps.
    let copy = d.path().join("copy-of-a.img");
    fs::copy(&a, &copy).unwrap();

    let v = verify(&w, &copy, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(v.json()["verdict"], "PASS");
    assert_eq!(run_id_of(&v), run_a, "picked a run the copy does not hold");
    assert!(
        v.stderr.contains(&run_a) && v.stderr.contains("stamp"),
        "says the run came from the medium: {v:?}"
    );
    // Naming the run works too: the identity differs but the medium carries the run.
    let named = verify(&w, &copy, &["--run", &run_a]);
    assert_eq!(named.code, 0, "{named:?}");

    // A medium with no stamp and no run under its identity: a usage error that says
    // what to do, not a verdict.
    let blank = d.path().join("blank.img");
    fs::write(&blank, vec![0u8; 256 << 10]).unwrap();
    let u = verify(&w, &blank, &[]);
    assert_eq!(u.code, 2, "{u:?}");
    assert!(u.stderr.contains("--run"), "{u:?}");
    assert!(u.stdout.is_empty(), "{u:?}");
}
