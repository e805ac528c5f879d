//! File acks that name the file (FileAcks, frame 0x0A; docs/protocol.md, docs/tree.md):
//! a tree run's acks carry each file's path and temporary name to the witness, which
//! refuses names no tree writer sends; verify checks the names against the plan (a
//! mismatch is exit 3); logs of tree runs from before file entries (plain acks; the
//! fixture tests/fixtures/old-log/old-tree.acklog, written by plugpull at d95a849) stay
//! verifiable.

use crate::common;

use common::{Listen, WitnessProc, run, write};
use plugpull::model::{FileName, RunLog, RunSelector};
use plugpull::record::{RunId, RunKey, fill_record};
use plugpull::tree::plan::{Arrival, TreeScale, plan};
use plugpull::wire::frame::{self, FrameType};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::store::export::write_log_file;
use plugpull::witness::store::reader::read_log_file;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

const OLD_LOG: &str = "tests/fixtures/old-log/old-tree.acklog";

/// The plan of a tree run's log.
fn plan_of(log: &RunLog) -> plugpull::tree::plan::TreePlan {
    let t = log.descriptor.tree.as_ref().expect("a tree run");
    plan(
        t.seed,
        TreeScale {
            files: t.files,
            total_bytes: t.total_bytes,
        },
    )
}

/// Rebuilds the finished tree of `log` under `dir` from the plan and the acks (every
/// file's content is its stamped record, regenerated from the ack): what the writer
/// left when nothing was cut. Returns the run's root.
fn rebuild_tree(log: &RunLog, dir: &Path) -> PathBuf {
    let run = log.descriptor.run_id;
    let root = dir.join(&log.descriptor.tree.as_ref().unwrap().root);
    let p = plan_of(log);
    for step in &p.steps {
        match step {
            plugpull::tree::plan::Step::MkDir(d) => std::fs::create_dir_all(root.join(d)).unwrap(),
            plugpull::tree::plan::Step::File(f) => {
                let Some(a) = log.acks.iter().find(|a| a.record.seq == f.id) else {
                    continue;
                };
                let mut buf = vec![0u8; a.record.len_bytes() as usize];
                fill_record(&mut buf, &RunKey::new(run), run, &a.record);
                std::fs::write(root.join(&f.path), buf).unwrap();
            }
        }
    }
    root
}

fn verify_acks(dir: &Path, acks: &Path) -> common::Run {
    run([
        "verify".as_ref(),
        dir.as_os_str(),
        "--rehearsal".as_ref(),
        "--acks".as_ref(),
        acks.as_os_str(),
        "--json".as_ref(),
    ])
}

#[test]
fn a_tree_log_from_before_file_entries_is_still_verified() {
    let log = read_log_file(Path::new(OLD_LOG)).unwrap();
    assert!(log.files.is_empty(), "plain acks carry no names");
    assert_eq!(log.acks.len(), 41);
    let tmp = tempfile::tempdir().unwrap();
    rebuild_tree(&log, tmp.path());
    let r = verify_acks(tmp.path(), Path::new(OLD_LOG));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["verdict"], "PASS", "{r:?}");
    assert_eq!(r.json()["tree"]["files_acked"], 41, "{r:?}");
}

#[test]
fn a_name_the_plan_does_not_give_its_file_is_an_impossible_run() {
    let mut log = read_log_file(Path::new(OLD_LOG)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    rebuild_tree(&log, tmp.path());
    let p = plan_of(&log);
    // Name every ack as the plan does: verify passes.
    for (i, a) in log.acks.iter().enumerate() {
        let f = p.files().find(|f| f.id == a.record.seq).unwrap();
        let renamed_from = match &f.arrival {
            Arrival::InPlace => None,
            Arrival::Renamed { tmp } => Some(tmp.clone()),
        };
        let path = f.path.clone();
        log.files.insert(i, FileName { path, renamed_from });
    }
    let named = tmp.path().join("named.acklog");
    write_log_file(&named, &log).unwrap();
    assert!(frame_types(&std::fs::read(&named).unwrap()).contains(&FrameType::FileAcks));
    assert_eq!(read_log_file(&named).unwrap().files, log.files);
    let r = verify_acks(tmp.path(), &named);
    assert_eq!(r.code, 0, "{r:?}");
    // One name changed: no verdict, exit 3, and the message names both paths.
    let wrong = log.files.get_mut(&5).unwrap();
    let planned = wrong.path.clone();
    wrong.path = format!("{planned}.elsewhere");
    let forged = tmp.path().join("forged.acklog");
    write_log_file(&forged, &log).unwrap();
    let r = verify_acks(tmp.path(), &forged);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains(&planned) && r.stderr.contains(".elsewhere"),
        "{r:?}"
    );
    // A name that leaves the tree is refused by the log check itself.
    log.files.get_mut(&5).unwrap().path = "../escape".into();
    write_log_file(&forged, &log).unwrap();
    let r = verify_acks(tmp.path(), &forged);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("'..'"), "{r:?}");
}

