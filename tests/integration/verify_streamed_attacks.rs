//! Attacks on verify's one streamed path: a witness that answers the stamp search with
//! another run, goes away between its two fetches or mid-fetch; a device key naming
//! another drive; a gone drive judged from a log (ring wrapped, random placement in
//! parts, an impossible log); `cycle::judge` on a gone drive, a refused log and a run
//! later runs superseded. Each checks the exit code, the report's fields, the target
//! left as it was and the temporary directory left empty.

use crate::common;
use common::*;
use plugpull::model::RunSelector;
use plugpull::record::RunId;
use plugpull::wire::frame::{self, Decoded};
use plugpull::wire::msg::{Msg, NO_RUN_FOR_DEVICE};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The gone drive and `cycle::judge` attacks.
mod gone;

/// `plugpull ARGS` with `TMPDIR` set to `tmp`, so the test sees every temporary file
/// the command made (and left).
pub(crate) fn run_in(tmp: &Path, args: &[&str]) -> Run {
    let out = std::process::Command::new(bin())
        .args(args)
        .env("TMPDIR", tmp)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// What is left in `dir`.
pub(crate) fn left_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A private TMPDIR for one command, on /dev/shm (off the targets' file system).
pub(crate) fn private_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap()
}

/// The witness's whole reply to a Fetch of `run`, byte for byte.
fn reply_of(addr: &str, run: RunId) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&Msg::Fetch(RunSelector::Run(run)).encode())
        .unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    reply
}

pub(crate) fn read_msg(s: &mut TcpStream) -> Option<Msg> {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Decoded::Frame(f) = frame::decode(&buf) {
            return Msg::decode(&f).ok();
        }
        let n = s.read(&mut b).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
    }
}

/// The Fetch selectors a scripted witness was asked, in order.
pub(crate) type Asked = Arc<Mutex<Vec<RunSelector>>>;

