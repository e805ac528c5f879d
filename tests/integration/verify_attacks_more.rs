//! More attacks on `verify`: the stamp search's walk to later runs of the same drive
//! (`verify::witnessed::newest_carried`) through chains of runs, copies made before a
//! later run, a later run the witness lists but cannot send, a witness whose runs list
//! each other; and a drive that misplaces every write, judged whole and in parts from
//! the command line. Each checks the run judged, the exit code, stderr and that the
//! temporary directory is left empty.

use crate::common;
use crate::verify_streamed_attacks::{
    left_in, no_run_for_device, private_tmp, run_in, run_of, scripted_witness,
};
use common::*;
use plugpull::model::{RunLog, RunSelector, WitnessEvent};
use plugpull::record::RunId;
use plugpull::wire::msg::Msg;
use std::path::{Path, PathBuf};

mod misplaced;

/// A drive written by a long run X (64 MiB of 64 KiB records), then by two short runs
/// Y and Z at places the stamp sample does not look (`medium::newest_stamp`: the first
/// MiB, every 64 KiB, the powers of two), with copies made after Y and after Z.
struct Chain {
    dir: tempfile::TempDir,
    w: WitnessProc,
    after_y: PathBuf,
    after_z: PathBuf,
    /// The drive's bytes before Z was written.
    before_z: Vec<u8>,
    x: String,
    y: String,
    z: String,
}

const Y_AT: u64 = (3 << 20) + (8 << 10);
const Z_AT: u64 = (5 << 20) + (8 << 10);

fn chain() -> Chain {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = WitnessProc::start(&dir.path().join("w"));
    let t = dir.path().join("t.img");
    let id = |r: &Run| r.json()["run_id"].as_str().unwrap().to_string();
    let x = write(
        &w,
        &t,
        &["--size", "64M", "--count", "1024", "--record-size", "64K"],
    );
    assert_eq!(x.code, 0, "{x:?}");
    let short = |at: u64| {
        let r = write(
            &w,
            &t,
            &[
                "--offset",
                &at.to_string(),
                "--size",
                "32K",
                "--count",
                "8",
                "--record-size",
                "4K",
            ],
        );
        assert_eq!(r.code, 0, "{r:?}");
        id(&r)
    };
    let y = short(Y_AT);
    let after_y = dir.path().join("after_y.img");
    std::fs::copy(&t, &after_y).unwrap();
    let before_z = std::fs::read(&t).unwrap();
    let z = short(Z_AT);
    let after_z = dir.path().join("after_z.img");
    std::fs::copy(&t, &after_z).unwrap();
    Chain {
        w,
        after_y,
        after_z,
        before_z,
        x: id(&x),
        y,
        z,
        dir,
    }
}

/// `verify COPY --witness ADDR --json --rehearsal` with a private TMPDIR: (the run, what
/// was left in TMPDIR).
fn verify_copy(addr: &str, copy: &Path) -> (Run, Vec<String>) {
    let tmp = private_tmp();
    let v = run_in(
        tmp.path(),
        &[
            "verify",
            copy.to_str().unwrap(),
            "--witness",
            addr,
            "--json",
            "--rehearsal",
        ],
    );
    (v, left_in(tmp.path()))
}

/// A chain of later runs: the sample names X; X's later runs are Y and Z. The copy made
/// after Z is judged by Z (the newest), the copy made before Z by Y (Z's stamps are on
/// the drive but not on that copy); both PASS, stderr names the step taken, nothing is
/// left behind.
#[test]
fn a_chain_of_later_runs_judges_the_newest_the_copy_carries() {
    let c = chain();
    for (copy, want) in [(&c.after_z, &c.z), (&c.after_y, &c.y)] {
        let (v, left) = verify_copy(&c.w.addr, copy);
        assert!(
            v.stderr.contains(&format!("is of run {}", c.x)),
            "the sample should name X: {v:?}"
        );
        assert_eq!(&run_of(&v), want, "{} {v:?}", copy.display());
        assert_eq!(v.code, 0, "{v:?}");
        assert_eq!(v.json()["counts"]["intact"], 8, "{}", v.json()["counts"]);
        assert!(v.stderr.contains(&format!("run {want}, begun")), "{v:?}");
        assert_eq!(left, Vec::<String>::new());
    }
}

/// The copy made after Z, with Z's sectors put back as they were before Z (a drive that
/// acknowledged Z's writes and kept none). The witness knows Z was written to the drive
/// after X and Y, and Z left no stamp: judged by Y, verify must at least say on stderr
/// that a later run (Z) left no stamp, rather than PASS in silence on an older run.
#[test]
fn a_later_run_that_lost_every_record_is_named_on_stderr() {
    let c = chain();
    let lost = Z_AT as usize..(Z_AT + 32 * 1024) as usize;
    let old = c.before_z[lost.clone()].to_vec();
    edit(&c.after_z, lost.start as u64, old.len(), |b| {
        b.copy_from_slice(&old)
    });
    let (v, left) = verify_copy(&c.w.addr, &c.after_z);
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(run_of(&v), c.y, "{v:?}");
    assert!(
        v.stderr.contains(&c.z),
        "exit {} ({}) on run Y, and stderr never names run {} that the witness says was \
         written to this drive after it and left no stamp:\n{}",
        v.code,
        v.json()["verdict"],
        c.z,
        v.stderr
    );
}

