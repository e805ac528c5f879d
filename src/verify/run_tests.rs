//! `verify::run` end to end on a file target and an ack log file: the target is
//! identified once, whichever path the run takes.

use super::tests::log_in;
use super::*;
use crate::model::{Ack, Verdict};
use crate::record::{RecordId, RunId};

fn options(target: &std::path::Path, acks: &std::path::Path, allow: bool) -> VerifyOptions {
    VerifyOptions {
        target: target.to_path_buf(),
        acks: AckSource::File(acks.to_path_buf()),
        key_file: None,
        run: None,
        allow_identity_mismatch: allow,
        rehearsal: false,
        json: false,
        quiet: true,
        read_timeout: Duration::from_secs(10),
        scan_region: false,
    }
}

/// A blank 64 KiB target and a log of one record at its start (lost: the target is
/// blank), written for the target's identity or another's.
fn fixture(same_medium: bool) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.img");
    std::fs::write(&target, vec![0u8; 1 << 16]).unwrap();
    let ack = Ack {
        record: RecordId {
            stream: 0,
            seq: 0,
            offset: 0,
            sectors: 8,
            write_time_ns: 1,
        },
        flushed_ns: 1,
    };
    let mut log = log_in(RunId::random(), (0, 1 << 16), vec![ack]);
    if same_medium {
        log.descriptor.device = identity::identify(&target);
    }
    let acks = dir.path().join("run.acklog");
    crate::witness::store::export::write_log_file(&acks, &log).unwrap();
    (dir, target, acks)
}

#[test]
fn the_target_is_identified_once_on_the_streamed_path() {
    let (_dir, target, acks) = fixture(true);
    let before = identifications();
    let v = run(&options(&target, &acks, false)).unwrap();
    assert_eq!(identifications() - before, 1);
    assert_eq!(v.report.verdict, Verdict::Fail, "{}", v.report.to_text());
}

#[test]
fn the_target_is_identified_once_when_it_is_another_medium() {
    let (_dir, target, acks) = fixture(false);
    let before = identifications();
    let e = run(&options(&target, &acks, false)).err().expect("refused");
    assert!(matches!(e, VerifyError::Select(_)), "{e:#}");
    assert_eq!(identifications() - before, 1);
    let before = identifications();
    let v = run(&options(&target, &acks, true)).unwrap();
    assert_eq!(identifications() - before, 1);
    assert_eq!(v.report.verdict, Verdict::Fail, "{}", v.report.to_text());
}
