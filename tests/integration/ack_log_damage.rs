//! Damage in an ack log, end to end with the built binary: one damaged byte in an ack log
//! must never give PASS, and the witness must never cut confirmed acks that follow the
//! damage. Also: a fetched log proves it is whole (cut short, spliced, edited by hand).

use crate::common;
use common::*;
use plugpull::wire::frame::{self, Decoded};
use plugpull::wire::msg::Msg;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A temporary directory in RAM when there is one (the issue's reproduction used
/// /dev/shm), else the default temporary directory.
fn ram_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// Type bytes of the frames that hold acks: Acks, CompactAcks and PackedAcks.
fn holds_acks(ty: u8) -> bool {
    ty == frame::FrameType::Acks as u8
        || ty == frame::FrameType::CompactAcks as u8
        || ty == frame::FrameType::PackedAcks as u8
}

/// Byte ranges and types of the frames of a log file, in order, up to the first bad one.
fn frames(bytes: &[u8]) -> Vec<(usize, usize, u8)> {
    let mut out = vec![];
    let mut at = 0;
    while let Decoded::Frame(f) = frame::decode(&bytes[at..]) {
        out.push((at, f.len_bytes, bytes[at + frame::LEN_BYTES]));
        at += f.len_bytes;
    }
    out
}

fn verify_file(target: &Path, log: &Path) -> Run {
    run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        log.to_str().unwrap(),
        "--json",
    ])
}

fn verify_witness(target: &Path, w: &WitnessProc, run_id: &str) -> Run {
    run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--witness",
        &w.addr,
        "--run",
        run_id,
        "--json",
    ])
}

/// A complete run of `count` 4 KiB records over 8 MiB; returns its run id.
fn counted_run(w: &WitnessProc, target: &Path, count: u32) -> String {
    counted_run_placed(w, target, count, "sequential")
}

