//! Records written past the last acknowledged one (`verify::unacked`): counted apart from
//! the acknowledged records, exactly, on cases built so the number is known; and a run
//! descriptor from before the engine was recorded still verifies.

use crate::common::*;
use plugpull::device::mem::MemDevice;
use plugpull::device::{Device, FlushMethod};
use plugpull::model::{Ack, Placement, RunDescriptor, WriterSettings};
use plugpull::placer::{Layout, Placer};
use plugpull::record::{RecordId, RunId, RunKey, SECTOR, fill_record};
use plugpull::verify::beyond::LastPerStream;
use plugpull::verify::unacked::{MIN_GAP, UnackedFound, count_unacked};
use plugpull::write::engine::{Progress, run_streams};
use plugpull::write::plan::Plan;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

const REGION: u64 = 1 << 20;

fn plan(run: RunId, count: u64, streams: u16, min: u64, max: u64, align: u64) -> Plan {
    Plan {
        run,
        region_offset: 0,
        region_bytes: REGION,
        record_min: min,
        record_max: max,
        placement: Placement::Sequential,
        streams,
        seed: 11,
        align,
        count: Some(count),
        duration: None,
    }
}

fn descriptor(p: &Plan) -> RunDescriptor {
    let mut d = test_descriptor(p.run);
    d.settings = WriterSettings {
        region_offset: p.region_offset,
        region_bytes: p.region_bytes,
        record_bytes_min: p.record_min,
        record_bytes_max: p.record_max,
        placement: p.placement.name().into(),
        streams: p.streams,
        flush: FlushMethod::Fdatasync,
        direct: true,
        seed: p.seed,
        max_records_unacked: None,
        io: Default::default(),
    };
    d
}

/// Four streams of 4-16 KiB records placed at a 4 KiB alignment (what O_DIRECT on a 4K
/// drive gives; the descriptor does not carry it, so the count must find it), written
/// whole to memory; then the last 10 acks of each stream are withheld, as if the cut
/// came before they reached the witness, and two of those records are damaged: one
/// zeroed (not found: in flight and lost, or never written), one kept only in its first
/// sector (found in part).
#[test]
fn records_past_each_streams_last_ack_are_counted_exactly() {
    let p = plan(RunId([7; 16]), 400, 4, 4096, 16384, 4096);
    let dev = MemDevice::new(REGION as usize);
    let sink = Mutex::new(Vec::<Ack>::new());
    run_streams(
        &dev,
        &p,
        &sink,
        &AtomicBool::new(false),
        &Progress::default(),
    )
    .unwrap();
    let acks = sink.into_inner().unwrap();
    let d = descriptor(&p);
    let mut kept = vec![];
    let mut withheld: Vec<Vec<Ack>> = vec![];
    for stream in 0..4 {
        let mine: Vec<Ack> = acks
            .iter()
            .filter(|a| a.record.stream == stream)
            .copied()
            .collect();
        assert!(mine.len() > 20, "stream {stream} wrote {}", mine.len());
        let (k, w) = mine.split_at(mine.len() - 10);
        kept.extend_from_slice(k);
        withheld.push(w.to_vec());
    }
    // Stream 0: its 5th withheld record zeroed. Stream 1: its 3rd kept in one sector.
    let zeroed = withheld[0][4].record;
    dev.write_at(&vec![0; zeroed.len_bytes() as usize], zeroed.offset)
        .unwrap();
    let torn = withheld[1][2].record;
    dev.write_at(
        &vec![0; torn.len_bytes() as usize - SECTOR],
        torn.offset + SECTOR as u64,
    )
    .unwrap();
    let mut last = LastPerStream::default();
    last.add(&kept);
    let found = count_unacked(&dev, &d, &last).unwrap();
    assert_eq!(
        found,
        Some(UnackedFound {
            records: 39,
            whole: 38,
            partial: 1,
            looked_for: 4 * (10 + MIN_GAP),
            newest: (0..4u16)
                .map(|s| (s, withheld[s as usize][9].record.seq))
                .collect(),
        })
    );
    // Acks that this layout does not place (another seed): nothing is counted.
    let mut other = d.clone();
    other.settings.seed += 1;
    assert_eq!(count_unacked(&dev, &other, &last).unwrap(), None);
}