fn frame_types(bytes: &[u8]) -> Vec<FrameType> {
    let mut off = 0;
    let mut v = vec![];
    while off < bytes.len() {
        let frame::Decoded::Frame(f) = frame::decode(&bytes[off..]) else {
            panic!("damaged frame at {off}");
        };
        v.push(f.ty);
        off += f.len_bytes;
    }
    v
}

#[test]
fn a_tree_write_names_every_file_at_the_witness() {
    let w = Listen::temporary().start();
    let dir = tempfile::tempdir().unwrap();
    let r = write(&w, dir.path(), &["--files", "60", "--seed", "11", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    let run = RunId::parse(r.json()["run"].as_str().unwrap()).unwrap();
    let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run)).unwrap();
    assert!(!log.acks.is_empty());
    assert_eq!(log.files.len(), log.acks.len(), "every file ack is named");
    let p = plan_of(&log);
    let mut renamed = 0;
    for (i, a) in log.acks.iter().enumerate() {
        let f = p.files().find(|f| f.id == a.record.seq).unwrap();
        assert_eq!(log.files[&i].path, f.path);
        if let Arrival::Renamed { tmp } = &f.arrival {
            assert_eq!(log.files[&i].renamed_from.as_deref(), Some(tmp.as_str()));
            renamed += 1;
        }
    }
    assert!(renamed > 0, "the plan of seed 11 renames some file");
    // The witness's own log holds FileAcks frames; fetch -o output too, and verify reads it.
    let own = std::fs::read(plugpull::witness::store::layout::log_path(&w.dir, run)).unwrap();
    assert!(frame_types(&own).contains(&FrameType::FileAcks));
    let out = dir.path().join("fetched.acklog");
    let f = run_fetch(&w, run, &out);
    assert_eq!(f.code, 0, "{f:?}");
    assert!(frame_types(&std::fs::read(&out).unwrap()).contains(&FrameType::FileAcks));
    let v = verify_acks(dir.path(), &out);
    assert_eq!(v.code, 0, "{v:?}");
    let v = common::verify(&w, dir.path(), &["--run", &run.hex()]);
    assert_eq!(v.code, 0, "{v:?}");
}

fn run_fetch(w: &WitnessProc, run_id: RunId, out: &Path) -> common::Run {
    let hex = run_id.hex();
    run([
        "fetch",
        "--witness",
        &w.addr,
        "--run",
        &hex,
        "-o",
        out.to_str().unwrap(),
    ])
}

/// A raw writer connection: Hello for a tree run, then `m`; returns the reply.
fn reply_to(w: &WitnessProc, descriptor: &plugpull::model::RunDescriptor, m: &Msg) -> Vec<Msg> {
    let mut s = TcpStream::connect(&w.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let hello = Msg::Hello {
        version: PROTOCOL_VERSION,
        resume: false,
        descriptor: descriptor.clone(),
    };
    s.write_all(&hello.encode()).unwrap();
    s.write_all(&m.encode()).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let mut out = Vec::new();
    let mut off = 0;
    while let frame::Decoded::Frame(f) = frame::decode(&buf[off..]) {
        out.push(Msg::decode(&f).unwrap());
        off += f.len_bytes;
    }
    out
}

#[test]
fn the_witness_refuses_file_names_no_tree_writer_sends() {
    let w = Listen::temporary().start();
    let old = read_log_file(Path::new(OLD_LOG)).unwrap();
    let acks = old.acks[..2].to_vec();
    let name = |p: &str| FileName {
        path: p.into(),
        renamed_from: None,
    };
    let cases: [(&str, FileName); 6] = [
        ("empty", name("")),
        ("absolute", name("/etc/passwd")),
        ("'..'", name("a/../../b")),
        ("NUL", name("a/b\0c")),
        ("empty or '.'", name("a//b")),
        (
            "final path itself",
            FileName {
                path: "a/b".into(),
                renamed_from: Some("a/b".into()),
            },
        ),
    ];
    for (i, (want, bad)) in cases.into_iter().enumerate() {
        let mut d = old.descriptor.clone();
        d.run_id = RunId([0x40 + i as u8; 16]);
        let m = Msg::FileAcks {
            first: 0,
            acks: acks.clone(),
            names: vec![name("t0/ok.c"), bad],
        };
        let replies = reply_to(&w, &d, &m);
        let err = replies.iter().find_map(|m| match m {
            Msg::Error { message } => Some(message.clone()),
            _ => None,
        });
        let err = err.unwrap_or_else(|| panic!("{want}: no Error in {replies:?}"));
        assert!(err.contains(want) && err.contains("ack 1"), "{want}: {err}");
        assert!(
            !replies
                .iter()
                .any(|m| matches!(m, Msg::Durable { durable_acks } if *durable_acks > 0))
        );
        let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(d.run_id)).unwrap();
        assert!(
            log.acks.is_empty(),
            "{want}: nothing of the frame is stored"
        );
    }
    // File entries in a device run are refused too.
    let d = common::test_descriptor(RunId([0x50; 16]));
    let mut a = acks[0];
    a.record.sectors = 8;
    let m = Msg::FileAcks {
        first: 0,
        acks: vec![a],
        names: vec![name("t0/ok.c")],
    };
    let replies = reply_to(&w, &d, &m);
    assert!(
        replies.iter().any(
            |m| matches!(m, Msg::Error { message } if message.contains("only tree runs name files"))
        ),
        "{replies:?}"
    );
}

