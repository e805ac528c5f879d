//! A cycle's run fetched into a temporary file and judged from it
//! (`cycle::fetched`, what campaigns, the agent and the demo do after power-on) gives
//! the report verify gives on the same run held in memory, names the ack flushed last,
//! reports a drive that did not come back as dead, and leaves no file behind. A witness
//! that answers with another run is refused.

use crate::common;
use common::*;
use plugpull::cycle::fetched::fetch_run;
use plugpull::device::{Device, FileDevice};
use plugpull::model::{RunSelector, Verdict};
use plugpull::record::RunId;
use plugpull::wire::frame::{self, Decoded};
use plugpull::wire::msg::Msg;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Held by each test that fetches: each looks at the temporary directory for the
/// process's fetched logs, which the other's would be.
static FETCHING: Mutex<()> = Mutex::new(());

/// A witness that answers one fetch, whatever run it asks for, with `sent`: its
/// descriptor and three acks. Returns its address.
fn witness_that_sends(sent: RunId) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        let mut b = [0u8; 4096];
        while !matches!(frame::decode(&buf), Decoded::Frame(_)) {
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "the fetcher sent no whole frame");
            buf.extend_from_slice(&b[..n]);
        }
        s.write_all(&Msg::FetchRun(test_descriptor(sent)).encode())
            .unwrap();
        let acks = (0..3u64)
            .map(|i| plugpull::model::Ack {
                record: plugpull::record::RecordId {
                    stream: 0,
                    seq: i,
                    offset: i * 4096,
                    sectors: 8,
                    write_time_ns: 1_700_000_000_000_000_000 + i * 10_000,
                },
                flushed_ns: 1_700_000_000_000_000_000 + i * 10_000 + 3_000,
            })
            .collect();
        s.write_all(&Msg::Acks { first: 0, acks }.encode()).unwrap();
        s.write_all(&Msg::FetchEnd { acks: 3 }.encode()).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.read_to_end(&mut Vec::new());
    });
    addr
}

/// The process's fetched logs left in the temporary directory.
fn fetched_logs_left() -> Vec<std::fs::DirEntry> {
    let mine = format!("plugpull-cycle-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .collect()
}

/// A cycle asks for its own run: a witness that sends another (a restarted witness
/// that mixed up its runs, a hostile one) is refused before anything is judged against
/// acks this cycle's writer never got, and its fetch leaves no file.
#[test]
fn a_witness_that_sends_another_run_is_refused() {
    let _one = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    let (asked, sent) = (RunId([0x11; 16]), RunId([0x36; 16]));
    let e = match fetch_run(&witness_that_sends(sent), asked) {
        Ok(f) => panic!("judged run {} for run {asked}", f.descriptor.run_id),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(&format!(
            "asked the witness for run {asked} and it sent run {sent}: not judged"
        )),
        "{e}"
    );
    // Other tests of this binary fetch cycles in this process too: their files go when
    // their cycles end, a file the refusal left never does.
    common::eventually(
        std::time::Duration::from_secs(30),
        "the refused fetch's temporary log is removed",
        || fetched_logs_left().is_empty(),
    );
    // The same witness's answer is taken for the run it is.
    let f = fetch_run(&witness_that_sends(sent), sent).unwrap();
    assert_eq!((f.descriptor.run_id, f.acks), (sent, 3));
}

fn without_time(r: &plugpull::verify::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn a_fetched_run_is_judged_as_the_run_in_memory_is() {
    let _one = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let w = InProcessWitness::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = run([
        "write",
        t.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--json",
        "--size",
        "256k",
        "--record-size",
        "4k-8k",
        "--streams",
        "2",
        "--count",
        "300",
    ]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let run_id = RunId::parse(wr.json()["run_id"].as_str().unwrap()).unwrap();
    let log = plugpull::witness::client::fetch(&w.addr, &RunSelector::Run(run_id)).unwrap();
    // Damage: the first 16 KiB zeroed, so the judgment has failures to agree on.
    let mut bytes = std::fs::read(&t).unwrap();
    bytes[..16 << 10].fill(0);
    std::fs::write(&t, &bytes).unwrap();
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open_read(&t).unwrap());
    let timeout = Duration::from_secs(10);
    let in_memory = plugpull::verify::verify_device(dev.clone(), &log, timeout);
    assert_eq!(in_memory.verdict, Verdict::Fail, "{}", in_memory.to_text());

    let fetched = fetch_run(&w.addr, run_id).unwrap();
    assert_eq!(fetched.acks, log.acks.len() as u64);
    // The log a Ctrl-C handler removes (`verify::temp_log`) is this one.
    let live = plugpull::verify::temp_log::live();
    assert!(
        live.iter()
            .any(|c| c.to_bytes() == fetched.path().as_os_str().as_encoded_bytes()),
        "the fetched log is registered for the Ctrl-C handler"
    );
    let judged = fetched.judge(Ok(dev), timeout);
    assert_eq!(without_time(&judged.report), without_time(&in_memory));
    let newest = log.acks.iter().max_by_key(|a| a.flushed_ns).copied();
    assert_eq!(judged.newest_ack, newest);

    let dead = fetched.judge(Err("it did not come back".into()), timeout);
    assert_eq!(dead.report.verdict, Verdict::Fail);
    assert_eq!(
        dead.report.dead_device.as_deref(),
        Some("it did not come back")
    );
    assert_eq!(dead.report.acked_records, log.acks.len() as u64);
    assert_eq!(dead.newest_ack, newest);
    // Its own file, not every file of this process's id: other tests in this binary
    // fetch cycles in this process too.
    let path = fetched.path().to_path_buf();
    assert!(path.exists(), "{path:?}");
    drop(fetched);
    assert!(
        !path.exists(),
        "the temporary log was left behind: {path:?}"
    );
}