/// A log from before the engine was recorded (its descriptor has no `engine`,
/// `iodepth`, `flush_every` or `flush_within_us`) still verifies, through the binary;
/// records written past its last ack are counted: 5 whole, one missing, one in part.
#[test]
fn an_old_descriptor_still_verifies_and_records_past_its_last_ack_are_counted() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/old-log/pre-tree.acklog");
    let (log, _) = plugpull::witness::store::reader::read_log_file_checked(&fixture, None).unwrap();
    let d = &log.descriptor;
    assert_eq!(d.settings.io, Default::default());
    let key = RunKey::for_version(d.run_id, d.format_version).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target.img");
    let file = std::fs::File::create(&target).unwrap();
    file.set_len(d.settings.region_bytes).unwrap();
    let put = |rec: &RecordId, keep: usize| {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; rec.len_bytes() as usize];
        fill_record(&mut buf, &key, d.run_id, rec);
        buf[keep..].fill(0);
        file.write_all_at(&buf, rec.offset).unwrap();
    };
    for a in &log.acks {
        put(&a.record, a.record.len_bytes() as usize);
    }
    let last = log.acks.last().unwrap().record;
    assert_eq!((last.stream, last.seq), (0, 20));
    let layout = Layout {
        region_offset: d.settings.region_offset,
        region_bytes: d.settings.region_bytes,
        record_min: d.settings.record_bytes_min,
        record_max: d.settings.record_bytes_max,
        placement: Placement::Sequential,
        streams: 1,
        seed: d.settings.seed,
        align: 512,
    };
    let mut placer = Placer::new(&layout, 0);
    for seq in 1..=27u64 {
        let (offset, len) = placer.next_record();
        if seq <= 20 {
            assert_eq!(
                (offset, len),
                (log.acks[seq as usize - 1].record.offset, 4096)
            );
            continue;
        }
        let rec = RecordId {
            stream: 0,
            seq,
            offset,
            sectors: (len / 512) as u32,
            write_time_ns: last.write_time_ns + seq,
        };
        match seq {
            26 => {}
            27 => put(&rec, SECTOR),
            _ => put(&rec, len as usize),
        }
    }
    drop(file);
    // The fixture has no end mark (a witness's own log); as `plugpull fetch -o` writes
    // it, with the same old descriptor, it proves itself whole.
    let fetched = dir.path().join("fetched.acklog");
    plugpull::witness::store::export::write_log_file(&fetched, &log).unwrap();
    let bytes = String::from_utf8_lossy(&std::fs::read(&fetched).unwrap()).into_owned();
    assert!(bytes.contains("\"seed\":3}") && !bytes.contains("iodepth"));
    let acks = fetched.to_str().unwrap();
    let v = run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        acks,
        "--json",
    ]);
    assert_eq!(v.code, 0, "{v:?}");
    let j = v.json();
    assert_eq!(j["verdict"], "PASS", "{v:?}");
    assert_eq!(j["counts"]["intact"], 20, "{v:?}");
    assert_eq!(j["acked_records"], 20, "{v:?}");
    assert_eq!(j["written_by"], serde_json::Value::Null, "{v:?}");
    assert!(j["run"]["settings"].get("engine").is_none(), "{v:?}");
    assert_eq!(
        j["unacked_found"],
        serde_json::json!({
            "records": 6, "whole": 5, "partial": 1,
            "looked_for": 7 + MIN_GAP, "newest": [[0, 27]]
        }),
        "{v:?}"
    );
    let t = run([
        "verify",
        target.to_str().unwrap(),
        "--rehearsal",
        "--acks",
        acks,
    ]);
    assert_eq!(t.code, 0, "{t:?}");
    assert!(
        t.stdout
            .contains("written by: not recorded in the run descriptor"),
        "{t:?}"
    );
    assert!(
        t.stdout.contains(
            "written past the last ack (never acknowledged, not judged, not a failure): 6 record(s) found on the target (5 whole, 1 in part), 71 place(s) looked at"
        ),
        "{t:?}"
    );
}