/// The byte ranges of the FileAcks frames of a log file.
fn file_ack_frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut out = vec![];
    let mut off = 0;
    while let frame::Decoded::Frame(f) = frame::decode(&bytes[off..]) {
        if f.ty == FrameType::FileAcks {
            out.push((off, f.len_bytes));
        }
        off += f.len_bytes;
    }
    out
}

#[test]
fn damage_in_file_ack_frames_is_never_a_pass() {
    let w = Listen::temporary().start();
    let dir = tempfile::tempdir().unwrap();
    let r = write(&w, dir.path(), &["--files", "60", "--seed", "12", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    let run_id = RunId::parse(r.json()["run"].as_str().unwrap()).unwrap();
    let out = dir.path().join("fetched.acklog");
    assert_eq!(run_fetch(&w, run_id, &out).code, 0);
    let good = std::fs::read(&out).unwrap();
    let frames = file_ack_frames(&good);
    assert!(!frames.is_empty());
    assert_eq!(verify_acks(dir.path(), &out).code, 0);
    let (at, len) = frames[0];
    // A flipped bit inside a FileAcks frame (in a name, and in an ack entry): the damage is
    // found and named, never PASS.
    for inside in [len - 20, 5 + 12 + 8] {
        let mut b = good.clone();
        b[at + inside] ^= 0x04;
        std::fs::write(&out, &b).unwrap();
        let v = verify_acks(dir.path(), &out);
        assert_eq!(v.code, 3, "bit flipped at {}: {v:?}", at + inside);
        assert_eq!(v.json()["verdict"], "INCONCLUSIVE", "{v:?}");
        let damage = v.json()["ack_log"]["damage"].as_array().cloned();
        assert!(damage.is_some_and(|d| !d.is_empty()), "damage named: {v:?}");
    }
    // Cut inside the frame: not PASS either.
    std::fs::write(&out, &good[..at + len / 2]).unwrap();
    let v = verify_acks(dir.path(), &out);
    assert_ne!(v.code, 0, "{v:?}");
    assert_ne!(v.json()["verdict"], "PASS", "{v:?}");
}

#[test]
fn a_torn_file_ack_frame_at_the_witness_is_cut_and_the_rest_kept() {
    let mut w = Listen::temporary().start();
    let dir = tempfile::tempdir().unwrap();
    let r = write(&w, dir.path(), &["--files", "40", "--seed", "13", "-q"]);
    assert_eq!(r.code, 0, "{r:?}");
    let run_id = RunId::parse(r.json()["run"].as_str().unwrap()).unwrap();
    let before = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id)).unwrap();
    w.kill();
    // The witness died in the middle of appending one more FileAcks frame.
    let path = plugpull::witness::store::layout::log_path(&w.dir, run_id);
    let own = std::fs::read(&path).unwrap();
    let (at, len) = *file_ack_frames(&own).last().unwrap();
    let mut torn = own.clone();
    torn.extend_from_slice(&own[at..at + len - 7]);
    std::fs::write(&path, &torn).unwrap();
    w.restart();
    let after = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id)).unwrap();
    assert_eq!(after.acks, before.acks);
    assert_eq!(after.files, before.files);
    assert_eq!(after.files.len(), after.acks.len());
    let v = common::verify(&w, dir.path(), &["--run", &run_id.hex()]);
    assert_eq!(v.code, 0, "{v:?}");
}
