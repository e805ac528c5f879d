//! A cycle's run fetched into a temporary file and judged from it
//! (`cycle::fetched`, what campaigns, the agent and the demo do after power-on) gives
//! the report verify gives on the same run held in memory, names the ack flushed last,
//! reports a drive that did not come back as dead, and leaves no file behind.

use crate::common;
use common::*;
use plugpull::cycle::fetched::fetch_run;
use plugpull::device::{Device, FileDevice};
use plugpull::model::{RunSelector, Verdict};
use plugpull::record::RunId;
use std::sync::Arc;
use std::time::Duration;

fn without_time(r: &plugpull::verify::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn a_fetched_run_is_judged_as_the_run_in_memory_is() {
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
