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
        budget: Default::default(),
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

/// A TCP proxy in front of the witness that counts the connections made through it.
struct CountingProxy {
    addr: String,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl CountingProxy {
    fn to(witness: std::net::SocketAddr) -> CountingProxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = connections.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = std::net::TcpStream::connect(witness) else {
                    return;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        CountingProxy { addr, connections }
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A witness holding one run of one lost record on a blank target, written for the
/// target's identity or another's; the proxy in front of it.
fn witnessed(
    same_medium: bool,
) -> (
    tempfile::TempDir,
    crate::witness::server::Witness,
    CountingProxy,
    std::path::PathBuf,
    RunId,
) {
    let (dir, target, acks) = fixture(same_medium);
    let (log, _) = crate::witness::store::reader::read_log_file_checked(&acks, None).unwrap();
    let options = crate::witness::server::WitnessOptions {
        quiet: true,
        ..Default::default()
    };
    let store = dir.path().join("witness");
    std::fs::create_dir(&store).unwrap();
    let w = crate::witness::server::Witness::start("127.0.0.1:0", &store, options).unwrap();
    let sender = crate::witness::client::AckSender::connect(
        &w.addr.to_string(),
        &log.descriptor,
        Default::default(),
    )
    .unwrap();
    sender.push_all(&log.acks);
    sender.finish(Duration::from_secs(10)).unwrap();
    let proxy = CountingProxy::to(w.addr);
    (dir, w, proxy, target, log.descriptor.run_id)
}

fn by_witness(
    target: &std::path::Path,
    proxy: &CountingProxy,
    run: Option<RunId>,
) -> VerifyOptions {
    VerifyOptions {
        acks: AckSource::Witness(proxy.addr.clone()),
        run,
        rehearsal: true,
        ..options(target, target, true)
    }
}

#[test]
fn verify_by_witness_fetches_once_then_notes_the_verdict() {
    let (_dir, w, proxy, target, run_id) = witnessed(true);
    let o = by_witness(&target, &proxy, None);
    let v = run(&o).unwrap();
    assert_eq!(v.report.verdict, Verdict::Fail, "{}", v.report.to_text());
    assert_eq!(proxy.connections(), 1, "one fetch");
    tell_the_witness(&o, v.run, &v.report);
    assert_eq!(proxy.connections(), 2, "then the verdict note");
    let o = by_witness(&target, &proxy, Some(run_id));
    run(&o).unwrap();
    assert_eq!(proxy.connections(), 3, "one fetch with --run");
    w.shutdown();
}

#[test]
fn a_run_of_another_medium_is_fetched_once() {
    let (_dir, w, proxy, target, run_id) = witnessed(false);
    // The witness has no run under this drive's key, and the drive no stamp.
    let e = run(&by_witness(&target, &proxy, None))
        .err()
        .expect("no run found");
    assert!(matches!(e, VerifyError::Select(_)), "{e:#}");
    assert_eq!(proxy.connections(), 1, "asked once for the drive's key");
    // Named, on another medium, let through: judged from the one fetch.
    let v = run(&by_witness(&target, &proxy, Some(run_id))).unwrap();
    assert_eq!(v.report.verdict, Verdict::Fail, "{}", v.report.to_text());
    assert_eq!(proxy.connections(), 2, "one fetch with --run");
    w.shutdown();
}