/// A witness that answers `connections` connections, then stops listening (a witness
/// gone): a Fetch with what `answer` makes of its selector (None: closes at once),
/// anything else (a verdict note) by closing.
pub(crate) fn scripted_witness(
    connections: usize,
    answer: impl Fn(&RunSelector) -> Option<Vec<u8>> + Send + 'static,
) -> (String, Asked) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let asked: Asked = Default::default();
    let seen = asked.clone();
    std::thread::spawn(move || {
        for _ in 0..connections {
            let Ok((mut s, _)) = l.accept() else { return };
            if let Some(Msg::Fetch(sel)) = read_msg(&mut s) {
                seen.lock().unwrap().push(sel.clone());
                if let Some(reply) = answer(&sel) {
                    let _ = s.write_all(&reply);
                }
            }
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    (addr, asked)
}

pub(crate) fn no_run_for_device() -> Vec<u8> {
    Msg::Error {
        message: format!("{NO_RUN_FOR_DEVICE} key:x at this witness; pass --run RUN_ID"),
    }
    .encode()
}

/// A drive written by two runs (B, then A over its first records) and a copy of it
/// (another medium: the witness has no run under its key): (witness, drive, copy, A, B).
struct TwoRuns {
    _dir: tempfile::TempDir,
    w: WitnessProc,
    copy: PathBuf,
    a: String,
    b: String,
}

fn two_runs() -> TwoRuns {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&dir.path().join("w"));
    let t = dir.path().join("t.img");
    let mut ids = vec![];
    for count in ["300", "100"] {
        let wr = write(
            &w,
            &t,
            &["--size", "1M", "--count", count, "--record-size", "4K"],
        );
        assert_eq!(wr.code, 0, "{wr:?}");
        ids.push(wr.json()["run_id"].as_str().unwrap().to_string());
    }
    let copy = dir.path().join("copy.img");
    std::fs::copy(&t, &copy).unwrap();
    let (b, a) = (ids[0].clone(), ids[1].clone());
    TwoRuns {
        _dir: dir,
        w,
        copy,
        a,
        b,
    }
}

pub(crate) fn run_of(r: &Run) -> String {
    r.json()["run"]["run_id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The stamp search on a copy, through the real witness: the newest stamp is of run A
/// (written after B), A is fetched and judged, PASS; the copy is left as it was and no
/// temporary file stays behind.
#[test]
fn the_stamp_search_on_a_copy_judges_the_newest_run_and_leaves_nothing() {
    let r = two_runs();
    let before = std::fs::read(&r.copy).unwrap();
    let tmp = private_tmp();
    let c = r.copy.to_str().unwrap();
    let v = run_in(
        tmp.path(),
        &["verify", c, "--witness", &r.w.addr, "--json", "--rehearsal"],
    );
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(run_of(&v), r.a, "{v:?}");
    assert_eq!(v.json()["counts"]["intact"], 100, "{v:?}");
    assert!(
        v.stderr.contains(&format!("is of run {} (written", r.a)),
        "{v:?}"
    );
    assert_eq!(
        std::fs::read(&r.copy).unwrap(),
        before,
        "the copy was written"
    );
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// The stamps name run A; a witness that answers the fetch of A with run B's log (a
/// restarted witness that mixed up its runs, a hostile one) must be refused: verify
/// asked for A, and B's acks are promises about another run.
#[test]
fn a_witness_that_sends_another_run_than_the_stamps_name_is_refused() {
    let r = two_runs();
    let b = RunId::parse(&r.b).unwrap();
    let wrong = reply_of(&r.w.addr, b);
    let (addr, asked) = scripted_witness(3, move |sel| match sel {
        RunSelector::LatestForDevice(_) => Some(no_run_for_device()),
        RunSelector::Run(_) => Some(wrong.clone()),
    });
    let tmp = private_tmp();
    let c = r.copy.to_str().unwrap();
    let v = run_in(
        tmp.path(),
        &["verify", c, "--witness", &addr, "--json", "--rehearsal"],
    );
    let a = RunId::parse(&r.a).unwrap();
    assert!(
        asked.lock().unwrap().contains(&RunSelector::Run(a)),
        "verify asked for the stamped run: {:?}",
        asked.lock().unwrap()
    );
    assert_eq!(
        v.code,
        2,
        "judged run {} when it asked for {}: {v:?}",
        run_of(&v),
        r.a
    );
    assert!(v.stderr.contains(&r.b), "{v:?}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// The witness answers the device key (no run) and is gone before the fetch of the run
/// the stamps name: an error (exit 2) naming that run, and no temporary file left.
#[test]
fn a_witness_gone_between_the_two_fetches_is_an_error_that_leaves_nothing() {
    let r = two_runs();
    let (addr, _) = scripted_witness(1, |_| Some(no_run_for_device()));
    let tmp = private_tmp();
    let c = r.copy.to_str().unwrap();
    let v = run_in(
        tmp.path(),
        &["verify", c, "--witness", &addr, "--json", "--rehearsal"],
    );
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stdout.is_empty(), "a report without acks: {v:?}");
    assert!(
        v.stderr
            .contains(&format!("the newest stamp on {c} is of run {}", r.a)),
        "{v:?}"
    );
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// The fetch of the stamped run breaks off mid-reply: an error, nothing left behind.
#[test]
fn a_stamped_run_cut_off_mid_fetch_is_an_error_that_leaves_nothing() {
    let r = two_runs();
    let a = RunId::parse(&r.a).unwrap();
    let whole = reply_of(&r.w.addr, a);
    let half = whole[..whole.len() / 2].to_vec();
    let (addr, _) = scripted_witness(2, move |sel| match sel {
        RunSelector::LatestForDevice(_) => Some(no_run_for_device()),
        RunSelector::Run(_) => Some(half.clone()),
    });
    let tmp = private_tmp();
    let c = r.copy.to_str().unwrap();
    let v = run_in(
        tmp.path(),
        &["verify", c, "--witness", &addr, "--json", "--rehearsal"],
    );
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stdout.is_empty(), "{v:?}");
    assert!(v.stderr.contains(&r.a), "{v:?}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// The witness's run under the drive's key was written to another drive and this one
/// carries no stamp at all: refused (exit 2) naming --allow-identity-mismatch, never a
/// FAIL of every record "lost"; nothing left behind.
#[test]
fn a_device_key_that_names_another_drive_is_refused() {
    let r = two_runs();
    let a = RunId::parse(&r.a).unwrap();
    let other = reply_of(&r.w.addr, a);
    let (addr, _) = scripted_witness(3, move |_| Some(other.clone()));
    let blank = r.copy.with_file_name("blank.img");
    std::fs::File::create(&blank)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let tmp = private_tmp();
    let v = run_in(
        tmp.path(),
        &[
            "verify",
            blank.to_str().unwrap(),
            "--witness",
            &addr,
            "--json",
            "--rehearsal",
        ],
    );
    assert_eq!(v.code, 2, "{v:?}");
    assert!(v.stderr.contains("--allow-identity-mismatch"), "{v:?}");
    assert!(v.stderr.contains(&r.a), "{v:?}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// A copy of a drive written by a long run B, then by a short run A far from where the
/// stamp sample looks (`lose`: A lost its last four acked records, B's old content
/// still there, as a drive that dropped the writes leaves it). The drive's newest run
/// is A: it must be the run judged, FAIL with four lost, else PASS.
fn newest_run_away_from_the_sample(lose: bool) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&dir.path().join("w"));
    let t = dir.path().join("t.img");
    let b = write(
        &w,
        &t,
        &["--size", "64M", "--count", "1024", "--record-size", "64K"],
    );
    assert_eq!(b.code, 0, "{b:?}");
    let before_a = std::fs::read(&t).unwrap();
    let a_at: u64 = (3 << 20) + (8 << 10);
    let a = write(
        &w,
        &t,
        &[
            "--offset",
            &a_at.to_string(),
            "--size",
            "32K",
            "--count",
            "8",
            "--record-size",
            "4K",
        ],
    );
    assert_eq!(a.code, 0, "{a:?}");
    let run_a = a.json()["run_id"].as_str().unwrap().to_string();
    let copy = dir.path().join("copy.img");
    std::fs::copy(&t, &copy).unwrap();
    if lose {
        let lost = (a_at + 16 * 1024) as usize..(a_at + 32 * 1024) as usize;
        let old = before_a[lost.clone()].to_vec();
        edit(&copy, lost.start as u64, old.len(), |b| {
            b.copy_from_slice(&old)
        });
    }
    let tmp = private_tmp();
    let v = run_in(
        tmp.path(),
        &[
            "verify",
            copy.to_str().unwrap(),
            "--witness",
            &w.addr,
            "--json",
            "--rehearsal",
        ],
    );
    let r = v.json();
    assert_eq!(
        run_of(&v),
        run_a,
        "judged run {} ({}, counts {}) while the drive's newest run is {run_a}",
        run_of(&v),
        r["verdict"],
        r["counts"]
    );
    assert_eq!(v.code, if lose { 1 } else { 0 }, "{v:?}");
    assert_eq!(
        r["counts"]["intact"],
        if lose { 4 } else { 8 },
        "{}",
        r["counts"]
    );
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

#[test]
fn the_stamp_search_judges_a_newer_run_that_lost_records_away_from_the_sample() {
    newest_run_away_from_the_sample(true);
}

#[test]
fn the_stamp_search_judges_a_newer_intact_run_away_from_the_sample() {
    newest_run_away_from_the_sample(false);
}

/// Run B's 64 KiB records, then run A's 4 KiB records inside one of them: verified by
/// B's id, the record A wrote into is legitimately overwritten by a later run
/// (superseded, A named), not a failure of the drive.
#[test]
fn a_record_partly_overwritten_by_a_later_run_is_superseded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&dir.path().join("w"));
    let t = dir.path().join("t.img");
    let b = write(
        &w,
        &t,
        &["--size", "1M", "--count", "16", "--record-size", "64K"],
    );
    assert_eq!(b.code, 0, "{b:?}");
    let run_b = b.json()["run_id"].as_str().unwrap().to_string();
    let a = write(
        &w,
        &t,
        &[
            "--offset",
            "8K",
            "--size",
            "32K",
            "--count",
            "8",
            "--record-size",
            "4K",
        ],
    );
    assert_eq!(a.code, 0, "{a:?}");
    let run_a = a.json()["run_id"].as_str().unwrap().to_string();
    // A campaign's cycle on the same run (the later runs known from the start).
    let log =
        plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(RunId::parse(&run_b).unwrap()))
            .unwrap();
    let dev: Arc<dyn plugpull::device::Device> =
        Arc::new(plugpull::device::FileDevice::open_read(&t).unwrap());
    let c = plugpull::cycle::judge(Ok(dev), &log, Duration::from_secs(5)).unwrap();
    let v = verify(&w, &t, &["--run", &run_b]);
    let r = v.json();
    assert_eq!(
        v.code, 0,
        "{}: {} (cycle::judge: {:?} {:?} {:?})",
        r["verdict"], r["counts"], c.verdict, c.counts, c.superseded_by_runs
    );
    assert_eq!(r["counts"]["superseded"], 1, "{}", r["counts"]);
    assert_eq!(r["superseded_by_runs"][0], run_a.as_str(), "{r}");
}
