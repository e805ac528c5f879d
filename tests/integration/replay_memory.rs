//! Replay within `--memory`, through the binary: a replay keeps to the budget it was
//! given; a run with drop states or `--full-verify` (judged whole only) that would not
//! fit is refused before it is replayed (and, from an ack file, before its acks are
//! loaded), naming a `--memory` that is then enough. Runs judged in parts instead:
//! `replay_parts`.

use plugpull::device::{FlushMethod, identity};
use plugpull::logwrites::encode::LogEncoder;
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, fill_record};
use std::path::{Path, PathBuf};

pub(crate) const RUN: RunId = RunId([0x3d; 16]);
pub(crate) const T0_NS: u64 = 1_780_000_000_000_000_000;

/// Ack i of a one-stream sequential run of 512 B records, acked after its batch's flush.
fn ack(i: u64, flush_every: u64) -> Ack {
    let batch_end = (i / flush_every + 1) * flush_every - 1;
    let record = RecordId {
        stream: 0,
        seq: i + 1,
        offset: i * 512,
        sectors: 1,
        write_time_ns: T0_NS + i * 10_000,
    };
    Ack {
        record,
        flushed_ns: T0_NS + batch_end * 10_000 + 5_000,
    }
}

/// A dm-log-writes log of `acks` records (one write each, a flush every 1000) and the
/// run's ack log, in `dir`: (log, acks).
pub(crate) fn logged_run(dir: &Path, acks: u64) -> (PathBuf, PathBuf) {
    const FLUSH_EVERY: u64 = 1000;
    assert_eq!(acks % FLUSH_EVERY, 0);
    let target = dir.join("drive.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(acks * 512)
        .unwrap();
    let key = RunKey::new(RUN);
    let mut buf = vec![0u8; 512];
    let mut enc = LogEncoder::new(512);
    for i in 0..acks {
        let a = ack(i, FLUSH_EVERY);
        fill_record(&mut buf, &key, RUN, &a.record);
        enc.write(a.record.offset, &buf, false);
        if (i + 1) % FLUSH_EVERY == 0 {
            enc.flush();
        }
    }
    let log = dir.join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    let descriptor = descriptor_for(&target, acks * 512);
    let acklog = dir.join("run.acklog");
    let mut stream = (0..acks).map(|i| ack(i, FLUSH_EVERY));
    plugpull::witness::store::export::write_log_file_from(
        &acklog,
        &descriptor,
        &mut stream,
        &[],
        None,
    )
    .unwrap();
    (log, acklog)
}

/// The descriptor of a one-stream sequential run of 512 B records over `region_bytes`
/// written to `target`.
pub(crate) fn descriptor_for(target: &Path, region_bytes: u64) -> RunDescriptor {
    RunDescriptor {
        run_id: RUN,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(target),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes,
            record_bytes_min: 512,
            record_bytes_max: 512,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
        },
        command: vec![],
    }
}

