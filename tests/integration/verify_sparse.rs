//! Reads that follow the records, through the binary: a few acknowledged records at
//! random over a large sparse target are judged from their own blocks (the bytes read
//! stay near the records' size, not the region's), a record lost among them is still
//! found, and `--scan-region` still reads the whole region.

use crate::common;

use plugpull::device::{FlushMethod, identity};
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, SECTOR, fill_record};
use plugpull::rng::Rng;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const REC_BYTES: u64 = 4096;
const SLOTS: u64 = 1 << 18; // 1 GiB
const ACKS: u64 = 200;

/// `acks_n` acknowledged 4 KiB records at random slots of a sparse target of `slots`
/// slots in `dir`, all written but the 100th. Returns (target, log).
fn random_run(dir: &Path, slots: u64, acks_n: u64) -> (PathBuf, PathBuf) {
    // On a disk file system: O_DIRECT reads (tmpfs has none) take the streaming path.
    let (target, log) = (dir.join("t.img"), dir.join("t.acklog"));
    let run = RunId([0x29; 16]);
    let key = RunKey::new(run);
    let f = std::fs::File::create(&target).unwrap();
    f.set_len(slots * REC_BYTES).unwrap();
    let mut rng = Rng::new(7);
    let mut used = std::collections::HashSet::new();
    let mut acks = vec![];
    while acks.len() < acks_n as usize {
        let slot = rng.next_u64() % slots;
        if !used.insert(slot) {
            continue;
        }
        let i = acks.len() as u64;
        let record = RecordId {
            stream: 0,
            seq: i + 1,
            offset: slot * REC_BYTES,
            sectors: (REC_BYTES / SECTOR as u64) as u32,
            write_time_ns: 1_780_000_000_000_000_000 + i * 10_000,
        };
        // The 100th record never reached the medium.
        if i != 100 {
            let mut buf = vec![0u8; REC_BYTES as usize];
            fill_record(&mut buf, &key, run, &record);
            f.write_all_at(&buf, record.offset).unwrap();
        }
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 3_000,
        });
    }
    f.sync_all().unwrap();
    let d = RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "test".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(&target),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: slots * REC_BYTES,
            record_bytes_min: REC_BYTES,
            record_bytes_max: REC_BYTES,
            placement: "random".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 7,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
    };
    let mut stream = acks.iter().copied();
    plugpull::witness::store::export::write_log_file_from(&log, &d, &mut stream, &[], None)
        .unwrap();
    (target, log)
}

#[test]
fn few_random_records_on_a_large_target_are_read_from_their_own_blocks() {
    // On a disk file system: O_DIRECT reads (tmpfs has none) take the streaming path.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = random_run(dir.path(), SLOTS, ACKS);
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    let sparse = common::run(["verify", t, "--acks", l, "--rehearsal", "--json"]);
    let r = sparse.json();
    assert_eq!(r["verdict"], "FAIL", "{sparse:?}");
    assert_eq!(r["counts"]["lost"], 1, "{sparse:?}");
    assert_eq!(r["counts"]["intact"], ACKS - 1, "{sparse:?}");
    let read = r["bytes_read"].as_u64().unwrap();
    assert!(read <= ACKS * (REC_BYTES + (256 << 10)), "{read}");
    let whole = common::run([
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--scan-region",
    ]);
    let w = whole.json();
    assert_eq!(w["counts"], r["counts"], "{whole:?}");
    assert!(
        w["bytes_read"].as_u64().unwrap() >= SLOTS * REC_BYTES,
        "{whole:?}"
    );
}

/// Few records over a large target judged in parts (the log's size bounds its acks too
/// loosely for the budget): memory stays within `--memory`, however many parts the
/// region takes, since no part holds room for records it does not have.
#[test]
fn few_records_judged_in_parts_stay_within_the_budget() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (target, log) = random_run(dir.path(), 4 << 20, 2_000); // 16 GiB
    let (t, l) = (target.to_str().unwrap(), log.to_str().unwrap());
    // The work files on another file system than the target's (verify refuses that).
    let args = [
        "verify",
        t,
        "--acks",
        l,
        "--rehearsal",
        "--json",
        "--memory",
        "64M",
        "--work-dir",
        "/dev/shm",
    ];
    let err = dir.path().join("err");
    let (rss_kib, code) = crate::fetch_streamed::peak_rss_kib(&args, &err);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert_eq!(code, 1, "the lost record: FAIL; {stderr}");
    assert!(
        rss_kib < 64 << 10,
        "peak RSS {rss_kib} KiB over --memory 64M"
    );
    let r = common::run(args).json();
    assert_eq!(r["counts"]["lost"], 1, "{r}");
}