/// [`counted_run`] with the placement given.
fn counted_run_placed(w: &WitnessProc, target: &Path, count: u32, placement: &str) -> String {
    let r = run([
        "write",
        target.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--size",
        "8M",
        "--count",
        &count.to_string(),
        "--placement",
        placement,
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["run_id"].as_str().unwrap().to_string()
}

/// Records of the reproduction's run (some 20 passes over its 8 MiB).
const COUNT: u64 = 40_000;
/// The writer pauses while this many acks wait to be durable at the witness: it is never
/// further ahead of the witness than that.
const MAX_UNCONFIRMED: u64 = 1024;

/// The issue's reproduction: `write` [`COUNT`] records over 8 MiB, the target copied
/// halfway through (a drive that lost everything after that moment), the full log
/// fetched. Returns the witness, the run id, the complete target, the mid-run copy and
/// the fetched log.
fn issue_reproduction(dir: &Path) -> (WitnessProc, String, PathBuf, PathBuf, PathBuf) {
    let w = WitnessProc::start(&dir.join("w"));
    let target = dir.join("target.img");
    let copy = dir.join("copy.img");
    let err = dir.join("write.err");
    let mut child = Command::new(bin())
        .args(["write", target.to_str().unwrap(), "--witness", &w.addr])
        .args(["--size", "8M", "--count", &COUNT.to_string()])
        .args(["--max-unconfirmed", &MAX_UNCONFIRMED.to_string(), "--json"])
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // Halfway by the run's own acks: the damage flipped at a fifth of the log then lies
    // among acks of records written before the copy, so only the acks after the damage
    // show what the copy lost.
    wait_for_durable_acks(&w, COUNT / 2, &mut child);
    // The writer stands still while the target is copied.
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
    let signal = |sig| unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    signal(libc::SIGSTOP);
    let copied = fs::copy(&target, &copy);
    let durable = durable_acks(&w);
    signal(libc::SIGCONT);
    copied.unwrap();
    // It had written at most MAX_UNCONFIRMED records more than the witness held: every
    // record after those is written, and acked, after the copy.
    assert!(
        durable + 2 * MAX_UNCONFIRMED < COUNT,
        "{durable} of {COUNT} acks were durable when the writer was stopped: too late for a \
         mid-run copy"
    );
    let out = child.wait_with_output().unwrap();
    let stderr = fs::read_to_string(&err).unwrap();
    assert!(out.status.success(), "{out:?}\n{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let run_id = j["run_id"].as_str().unwrap().to_string();
    let log = dir.join("full.acklog");
    fetch_to(&w.addr, &run_id, &log);
    (w, run_id, target, copy, log)
}

fn flip_bit_at_a_fifth(path: &Path) -> (u64, Vec<u8>) {
    let mut b = fs::read(path).unwrap();
    let at = b.len() / 5;
    b[at] ^= 0x10;
    fs::write(path, &b).unwrap();
    (at as u64, b)
}

fn assert_names_damage(r: &Run) {
    let j = r.json();
    let damage = j["ack_log"]["damage"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(!damage.is_empty(), "damage named in JSON: {r:?}");
    assert!(
        damage.iter().any(|d| d.as_str().unwrap().contains("byte")),
        "damage says where: {r:?}"
    );
}

#[test]
fn damaged_ack_log_is_inconclusive_not_pass() {
    let d = ram_tempdir();
    let (_w, _run, target, copy, log) = issue_reproduction(d.path());
    let honest = verify_file(&target, &log);
    assert_eq!(honest.code, 0, "the whole target passes: {honest:?}");
    let lossy = verify_file(&copy, &log);
    assert_eq!(
        lossy.code, 1,
        "the mid-run copy lost acked records: {lossy:?}"
    );

    flip_bit_at_a_fifth(&log);
    // An honest drive with a damaged log: no verdict either way, the damage named.
    let v = verify_file(&target, &log);
    assert_eq!(v.code, 3, "{v:?}");
    assert_eq!(v.json()["verdict"], "INCONCLUSIVE");
    assert_names_damage(&v);
    assert!(
        v.json()["summary"].as_str().unwrap().contains("damage"),
        "{v:?}"
    );
    // The lossy copy: the readable part still proves acknowledged records were lost, so
    // FAIL stays FAIL (docs/report.md), with the damage named. Never PASS.
    let v = verify_file(&copy, &log);
    assert_eq!(v.code, 1, "{v:?}");
    assert_names_damage(&v);
    // The human text says where too.
    let t = run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        log.to_str().unwrap(),
    ]);
    assert_eq!(t.code, 3, "{t:?}");
    assert!(t.stdout.contains("damage"), "{t:?}");
    assert!(t.stdout.contains("at byte "), "{t:?}");
}

#[test]
fn listen_never_truncates_corruption_followed_by_valid_frames() {
    let d = ram_tempdir();
    let (mut w, run_id, target, _copy, _log) = issue_reproduction(d.path());
    // Restart once so the journal is replayed into the log and deleted: the damage below
    // is then in the log alone, as after a disk error.
    w.kill();
    let mut w = WitnessProc::start(&d.path().join("w"));
    w.kill();
    let path = d.path().join("w").join(format!("{run_id}.acklog"));
    let (_, damaged) = flip_bit_at_a_fifth(&path);
    let w = WitnessProc::start(&d.path().join("w"));
    // Serve a fetch and a verify through the witness, then look at the file.
    let v = verify_witness(&target, &w, &run_id);
    assert_eq!(v.code, 3, "{v:?}");
    assert_names_damage(&v);
    // A fetched copy carries the damage along (its end mark cannot hide it).
    let copy = d.path().join("fetched-damaged.acklog");
    fetch_to(&w.addr, &run_id, &copy);
    let v = verify_file(&target, &copy);
    assert_eq!(v.code, 3, "{v:?}");
    assert_names_damage(&v);
    assert!(
        fs::read(&path).unwrap() == damaged,
        "the witness changed the damaged log"
    );
    // A new run on the same witness is still served.
    let other = counted_run(&w, &d.path().join("other.img"), 50);
    let v = verify_witness(&d.path().join("other.img"), &w, &other);
    assert_eq!(v.code, 0, "{v:?}");
    drop(w);
    assert!(
        fs::read(&path).unwrap() == damaged,
        "unchanged after the witness stopped"
    );
}

#[test]
fn log_cut_short_at_frame_boundary_is_detected() {
    let d = ram_tempdir();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let run_id = counted_run(&w, &target, 20_000);
    let log = d.path().join("run.acklog");
    fetch_to(&w.addr, &run_id, &log);
    let full = fs::read(&log).unwrap();
    let fr = frames(&full);
    let acks: Vec<_> = fr.iter().filter(|f| holds_acks(f.2)).collect();
    assert!(acks.len() >= 3, "{fr:?}");
    // After every Acks frame but the last: a shorter log, cut where a frame ends.
    for a in &acks[..acks.len() - 1] {
        let cut = a.0 + a.1;
        fs::write(&log, &full[..cut]).unwrap();
        let v = verify_file(&target, &log);
        assert_eq!(v.code, 3, "cut at {cut}: {v:?}");
        assert!(
            v.json()["ack_log"]["whole"] == false,
            "cut at {cut} is not whole: {v:?}"
        );
    }
}

/// A log cut inside its first frame of acks reads as holding none: it must say the log
/// is not proven whole (it may be cut short), never that the run has no acks.
#[test]
fn log_cut_inside_its_first_acks_frame_is_not_proven_whole() {
    let d = ram_tempdir();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let run_id = counted_run(&w, &target, 200);
    let log = d.path().join("run.acklog");
    fetch_to(&w.addr, &run_id, &log);
    let full = fs::read(&log).unwrap();
    let fr = frames(&full);
    let first = fr
        .iter()
        .find(|f| holds_acks(f.2))
        .expect("a frame of acks");
    let cut = first.0 + first.1 / 2;
    fs::write(&log, &full[..cut]).unwrap();
    let v = verify_file(&target, &log);
    assert_eq!(v.code, 3, "cut at {cut}: {v:?}");
    let j = v.json();
    assert_eq!(j["acked_records"], 0, "{v:?}");
    assert_eq!(j["ack_log"]["whole"], false, "{v:?}");
    let summary = j["summary"].as_str().unwrap();
    assert!(
        !summary.contains("holds no acknowledged records for this run"),
        "{summary}"
    );
    assert!(
        summary.contains("the ack log holds no acknowledged records it can read, and cannot prove it holds every ack"),
        "{summary}"
    );
    let plain = j["plain"].as_str().unwrap();
    assert!(!plain.contains("no write had been confirmed"), "{plain}");
    assert!(
        plain.contains(
            "the list of confirmed writes kept on the other machine is damaged or incomplete"
        ),
        "{plain}"
    );
}

#[test]
fn spliced_log_is_detected() {
    let d = ram_tempdir();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let a = counted_run(&w, &target, 20_000);
    let log_a = d.path().join("a.acklog");
    fetch_to(&w.addr, &a, &log_a);
    let b = counted_run(&w, &d.path().join("b.img"), 30_000);
    let log_b = d.path().join("b.acklog");
    fetch_to(&w.addr, &b, &log_b);
    let (bytes_a, bytes_b) = (fs::read(&log_a).unwrap(), fs::read(&log_b).unwrap());
    let (fa, fb) = (frames(&bytes_a), frames(&bytes_b));
    // A's header, descriptor and first ack frames, then B's frames from the same point
    // on (B's ack numbers continue A's: both logs frame their acks alike).
    let acks_a: Vec<_> = fa.iter().filter(|f| holds_acks(f.2)).collect();
    let acks_b: Vec<_> = fb.iter().filter(|f| holds_acks(f.2)).collect();
    let keep = acks_a[1].0 + acks_a[1].1;
    let from = acks_b[2].0;
    let mut spliced = bytes_a[..keep].to_vec();
    spliced.extend_from_slice(&bytes_b[from..]);
    fs::write(&log_a, &spliced).unwrap();
    let v = verify_file(&target, &log_a);
    assert_ne!(v.code, 0, "{v:?}");
    assert!(v.json()["ack_log"]["whole"] == false, "{v:?}");
    // A's frames with B's end mark glued on.
    let last_b = fb.last().unwrap();
    let body_a = &bytes_a[..fa.last().unwrap().0];
    let mut glued = body_a.to_vec();
    glued.extend_from_slice(&bytes_b[last_b.0..last_b.0 + last_b.1]);
    fs::write(&log_a, &glued).unwrap();
    let v = verify_file(&target, &log_a);
    assert_eq!(v.code, 3, "{v:?}");
    assert!(v.json()["ack_log"]["whole"] == false, "{v:?}");
}

#[test]
fn hand_edited_log_is_detected() {
    // Sequential placement gives PackedAcks frames, random placement plain Acks frames.
    for (placement, ty) in [
        ("sequential", frame::FrameType::PackedAcks),
        ("random", frame::FrameType::Acks),
    ] {
        hand_edited_log_is_detected_with(placement, ty);
    }
}

fn hand_edited_log_is_detected_with(placement: &str, ty: frame::FrameType) {
    let d = ram_tempdir();
    let w = WitnessProc::start(&d.path().join("w"));
    let target = d.path().join("t.img");
    let run_id = counted_run_placed(&w, &target, 5_000, placement);
    let log = d.path().join("run.acklog");
    fetch_to(&w.addr, &run_id, &log);
    let full = fs::read(&log).unwrap();
    let fr = frames(&full);
    // Drop the last ack of the last ack frame and encode the rest again, as a careful
    // editor would: every frame still checks, the numbering still follows, the events
    // and the end mark stay.
    let (start, len, t) = *fr.iter().rfind(|f| holds_acks(f.2)).unwrap();
    assert_eq!(t, ty as u8, "{placement}: the frame under test");
    let Decoded::Frame(f) = frame::decode(&full[start..start + len]) else {
        unreachable!()
    };
    let Ok(Msg::Acks { first, mut acks }) = Msg::decode(&f) else {
        panic!("{placement}: not acks")
    };
    acks.pop();
    let mut edited = full[..start].to_vec();
    plugpull::wire::msg::encode_acks_packed_into(&mut edited, first, &acks);
    edited.extend_from_slice(&full[start + len..]);
    fs::write(&log, &edited).unwrap();
    let v = verify_file(&target, &log);
    assert_eq!(v.code, 3, "{placement}: {v:?}");
    assert!(v.json()["ack_log"]["whole"] == false, "{placement}: {v:?}");
}

/// With `--key-file`, fetch signs the end mark: a forger who drops an ack and writes a
/// fresh (unsigned, digest-correct) mark is caught by verify with the key. Without the
/// key only the digest is checked, and the report says the forgery check was not made.
#[test]
fn forged_log_is_detected_with_the_witness_key() {
    let d = ram_tempdir();
    let key = d.path().join("witness.key");
    fs::write(&key, "a secret shared by witness, writer and verify\n").unwrap();
    let k = key.to_str().unwrap();
    let mut w = Listen::new(&d.path().join("w")).key_file(&key).start();
    let addr = w.addr.clone();
    let target = d.path().join("t.img");
    let r = run([
        "write",
        target.to_str().unwrap(),
        "--witness",
        &addr,
        "--key-file",
        k,
        "--size",
        "8M",
        "--count",
        "300",
        "--json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let run_id = r.json()["run_id"].as_str().unwrap().to_string();
    let log = d.path().join("run.acklog");
    let f = run([
        "fetch",
        "--witness",
        &addr,
        "--key-file",
        k,
        "--run",
        &run_id,
        "-o",
    ]
    .into_iter()
    .chain([log.to_str().unwrap()]));
    assert_eq!(f.code, 0, "{f:?}");
    w.kill();
    let verify_keyed = |extra: &[&str]| {
        let mut a = vec!["verify", target.to_str().unwrap(), "--rehearsal", "--acks"];
        a.push(log.to_str().unwrap());
        a.push("--json");
        a.extend_from_slice(extra);
        run(a)
    };
    let v = verify_keyed(&["--key-file", k]);
    assert_eq!(v.code, 0, "the signed log passes with the key: {v:?}");
    assert!(
        v.json()["ack_log"]["wholeness"]
            .as_str()
            .unwrap()
            .contains("signed")
    );
    // Forge: one ack fewer, a fresh mark whose digest matches (no key needed for that).
    let mut forged = plugpull::witness::store::reader::read_log_file(&log).unwrap();
    forged.acks.pop();
    plugpull::witness::store::export::write_log_file(&log, &forged).unwrap();
    let v = verify_keyed(&["--key-file", k]);
    assert_eq!(v.code, 3, "{v:?}");
    assert!(v.json()["ack_log"]["whole"] == false, "{v:?}");
    let v = verify_keyed(&[]);
    assert_eq!(
        v.code, 0,
        "without the key only the digest is checked: {v:?}"
    );
}