/// The `--memory` a refusal names ("pass --memory 85M").
pub(crate) fn memory_named(stderr: &str) -> String {
    let at = stderr
        .find("pass --memory ")
        .unwrap_or_else(|| panic!("no --memory named: {stderr}"));
    stderr[at + "pass --memory ".len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// `plugpull replay` under a peak-RSS measurement: (peak RSS in KiB, exit code, stdout,
/// stderr).
pub(crate) fn replay_measured(dir: &Path, args: &[&str]) -> (i64, i32, String, String) {
    let (out, err) = (dir.join("out"), dir.join("err"));
    let mut all = vec!["replay"];
    all.extend_from_slice(args);
    let (rss, code) = crate::fetch_streamed::peak_rss_kib_to(&all, &out, &err);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (rss, code, read(&out), read(&err))
}

/// 120,000 acks replayed under `--memory 64M` stay under it; with drop states the same
/// run needs more, is refused before it is replayed, and the `--memory` the refusal names
/// is enough and kept to.
#[test]
fn a_replay_keeps_to_its_memory_budget_or_refuses_naming_one_that_fits() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (log, acks) = logged_run(dir.path(), 120_000);
    let d = dir.path().to_str().unwrap();
    let (log, acks) = (log.to_str().unwrap(), acks.to_str().unwrap());
    let base = ["--acks", acks, "--scratch-dir", d, "--json"];

    let mut args = base.to_vec();
    args.extend(["--memory", "64M"]);
    let (rss, code, out, err) = replay_measured(dir.path(), &[&[log][..], &args].concat());
    assert_eq!(code, 0, "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["durable_points"], 120, "{out}");
    assert_eq!(j["acks_durable_in_log"], 120_000, "{out}");
    assert_eq!(j["disagreements"], 0, "{out}");
    assert!(rss < 64 << 10, "peak RSS {rss} KiB over --memory 64M");

    args.extend(["--drops", "2", "--seed", "7"]);
    let (rss, code, out, err) = replay_measured(dir.path(), &[&[log][..], &args].concat());
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("replaying 120,000 acks over a log of 120,120 entries with drop states"),
        "{err}"
    );
    assert!(
        rss < 64 << 10,
        "peak RSS {rss} KiB refusing under --memory 64M"
    );
    let asked = memory_named(&err);
    let at = args.iter().position(|a| *a == "64M").unwrap();
    args[at] = &asked;
    let (rss, code, out, err) = replay_measured(dir.path(), &[&[log][..], &args].concat());
    assert_eq!(code, 0, "--memory {asked}: {err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["drop_states"], 2, "{out}");
    assert_eq!(j["disagreements"], 0, "{out}");
    let asked_kib = plugpull::units::parse_size(&asked).unwrap() as i64 >> 10;
    assert!(
        rss < asked_kib,
        "peak RSS {rss} KiB over the --memory {asked} the refusal named"
    );
}

/// An ack file of 2 M acks (80 MB as acks) with drop states against `--memory 64M` is
/// refused from a count of the file, before the acks are loaded: the peak stays under
/// 64 MiB.
#[test]
fn a_run_too_big_is_refused_before_its_acks_are_loaded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let acks = dir.path().join("big.acklog");
    let acked = crate::verify_memory::two_million_acks(&dir.path().join("drive.img"), &acks);
    let log = one_write_log(dir.path());
    let run = plugpull::record::RunId([0x5c; 16]).hex();
    let (rss, code, out, err) = replay_measured(
        dir.path(),
        &[
            log.to_str().unwrap(),
            "--acks",
            acks.to_str().unwrap(),
            "--run",
            &run,
            "--scratch-dir",
            dir.path().to_str().unwrap(),
            "--memory",
            "64M",
            "--drops",
            "2",
        ],
    );
    assert_refused_for(acked, code, &out, &err);
    assert!(err.contains("more than --memory 64.0 MiB"), "{err}");
    assert!(rss < 64 << 10, "peak RSS {rss} KiB: the acks were loaded");
    assert!(!err.contains("panicked"), "{err}");
}

/// The same 2 M acks, with drop states, served by a witness: fetched into a temporary
/// file a frame at a time, counted, and refused before they are loaded.
#[test]
fn a_run_too_big_from_the_witness_is_refused_before_its_acks_are_loaded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let wdir = dir.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let run = RunId([0x5c; 16]);
    let acks = plugpull::witness::store::layout::log_path(&wdir, run);
    let acked = crate::verify_memory::two_million_acks(&dir.path().join("drive.img"), &acks);
    let w = crate::common::witness::WitnessProc::start(&wdir);
    let log = one_write_log(dir.path());
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let args = [
        "replay",
        log.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--run",
        &run.hex(),
        "--scratch-dir",
        dir.path().to_str().unwrap(),
        "--memory",
        "64M",
        "--drops",
        "2",
    ];
    let (rss, code) = crate::fetch_streamed::peak_rss_kib_to(&args, &out, &err);
    let err = std::fs::read_to_string(&err).unwrap_or_default();
    assert_refused_for(acked, code, "", &err);
    assert!(rss < 64 << 10, "peak RSS {rss} KiB: the acks were loaded");
}

/// The same 2 M acks, with drop states, as the witness keeps them, in its directory
/// with a journal, given as `--acks`: copied with the journal overlaid (in TMPDIR, removed after), counted and
/// refused before they are loaded, as from a plain ack file.
#[test]
fn a_run_too_big_in_a_journaled_witness_directory_is_refused_before_its_acks_are_loaded() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let wdir = dir.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let run = RunId([0x5c; 16]);
    let acks = plugpull::witness::store::layout::log_path(&wdir, run);
    let acked = crate::verify_memory::two_million_acks(&dir.path().join("drive.img"), &acks);
    let _w = crate::common::witness::WitnessProc::start(&wdir);
    assert!(
        !plugpull::witness::store::reader::streamable(&acks),
        "the witness directory's log is read with its journal"
    );
    let log = one_write_log(dir.path());
    let (rss, code, out, err) = replay_measured(
        dir.path(),
        &[
            log.to_str().unwrap(),
            "--acks",
            acks.to_str().unwrap(),
            "--run",
            &run.hex(),
            "--scratch-dir",
            dir.path().to_str().unwrap(),
            "--memory",
            "64M",
            "--drops",
            "2",
        ],
    );
    assert_refused_for(acked, code, &out, &err);
    assert!(rss < 64 << 10, "peak RSS {rss} KiB: the acks were loaded");
}

