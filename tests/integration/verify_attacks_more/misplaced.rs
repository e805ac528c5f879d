//! A drive that misplaced every write of a long run, judged from the command line whole
//! (`--memory 4G`) and in parts (`--memory 64M`, work files on /dev/shm).

use crate::verify_streamed_attacks::{left_in, private_tmp};
use plugpull::device::{FlushMethod, identity};
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, fill_record};
use std::os::unix::fs::FileExt;
use std::path::Path;

const T0: u64 = 1_780_000_000_000_000_000;

fn descriptor(run: RunId, target: &Path, region: u64) -> RunDescriptor {
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
            record_bytes_min: 512,
            record_bytes_max: 512,
            placement: "sequential".into(),
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

/// The JSON report of `verify ARGS` (exit code 1 expected: FAIL), without its time,
/// and the peak RSS in KiB.
fn judged(args: &[&str], dir: &Path, name: &str) -> (serde_json::Value, i64) {
    let (out, err) = (
        dir.join(format!("{name}.out")),
        dir.join(format!("{name}.err")),
    );
    let (rss, code) = crate::fetch_streamed::peak_rss_kib_to(args, &out, &err);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code, 1, "{name}: {stderr}");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    r.as_object_mut().unwrap().remove("verify_ms");
    (r, rss)
}

/// 600,000 one-sector records, each written one sector past its home (the last one
/// wrapping to the start): every record misdirected, far more than verify names. Judged
/// whole and in parts, the JSON reports are the same, none names a place, and the parts
/// keep to their 64 MiB.
#[test]
fn a_drive_misplacing_every_write_is_judged_alike_whole_and_in_parts() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = (dir.path().join("t.img"), dir.path().join("t.acklog"));
    let n: u64 = 600_000;
    let f = std::fs::File::create(&target).unwrap();
    f.set_len(n * 512).unwrap();
    let d = descriptor(RunId([0x5d; 16]), &target, n * 512);
    let key = RunKey::new(d.run_id);
    let acks: Vec<Ack> = (0..n)
        .map(|k| {
            let write_time_ns = T0 + k * 10_000;
            Ack {
                record: RecordId {
                    stream: 0,
                    seq: k + 1,
                    offset: k * 512,
                    sectors: 1,
                    write_time_ns,
                },
                flushed_ns: write_time_ns + 3_000,
            }
        })
        .collect();
    // Written a MiB at a time: the sectors of records k-1 at the homes of records k.
    let per = 2048u64;
    let mut block = vec![0u8; (per * 512) as usize];
    for first in (0..n).step_by(per as usize) {
        let last = (first + per).min(n);
        for k in first..last {
            let from = (k + n - 1) % n;
            let at = ((k - first) * 512) as usize;
            fill_record(
                &mut block[at..at + 512],
                &key,
                d.run_id,
                &acks[from as usize].record,
            );
        }
        f.write_all_at(&block[..((last - first) * 512) as usize], first * 512)
            .unwrap();
    }
    drop(f);
    let mut stream = acks.iter().copied();
    plugpull::witness::store::export::write_log_file_from(&log, &d, &mut stream, &[], None)
        .unwrap();
    drop(acks);
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let common = ["verify", t, "--acks", l, "--json", "--rehearsal"];
    let whole_args = [&common[..], &["--memory", "4G"]].concat();
    let (whole, _) = judged(&whole_args, dir.path(), "whole");
    let work = private_tmp();
    let w = work.path().to_str().unwrap();
    let parts_args = [&common[..], &["--memory", "64M", "--work-dir", w]].concat();
    let (parts, rss_kib) = judged(&parts_args, dir.path(), "parts");
    assert_eq!(
        whole["too_many_found_elsewhere"], true,
        "{}",
        whole["counts"]
    );
    assert_eq!(whole["counts"]["misdirected"], n, "{}", whole["counts"]);
    assert!(
        whole["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["found_at"].is_null())
    );
    assert_eq!(parts, whole);
    assert!(
        rss_kib < 64 << 10,
        "peak RSS {rss_kib} KiB over --memory 64M"
    );
    assert_eq!(left_in(work.path()), Vec::<String>::new());
}
