//! The tree mode (`plugpull write DIR`, `plugpull verify DIR`, docs/tree.md) against
//! damage done on purpose: a finished tree is damaged file by file, one way per file
//! (remove a directory entry, move a file, revert a rename, truncate, flip a bit, put an
//! older version back, put another file's or another run's data in place, zero a tail),
//! and verify must name exactly those files with exactly the class the damage means.
//! Files never acknowledged never fail. The testing-only flush mode exists and is hidden.

use crate::common;

use common::{WitnessProc, run, verify, write};
use plugpull::model::{RunLog, RunSelector};
use plugpull::record::{RecordId, RunId, RunKey, fill_record};
use plugpull::tree::plan::{Arrival, FileStep, TreePlan, TreeScale, plan};
use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

const FILES: u32 = 400;
const SEED: u64 = 14;

/// Writes the whole plan of SEED into `dir`; returns the run's root and its log.
fn write_tree(w: &WitnessProc, dir: &Path, extra: &[&str]) -> (PathBuf, RunLog) {
    let files = FILES.to_string();
    let seed = SEED.to_string();
    let mut args = vec!["--files", &files, "--seed", &seed, "-q"];
    args.extend_from_slice(extra);
    let r = write(w, dir, &args);
    assert_eq!(r.code, 0, "{r:?}");
    let root = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("plugpull-")
        })
        .expect("the run's root");
    let hex = root.file_name().unwrap().to_string_lossy()["plugpull-".len()..].to_string();
    let run = RunId::parse(&hex).unwrap();
    let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run)).unwrap();
    // `--json`: the summary names the run and counts what the witness holds.
    let j = r.json();
    assert_eq!(j["run"], hex.as_str(), "{r:?}");
    assert_eq!(j["files_acked"], log.acks.len() as u64, "{r:?}");
    (root, log)
}

/// The current (last) version of every path, in plan order.
fn latest(p: &TreePlan) -> Vec<&FileStep> {
    let mut last: BTreeMap<&str, &FileStep> = BTreeMap::new();
    for f in p.files() {
        last.insert(&f.path, f);
    }
    let mut v: Vec<&FileStep> = last.into_values().collect();
    v.sort_by_key(|f| f.id);
    v
}

/// The bytes of file version `id` as the writer wrote them (write time from its ack).
fn content(log: &RunLog, run: RunId, id: u64) -> Vec<u8> {
    let a = log.acks.iter().find(|a| a.record.seq == id).expect("acked");
    let mut buf = vec![0u8; a.record.len_bytes() as usize];
    fill_record(&mut buf, &RunKey::new(run), run, &a.record);
    buf
}

