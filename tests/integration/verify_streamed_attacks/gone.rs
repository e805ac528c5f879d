//! Attacks on a gone drive judged from a log (a wrapped ring, random placement in
//! parts, an impossible log) and on `cycle::judge` (a gone drive, a refused log, a run
//! later runs superseded): exit codes, counts, the work and temporary directories left
//! empty.

use super::{left_in, private_tmp, run_in};
use plugpull::device::{FlushMethod, identity};
use plugpull::model::{Ack, RunDescriptor, RunLog, WitnessEvent, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const T0: u64 = 1_780_000_000_000_000_000;

fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
    let write_time_ns = T0 + seq * 10_000;
    Ack {
        record: RecordId {
            stream,
            seq,
            offset,
            sectors,
            write_time_ns,
        },
        flushed_ns: write_time_ns + 3_000,
    }
}

fn descriptor(
    run: RunId,
    target: &Path,
    region: u64,
    record: u64,
    placement: &str,
) -> RunDescriptor {
    let mut device = identity::identify(target);
    device.target = std::path::absolute(target).unwrap().display().to_string();
    RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device,
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: region,
            record_bytes_min: record,
            record_bytes_max: record,
            placement: placement.into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
    }
}

fn write_log(log: &Path, d: &RunDescriptor, acks: &[Ack], events: &[WitnessEvent]) {
    let mut stream = acks.iter().copied();
    plugpull::witness::store::export::write_log_file_from(log, d, &mut stream, events, None)
        .unwrap();
}

/// A drive that is gone, judged from a log of a ring that wrapped: every still visible
/// record unreadable, every record a later acked one wholly overwrote superseded, FAIL
/// (exit 1) with the reason, with and without --rehearsal; nothing left in TMPDIR.
#[test]
fn a_gone_drive_from_a_log_fails_with_the_overwritten_superseded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = (dir.path().join("gone.img"), dir.path().join("t.acklog"));
    std::fs::File::create(&target)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let d = descriptor(RunId([0x41; 16]), &target, 1 << 20, 4096, "sequential");
    std::fs::remove_file(&target).unwrap();
    let acks: Vec<Ack> = (0..300u64)
        .map(|i| ack(0, i + 1, (i % 256) * 4096, 8))
        .collect();
    write_log(&log, &d, &acks, &[]);
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    for extra in [&[][..], &["--rehearsal"][..]] {
        let tmp = private_tmp();
        let mut args = vec!["verify", t, "--acks", l, "--json"];
        args.extend_from_slice(extra);
        let v = run_in(tmp.path(), &args);
        assert_eq!(v.code, 1, "{extra:?}: {v:?}");
        let r = v.json();
        assert_eq!(r["verdict"], "FAIL", "{v:?}");
        assert_eq!(r["counts"]["unreadable"], 256, "{}", r["counts"]);
        assert_eq!(r["counts"]["superseded"], 44, "{}", r["counts"]);
        assert_eq!(r["acked_records"], 300);
        assert!(
            r["dead_device"]
                .as_str()
                .is_some_and(|s| s.contains("does not exist any more")),
            "{r}"
        );
        assert_eq!(r["bytes_read"], 0);
        assert_eq!(left_in(tmp.path()), Vec::<String>::new());
    }
    assert!(!target.exists(), "verify made the gone target");
}

/// A gone drive and a log no writer could produce (an ack beyond the run's region):
/// no verdict (exit 3), not a FAIL on acks that cannot be trusted.
#[test]
fn a_gone_drive_with_an_impossible_log_gets_no_verdict() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = (dir.path().join("gone.img"), dir.path().join("t.acklog"));
    std::fs::File::create(&target)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let d = descriptor(RunId([0x42; 16]), &target, 1 << 20, 4096, "sequential");
    std::fs::remove_file(&target).unwrap();
    let mut acks: Vec<Ack> = (0..10u64).map(|i| ack(0, i + 1, i * 4096, 8)).collect();
    acks.push(ack(0, 11, 8 << 20, 8));
    write_log(&log, &d, &acks, &[]);
    let tmp = private_tmp();
    let v = run_in(
        tmp.path(),
        &[
            "verify",
            target.to_str().unwrap(),
            "--acks",
            log.to_str().unwrap(),
            "--json",
            "--rehearsal",
        ],
    );
    assert_eq!(v.code, 3, "{v:?}");
    assert!(!v.stdout.contains("\"FAIL\""), "{v:?}");
    assert!(v.stderr.contains("no verdict"), "{v:?}");
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

