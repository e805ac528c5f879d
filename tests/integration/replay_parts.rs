//! Replay judged in parts, through the binary: a run that does not fit `--memory` whole
//! is judged in parts of the region within it and gets the summary the whole judgement
//! gets; a piece no cut can separate that does not fit is refused, naming a `--memory`
//! that is then enough.

use crate::replay_memory::{RUN, T0_NS, descriptor_for, logged_run, memory_named, replay_measured};
use plugpull::logwrites::encode::LogEncoder;
use plugpull::model::Ack;
use plugpull::record::{RecordId, RunKey, fill_record};
use std::path::{Path, PathBuf};

/// The summary's fields that say what was judged (not what it cost, nor how).
fn judged_fields(j: &serde_json::Value) -> serde_json::Value {
    let mut j = j.clone();
    let o = j.as_object_mut().unwrap();
    for cost in [
        "replay_ms",
        "judge_ms_per_point",
        "judge_bytes_read",
        "notes",
        "parts",
    ] {
        o.remove(cost);
    }
    j
}

fn replay_json(dir: &Path, args: &[&str]) -> (i64, serde_json::Value, String) {
    let (rss, code, out, err) = replay_measured(dir, args);
    assert_eq!(code, 0, "{args:?}: {out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (rss, j, err)
}

/// 600,000 acks (about 133 MiB to judge whole) under `--memory 64M`: judged in parts
/// with the peak under 64 MiB, and the same summary as judged whole under 512M.
#[test]
fn a_run_too_big_to_judge_whole_is_judged_in_parts_within_its_memory() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (log, acks) = logged_run(dir.path(), 600_000);
    let d = dir.path().to_str().unwrap();
    let (log, acks) = (log.to_str().unwrap(), acks.to_str().unwrap());
    let args = |memory: &'static str| {
        vec![
            log,
            "--acks",
            acks,
            "--scratch-dir",
            d,
            "--json",
            "--seed",
            "1",
            "--memory",
            memory,
        ]
    };
    let (rss, parts, _) = replay_json(dir.path(), &args("64M"));
    let n = parts["parts"].as_u64().unwrap();
    assert!(n > 1, "{parts}");
    assert!(
        rss < 64 << 10,
        "peak RSS {rss} KiB over --memory 64M in {n} parts"
    );
    let note = format!("judged in {n} parts of the region (--memory 64.0 MiB)");
    assert!(
        parts["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x.as_str().unwrap().starts_with(&note)),
        "{parts}"
    );
    assert_eq!(parts["durable_points"], 600, "{parts}");
    assert_eq!(parts["acks_durable_in_log"], 600_000, "{parts}");
    assert_eq!(parts["disagreements"], 0, "{parts}");
    let (_, whole, _) = replay_json(dir.path(), &args("512M"));
    assert_eq!(whole["parts"], 1, "{whole}");
    assert_eq!(judged_fields(&parts), judged_fields(&whole));
}

/// A one-stream run of `acks` records of two sectors, record i at sector i, so each
/// overlaps the next and no cut separates any of them; one write each, a flush every
/// 10,000: (log, acks) in `dir`.
fn chained_run(dir: &Path, acks: u64) -> (PathBuf, PathBuf) {
    let region_bytes = (acks + 1) * 512;
    let target = dir.join("drive.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(region_bytes)
        .unwrap();
    let key = RunKey::new(RUN);
    let mut buf = vec![0u8; 1024];
    let mut enc = LogEncoder::new(512);
    let list: Vec<Ack> = (0..acks)
        .map(|i| {
            let record = RecordId {
                stream: 0,
                seq: i + 1,
                offset: i * 512,
                sectors: 2,
                write_time_ns: T0_NS + i * 10_000,
            };
            fill_record(&mut buf, &key, RUN, &record);
            enc.write(record.offset, &buf, false);
            if (i + 1) % 10_000 == 0 || i + 1 == acks {
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
    let mut descriptor = descriptor_for(&target, region_bytes);
    descriptor.settings.placement = "random".into();
    descriptor.settings.record_bytes_min = 1024;
    descriptor.settings.record_bytes_max = 1024;
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

/// 200,000 acks each overlapping the next: no cut separates them, so under
/// `--memory 64M` (the least it takes; about 6 MiB short for them in one part) the run
/// is refused before it is replayed, naming the piece and a `--memory` that is then
/// enough.
#[test]
fn a_piece_no_cut_can_separate_is_refused_naming_a_memory_that_fits() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (log, acks) = chained_run(dir.path(), 200_000);
    let d = dir.path().to_str().unwrap();
    let (log, acks) = (log.to_str().unwrap(), acks.to_str().unwrap());
    let mut args = vec![
        log,
        "--acks",
        acks,
        "--scratch-dir",
        d,
        "--json",
        "--memory",
        "64M",
    ];
    let (rss, code, out, err) = replay_measured(dir.path(), &args);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("judging 200,000 acks in parts of the region: bytes 0..102,402,048 hold 200,000 acks whose records overlap one another"),
        "{err}"
    );
    assert!(err.contains("more than --memory 64.0 MiB"), "{err}");
    assert!(rss < 64 << 10, "peak RSS {rss} KiB refusing");
    let asked = memory_named(&err);
    let at = args.len() - 1;
    args[at] = &asked;
    let (_, j, _) = replay_json(dir.path(), &args);
    assert_eq!(j["durable_points"], 20, "{j}");
    assert_eq!(j["acks_durable_in_log"], 200_000, "{j}");
    assert_eq!(j["disagreements"], 0, "{j}");
}