fn findings(r: &common::Run) -> BTreeMap<String, (String, String)> {
    let j = r.json();
    j["tree"]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no tree findings: {r:?}"))
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                (
                    f["class"].as_str().unwrap().to_string(),
                    f["layer"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

#[test]
fn an_undamaged_tree_passes_and_every_damage_is_named_as_what_was_done() {
    let wdir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(wdir.path());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (root, log) = write_tree(&w, dir.path(), &[]);
    let run_id = log.descriptor.run_id;
    let p = plan(SEED, TreeScale::scaled_down(FILES));
    assert_eq!(
        log.acks.len(),
        p.files().count(),
        "every file version acked"
    );

    let clean = verify(&w, dir.path(), &[]);
    assert_eq!(clean.code, 0, "{clean:?}");
    let j = clean.json();
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["tree"]["file_counts"]["intact"], latest(&p).len() as u64);
    assert!(j["tree"]["findings"].as_array().unwrap().is_empty());
    let plain = j["plain"].as_str().unwrap();
    assert!(
        plain.starts_with("The storage under this directory"),
        "{plain}"
    );

    // Pick distinct current files for each damage.
    let cur = latest(&p);
    let mut used = HashSet::new();
    let mut pick = |cond: &dyn Fn(&FileStep) -> bool| -> FileStep {
        let f = cur
            .iter()
            .find(|f| !used.contains(&f.id) && cond(f))
            .expect("the plan has such a file: pick another SEED");
        used.insert(f.id);
        (*f).clone()
    };
    let plain = |f: &FileStep| f.arrival == Arrival::InPlace && f.replaces.is_none();
    let removed = pick(&|f| plain(f));
    let moved = pick(&|f| plain(f));
    let unrenamed = pick(&|f| matches!(f.arrival, Arrival::Renamed { .. }) && f.replaces.is_none());
    let truncated = pick(&|f| plain(f) && f.sectors >= 4);
    let flipped = pick(&|f| plain(f) && f.sectors >= 2);
    let reverted_in_place = pick(&|f| f.arrival == Arrival::InPlace && f.replaces.is_some());
    let reverted_rename =
        pick(&|f| matches!(f.arrival, Arrival::Renamed { .. }) && f.replaces.is_some());
    let overwritten = pick(&|f| plain(f));
    let donor = pick(&|f| plain(f));
    let foreign = pick(&|f| plain(f));
    let torn = pick(&|f| plain(f) && f.sectors >= 4);
    let at = |f: &FileStep| root.join(&f.path);

    fs::remove_file(at(&removed)).unwrap();
    fs::rename(at(&moved), root.join("t0/moved-away")).unwrap();
    let Arrival::Renamed { tmp } = &unrenamed.arrival else {
        unreachable!()
    };
    fs::rename(at(&unrenamed), root.join(tmp)).unwrap();
    let t = fs::OpenOptions::new()
        .write(true)
        .open(at(&truncated))
        .unwrap();
    t.set_len(truncated.len_bytes() / 2 / 512 * 512).unwrap();
    drop(t);
    let mut b = fs::read(at(&flipped)).unwrap();
    b[700] ^= 0x10;
    fs::write(at(&flipped), &b).unwrap();
    for f in [&reverted_in_place, &reverted_rename] {
        fs::write(at(f), content(&log, run_id, f.replaces.unwrap())).unwrap();
    }
    fs::write(at(&overwritten), fs::read(at(&donor)).unwrap()).unwrap();
    let other = RunId([0x5a; 16]);
    let rec = RecordId {
        stream: 0,
        seq: foreign.id,
        offset: 0,
        sectors: foreign.sectors,
        write_time_ns: 1,
    };
    let mut stale = vec![0u8; rec.len_bytes() as usize];
    fill_record(&mut stale, &RunKey::new(other), other, &rec);
    fs::write(at(&foreign), stale).unwrap();
    let mut b = fs::read(at(&torn)).unwrap();
    let half = b.len() / 2 / 512 * 512;
    b[half..].fill(0);
    fs::write(at(&torn), &b).unwrap();

    let r = verify(&w, dir.path(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["verdict"], "FAIL");
    let got = findings(&r);
    let want: BTreeMap<String, &str> = [
        (&removed, "missing"),
        (&moved, "missing"),
        (&unrenamed, "renamed-back"),
        (&truncated, "short"),
        (&flipped, "corrupt"),
        (&reverted_in_place, "lost"),
        (&reverted_rename, "renamed-back"),
        (&overwritten, "misdirected"),
        (&foreign, "stale"),
        (&torn, "shorn"),
    ]
    .into_iter()
    .map(|(f, c)| (f.path.clone(), c))
    .collect();
    let classes: BTreeMap<String, &str> = got
        .iter()
        .map(|(p, (c, _))| (p.clone(), c.as_str()))
        .collect();
    assert_eq!(classes, want, "{}", r.stdout);
    // The layer the evidence points at, and the evidence.
    let layer = |f: &FileStep| got[&f.path].1.as_str();
    assert_eq!(
        layer(&moved),
        format!(
            "directory entry: the file's data survived under {}",
            root.join("t0/moved-away").display()
        )
    );
    assert_eq!(
        layer(&removed),
        "directory entry and data: neither the name nor the data was found"
    );
    assert_eq!(
        layer(&unrenamed),
        format!("directory: the rename to the final name was lost; the data survived under {tmp}")
    );
    assert_eq!(
        layer(&truncated),
        "file size (inode): the acknowledged length was lost"
    );
    // The donor itself is untouched and intact; the device counts agree.
    assert!(!got.contains_key(&donor.path));
    let j = r.json();
    // The same HTML report as for devices.
    let json = dir.path().join("verify.json");
    fs::write(&json, &r.stdout).unwrap();
    let html = dir.path().join("report.html");
    let rep = run([
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(rep.code, 0, "{rep:?}");
    // The banner carries the run's verdict (not just any "FAIL" on the page).
    let page = fs::read_to_string(&html).unwrap();
    assert_eq!(j["verdict"], "FAIL");
    assert!(
        page.contains("id=\"verdict\" data-verdict=\"FAIL\""),
        "no FAIL banner in {}",
        html.display()
    );
    assert_eq!(j["tree"]["file_counts"]["missing"], 2);
    assert_eq!(j["tree"]["file_counts"]["renamed-back"], 2);
    assert_eq!(j["counts"]["corrupt"], 1);
}

#[test]
fn files_never_acknowledged_are_reported_as_survivors_never_failures() {
    let wdir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(wdir.path());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (root, log) = write_tree(&w, dir.path(), &["--count", "30"]);
    assert_eq!(log.acks.len(), 30);
    let p = plan(SEED, TreeScale::scaled_down(FILES));
    // A planned file the run never reached, present with garbage (an unflushed write
    // that partly survived), and one the run never wrote at all.
    let unwritten = p.files().nth(100).unwrap();
    fs::create_dir_all(root.join(unwritten.dir())).unwrap();
    fs::write(root.join(&unwritten.path), vec![0xabu8; 1024]).unwrap();
    let r = verify(&w, dir.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["tree"]["unacked_present"], 1);
    assert!(j["tree"]["unacked_absent"].as_u64().unwrap() > 300);
}

#[test]
fn the_dir_fsync_skipping_mode_exists_is_hidden_and_is_for_trees_only() {
    let wdir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(wdir.path());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (_root, log) = write_tree(
        &w,
        dir.path(),
        &["--count", "5", "--flush", "testing-only-skip-dir-fsync"],
    );
    let ts = log.descriptor.tree.expect("a tree run");
    assert_eq!(ts.flush, "testing-only-skip-dir-fsync");
    let help = run(["write", "--help"]);
    assert!(help.stdout.contains("--flush"), "{help:?}");
    assert!(
        !help.stdout.contains("skip-dir"),
        "hidden from --help: {help:?}"
    );
    let file = dir.path().join("plain.img");
    let r = run([
        "write",
        file.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--size",
        "1M",
        "--flush",
        "testing-only-skip-dir-fsync",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("directory targets only"), "{r:?}");
    assert!(!file.exists());
}

/// Guarantee 3 for trees: an in-place overwrite that was under way at the cut (the
/// truncate durable, the new content not yet) legitimately destroyed the acknowledged
/// version under that name: no false alarm.
#[test]
fn an_unacknowledged_in_place_overwrite_under_way_is_no_false_alarm() {
    let p = plan(SEED, TreeScale::scaled_down(FILES));
    let o = p
        .files()
        .find(|f| f.arrival == Arrival::InPlace && f.replaces.is_some())
        .expect("the plan overwrites a file in place: pick another SEED")
        .clone();
    let wdir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(wdir.path());
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Stop just before the overwrite: every earlier file version is acknowledged.
    let count = (o.id - 1).to_string();
    let (root, log) = write_tree(&w, dir.path(), &["--count", &count]);
    assert_eq!(log.acks.last().unwrap().record.seq, o.id - 1);
    // What open(O_TRUNC) of the overwrite leaves when the cut comes before its write.
    fs::write(root.join(&o.path), b"").unwrap();
    let r = verify(&w, dir.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["tree"]["file_counts"]["superseded"], 1, "{r:?}");
}

/// Guarantee 1 for trees: a failed operation (here ENOSPC on a 2 MiB tmpfs) stops the
/// run with exit 4, and every file acknowledged before it is whole: nothing was acked
/// for the file whose write failed.
#[test]
fn a_full_file_system_stops_the_run_and_nothing_after_the_failure_is_acked() {
    if !common::skip_unless(common::is_root(), "needs root to mount a small tmpfs") {
        return;
    }
    let wdir = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(wdir.path());
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let m = common::Mounted::new(
        &["-t", "tmpfs", "-o", "size=2m"],
        "tmpfs",
        &base.path().join("small"),
    );
    let files = FILES.to_string();
    let r = write(&w, &m.at, &["--files", &files, "--seed", "3"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stderr.contains("No space left"), "{r:?}");
    let v = verify(&w, &m.at, &[]);
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    let acked = j["tree"]["files_acked"].as_u64().unwrap();
    assert!(acked > 10, "{v:?}");
    // The file that hit ENOSPC is there (partly) but was never acknowledged.
    assert!(j["tree"]["unacked_present"].as_u64().unwrap() >= 1, "{v:?}");
}

#[test]
fn a_log_from_before_tree_runs_still_reads_and_is_refused_for_a_directory() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old-log/pre-tree.acklog");
    let (log, _) = plugpull::witness::store::reader::read_log_file_checked(&fixture, None).unwrap();
    assert_eq!(log.acks.len(), 20);
    assert!(log.descriptor.tree.is_none());
    let dir = tempfile::tempdir().unwrap();
    let r = run([
        "verify",
        dir.path().to_str().unwrap(),
        "--rehearsal",
        "--acks",
        fixture.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not a tree run"), "{r:?}");
}