/// A gone drive with a long random run whose live records do not fit `--memory`: judged
/// in parts (work files in --work-dir), every live record unreadable, every rewritten one
/// superseded; memory within the budget and the work directory empty after.
#[test]
fn a_gone_drive_judged_in_parts_keeps_to_memory_and_cleans_up() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = (dir.path().join("gone.img"), dir.path().join("t.acklog"));
    let slots: u64 = 1 << 21;
    std::fs::File::create(&target)
        .unwrap()
        .set_len(slots * 512)
        .unwrap();
    let d = descriptor(RunId([0x43; 16]), &target, slots * 512, 512, "random");
    std::fs::remove_file(&target).unwrap();
    let mut rng = plugpull::rng::Rng::new(5);
    let n: u64 = 2_000_000;
    let mut last = std::collections::HashSet::new();
    let acks: Vec<Ack> = (0..n)
        .map(|i| {
            let off = (rng.next_u64() % slots) * 512;
            last.insert(off);
            ack(0, i + 1, off, 1)
        })
        .collect();
    write_log(&log, &d, &acks, &[]);
    drop(acks);
    let live = last.len() as u64;
    let tmp = private_tmp();
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let w = tmp.path().to_str().unwrap();
    let args = [
        "verify",
        t,
        "--acks",
        l,
        "--json",
        "--rehearsal",
        "--memory",
        "64M",
        "--work-dir",
        w,
    ];
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let (rss_kib, code) = crate::fetch_streamed::peak_rss_kib_to(&args, &out, &err);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code, 1, "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["counts"]["unreadable"], live, "{}", r["counts"]);
    assert_eq!(r["counts"]["superseded"], n - live, "{}", r["counts"]);
    assert!(
        rss_kib < 64 << 10,
        "peak RSS {rss_kib} KiB over --memory 64M"
    );
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}

fn event(kind: &str, at_ns: u64, detail: &str) -> WitnessEvent {
    WitnessEvent {
        at_ns,
        kind: kind.into(),
        peer: "test".into(),
        durable_acks: 0,
        last_ack_at_ns: None,
        last_frame_at_ns: None,
        detail: detail.into(),
    }
}

fn run_log(d: RunDescriptor, acks: Vec<Ack>, events: Vec<WitnessEvent>) -> RunLog {
    RunLog {
        descriptor: d,
        acks,
        events,
        files: Default::default(),
    }
}

/// `cycle::judge` (a campaign's cycle) on a drive that did not come back: FAIL, every
/// visible record unreadable, the overwritten superseded, the reason named.
#[test]
fn cycle_judge_on_a_gone_drive_fails_with_the_overwritten_superseded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = dir.path().join("t.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let d = descriptor(RunId([0x51; 16]), &target, 1 << 20, 4096, "sequential");
    let acks = (0..300u64)
        .map(|i| ack(0, i + 1, (i % 256) * 4096, 8))
        .collect();
    let log = run_log(d, acks, vec![]);
    let r = plugpull::cycle::judge(
        Err("gone after the cut".into()),
        &log,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.verdict, plugpull::model::Verdict::Fail);
    assert_eq!(r.counts.get("unreadable"), Some(&256), "{:?}", r.counts);
    assert_eq!(r.counts.get("superseded"), Some(&44), "{:?}", r.counts);
    assert_eq!(r.dead_device.as_deref(), Some("gone after the cut"));
    assert_eq!(r.acked_records, 300);
}