/// A fetch reply for `log` with `extra` events after its own.
fn reply(log: &RunLog, extra: &[WitnessEvent]) -> Vec<u8> {
    let mut out = Msg::FetchRun(log.descriptor.clone()).encode();
    for (k, chunk) in log.acks.chunks(1000).enumerate() {
        out.extend(
            Msg::Acks {
                first: (k * 1000) as u64,
                acks: chunk.to_vec(),
            }
            .encode(),
        );
    }
    for e in log.events.iter().chain(extra) {
        out.extend(Msg::Event(e.clone()).encode());
    }
    out.extend(
        Msg::FetchEnd {
            acks: log.acks.len() as u64,
        }
        .encode(),
    );
    out
}

fn fetch(addr: &str, run: &str) -> RunLog {
    plugpull::witness::client::fetch(addr, &RunSelector::Run(RunId::parse(run).unwrap())).unwrap()
}

fn later_run(at_ns: u64, run: &str) -> WitnessEvent {
    WitnessEvent {
        at_ns,
        kind: plugpull::model::LATER_RUN_EVENT.into(),
        peer: String::new(),
        durable_acks: 0,
        last_ack_at_ns: None,
        last_frame_at_ns: None,
        detail: run.into(),
    }
}

/// A witness that lists Y and Z as later runs of X but cannot send Z (its log gone):
/// verify must not judge a run as if Z did not exist without saying so; an error
/// naming Z (exit 2) or no verdict, and nothing left in TMPDIR.
#[test]
fn a_witness_that_lists_a_later_run_it_cannot_send() {
    let c = chain();
    let (x, y) = (fetch(&c.w.addr, &c.x), fetch(&c.w.addr, &c.y));
    let z = RunId::parse(&c.z).unwrap();
    let (rx, ry) = (reply(&x, &[]), reply(&y, &[]));
    let (idx, idy) = (x.descriptor.run_id, y.descriptor.run_id);
    let (addr, _) = scripted_witness(usize::MAX, move |sel| match sel {
        RunSelector::LatestForDevice(_) => Some(no_run_for_device()),
        RunSelector::Run(r) if *r == idx => Some(rx.clone()),
        RunSelector::Run(r) if *r == idy => Some(ry.clone()),
        RunSelector::Run(r) if *r == z => Some(
            Msg::Error {
                message: format!("no run {z} at this witness"),
            }
            .encode(),
        ),
        _ => None,
    });
    let (v, left) = verify_copy(&addr, &c.after_y);
    assert_eq!(left, Vec::<String>::new());
    assert!(
        v.code == 2 && v.stderr.contains(&c.z) || v.code == 3,
        "{v:?}"
    );
}

/// A hostile witness whose runs list each other as later runs (X lists Y, Y lists X):
/// the copy carries both. The walk must end, with the run the drive last wrote (Y,
/// begun after X ended) judged, not flip between them to whichever the bound of steps
/// leaves; nothing left behind.
#[test]
fn a_witness_whose_runs_list_each_other_judges_the_newer() {
    let c = chain();
    let strip = |mut l: RunLog| {
        l.events
            .retain(|e| e.kind != plugpull::model::LATER_RUN_EVENT);
        l
    };
    let (x, y) = (strip(fetch(&c.w.addr, &c.x)), strip(fetch(&c.w.addr, &c.y)));
    let after = |l: &RunLog| l.events.iter().map(|e| e.at_ns).max().unwrap() + 1_000_000;
    let rx = reply(&x, &[later_run(after(&x), &c.y)]);
    let ry = reply(&y, &[later_run(after(&y), &c.x)]);
    let (idx, idy) = (x.descriptor.run_id, y.descriptor.run_id);
    let (addr, _) = scripted_witness(usize::MAX, move |sel| match sel {
        RunSelector::LatestForDevice(_) => Some(no_run_for_device()),
        RunSelector::Run(r) if *r == idx => Some(rx.clone()),
        RunSelector::Run(r) if *r == idy => Some(ry.clone()),
        _ => None,
    });
    let (v, left) = verify_copy(&addr, &c.after_y);
    assert_eq!(left, Vec::<String>::new());
    let steps = v
        .stderr
        .matches(", begun on the same drive after run")
        .count();
    assert_eq!(
        (run_of(&v), steps),
        (c.y.clone(), 1),
        "exit {}: judged {} after {steps} steps between X and Y:\n{}",
        v.code,
        run_of(&v),
        v.stderr
    );
    drop(c.dir);
}