/// A one-stream run of `acks` 512 B records placed at random over a region of `slots`
/// records, one write each, a flush every `flush_every`: (log, acks) in `dir`.
pub(crate) fn logged_random_run(
    dir: &Path,
    acks: u64,
    slots: u64,
    flush_every: u64,
) -> (PathBuf, PathBuf) {
    let target = dir.join("drive.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(slots * 512)
        .unwrap();
    let key = RunKey::new(RUN);
    let mut buf = vec![0u8; 512];
    let mut enc = LogEncoder::new(512);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let list: Vec<Ack> = (0..acks)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let record = RecordId {
                stream: 0,
                seq: i + 1,
                offset: x % slots * 512,
                sectors: 1,
                write_time_ns: T0_NS + i * 10_000,
            };
            fill_record(&mut buf, &key, RUN, &record);
            enc.write(record.offset, &buf, false);
            if (i + 1) % flush_every == 0 || i + 1 == acks {
                enc.flush();
            }
            Ack {
                record,
                flushed_ns: T0_NS + i * 10_000 + 5_000,
            }
        })
        .collect();
    let log = dir.join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    let mut descriptor = descriptor_for(&target, slots * 512);
    descriptor.settings.placement = "random".into();
    let acklog = dir.join("run.acklog");
    plugpull::witness::store::export::write_log_file_from(
        &acklog,
        &descriptor,
        &mut list.into_iter(),
        &[],
        None,
    )
    .unwrap();
    (log, acklog)
}

/// A whole verify (a drop state's, or each durable point's with `--full-verify`) holds
/// what verify plans for itself besides the replay's own state: its buffers, its early
/// reads (128 MiB, filled at once from a scratch image in the page cache) and its live
/// records. 150,000 acks at random over 2 GiB: each is refused under 64M and the
/// `--memory` the refusal names is kept to.
#[test]
fn whole_verifies_keep_to_the_memory_the_refusal_names() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (log, acks) = logged_random_run(dir.path(), 150_000, 4 << 20, 50_000);
    let d = dir.path().to_str().unwrap();
    let (log, acks) = (log.to_str().unwrap(), acks.to_str().unwrap());
    for extra in [&["--drops", "2", "--seed", "7"][..], &["--full-verify"][..]] {
        let mut args = vec![log, "--acks", acks, "--scratch-dir", d, "--json"];
        args.extend_from_slice(extra);
        args.extend(["--memory", "64M"]);
        let (rss, code, out, err) = replay_measured(dir.path(), &args);
        assert_eq!(code, 2, "{extra:?}: {out}{err}");
        assert!(err.contains("replaying 150,000 acks"), "{err}");
        assert!(rss < 64 << 10, "{extra:?}: peak RSS {rss} KiB refusing");
        let asked = memory_named(&err);
        let at = args.len() - 1;
        args[at] = &asked;
        let (rss, code, out, err) = replay_measured(dir.path(), &args);
        assert_eq!(code, 0, "{extra:?} --memory {asked}: {out}{err}");
        let j: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(j["disagreements"], 0, "{out}");
        assert_eq!(j["durable_points"], 3, "{out}");
        let asked_kib = plugpull::units::parse_size(&asked).unwrap() as i64 >> 10;
        assert!(
            rss < asked_kib,
            "{extra:?}: peak RSS {rss} KiB over the --memory {asked} the refusal named"
        );
    }
}

/// A log of one write and a flush (2 entries), in `dir`: the log beside a run too big.
fn one_write_log(dir: &Path) -> PathBuf {
    let mut enc = LogEncoder::new(512);
    enc.write(0, &[0u8; 512], false);
    enc.flush();
    let log = dir.join("lw.log");
    std::fs::write(&log, enc.finish()).unwrap();
    log
}

/// Replay of `acked` acks over [`one_write_log`] refused for its memory: exit 2, the
/// counts named.
fn assert_refused_for(acked: u64, code: i32, out: &str, err: &str) {
    assert_eq!(code, 2, "{out}{err}");
    let count = plugpull::units::thousands(acked);
    assert!(
        err.contains(&format!("replaying {count} acks over a log of 2 entries")),
        "{err}"
    );
}