/// `cycle::judge` on a log no writer could produce: no verdict (INCONCLUSIVE, the
/// refusal said), on a drive that came back and on one that did not.
#[test]
fn cycle_judge_on_an_impossible_log_gives_no_verdict() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = dir.path().join("t.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let d = descriptor(RunId([0x52; 16]), &target, 1 << 20, 4096, "sequential");
    let mut acks: Vec<Ack> = (0..10u64).map(|i| ack(0, i + 1, i * 4096, 8)).collect();
    acks.push(ack(0, 11, 8 << 20, 8));
    let log = run_log(d, acks, vec![]);
    let dev: Arc<dyn plugpull::device::Device> =
        Arc::new(plugpull::device::FileDevice::open_read(&target).unwrap());
    for drive in [Ok(dev), Err("gone".to_string())] {
        let gone = drive.is_err();
        let r = plugpull::cycle::judge(drive, &log, Duration::from_secs(5)).unwrap();
        assert_eq!(
            r.verdict,
            plugpull::model::Verdict::Inconclusive,
            "gone {gone}"
        );
        assert!(r.facts.refused.is_some(), "gone {gone}: {:?}", r.facts);
        assert_eq!(r.acked_records, 11, "gone {gone}");
    }
}

/// `cycle::judge` on a run a later run overwrote in part (its records at the start
/// carry the later run's stamps): superseded, not stale, PASS, the later run named;
/// the same report `verify --acks` gives from the same log.
#[test]
fn cycle_judge_on_a_run_later_runs_superseded_passes_and_names_them() {
    use plugpull::record::{RunKey, fill_record};
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let target = dir.path().join("t.img");
    let f = std::fs::File::create(&target).unwrap();
    f.set_len(1 << 20).unwrap();
    let (run, later) = (RunId([0x53; 16]), RunId([0x54; 16]));
    let d = descriptor(run, &target, 1 << 20, 4096, "sequential");
    let acks: Vec<Ack> = (0..100u64).map(|i| ack(0, i + 1, i * 4096, 8)).collect();
    let mut buf = vec![0u8; 4096];
    for a in &acks {
        let (r, rec) = if a.record.seq <= 20 {
            (
                later,
                RecordId {
                    write_time_ns: a.record.write_time_ns + (1 << 40),
                    ..a.record
                },
            )
        } else {
            (run, a.record)
        };
        fill_record(&mut buf, &RunKey::new(r), r, &rec);
        f.write_all_at(&buf, a.record.offset).unwrap();
    }
    f.sync_all().unwrap();
    let end = T0 + 200 * 10_000;
    let events = vec![
        event("connect", T0, ""),
        event("bye", end, ""),
        event(
            plugpull::model::LATER_RUN_EVENT,
            end + 1_000_000,
            &later.hex(),
        ),
    ];
    let log = run_log(d.clone(), acks.clone(), events.clone());
    let dev: Arc<dyn plugpull::device::Device> =
        Arc::new(plugpull::device::FileDevice::open_read(&target).unwrap());
    let r = plugpull::cycle::judge(Ok(dev), &log, Duration::from_secs(5)).unwrap();
    assert_eq!(r.counts.get("superseded"), Some(&20), "{:?}", r.counts);
    assert_eq!(r.counts.get("intact"), Some(&80), "{:?}", r.counts);
    assert_eq!(r.verdict, plugpull::model::Verdict::Pass, "{:?}", r.counts);
    assert_eq!(r.superseded_by_runs, vec![later.hex()]);
    // The command on the same log.
    let file = dir.path().join("t.acklog");
    write_log(&file, &d, &acks, &events);
    let tmp = private_tmp();
    let v = run_in(
        tmp.path(),
        &[
            "verify",
            target.to_str().unwrap(),
            "--acks",
            file.to_str().unwrap(),
            "--json",
            "--rehearsal",
        ],
    );
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    assert_eq!(j["counts"]["superseded"], 20, "{}", j["counts"]);
    assert_eq!(j["superseded_by_runs"][0], later.hex());
    assert_eq!(left_in(tmp.path()), Vec::<String>::new());
}
