//! `unacked_found` counts records of this run only: a previous run on the same target
//! (with the same seed, so the same places, or another) left whole records exactly
//! where this run's next records would go, and none of them may be counted.

use plugpull::device::mem::MemDevice;
use plugpull::model::{Ack, Placement, RunDescriptor, WriterSettings};
use plugpull::record::RunId;
use plugpull::verify::beyond::LastPerStream;
use plugpull::verify::unacked::count_unacked;
use plugpull::write::engine::{Progress, run_streams};
use plugpull::write::plan::Plan;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

const REGION: u64 = 1 << 20;

fn plan(run: RunId, count: u64, seed: u64) -> Plan {
    Plan {
        run,
        region_offset: 0,
        region_bytes: REGION,
        record_min: 4096,
        record_max: 4096,
        placement: Placement::Sequential,
        streams: 2,
        seed,
        align: 4096,
        count: Some(count),
        duration: None,
    }
}

fn descriptor(p: &Plan) -> RunDescriptor {
    let mut d = crate::common::test_descriptor(p.run);
    d.settings = WriterSettings {
        region_offset: p.region_offset,
        region_bytes: p.region_bytes,
        record_bytes_min: p.record_min,
        record_bytes_max: p.record_max,
        placement: p.placement.name().into(),
        streams: p.streams,
        flush: plugpull::device::FlushMethod::Fdatasync,
        direct: true,
        seed: p.seed,
        max_records_unacked: Some(u64::MAX),
        io: Default::default(),
    };
    d
}

fn write(dev: &MemDevice, p: &Plan) -> Vec<Ack> {
    let sink = Mutex::new(Vec::<Ack>::new());
    run_streams(dev, p, &sink, &AtomicBool::new(false), &Progress::default()).unwrap();
    sink.into_inner().unwrap()
}

#[test]
fn attack_today_a_previous_runs_records_past_the_last_ack_are_not_counted() {
    for second_seed in [11, 12] {
        let dev = MemDevice::new(REGION as usize);
        // The first run fills most of the region; the second writes a few records of
        // its own, every one acknowledged, and then the cut.
        write(&dev, &plan(RunId([1; 16]), 200, 11));
        let p = plan(RunId([2; 16]), 20, second_seed);
        let acks = write(&dev, &p);
        let mut last = LastPerStream::default();
        last.add(&acks);
        let found = count_unacked(&dev, &descriptor(&p), &last)
            .unwrap()
            .expect("the acks follow the layout");
        assert_eq!(found.records, 0, "seed {second_seed}: {found:?}");
        assert!(found.newest.is_empty(), "seed {second_seed}: {found:?}");
        // A hand-edited max_records_unacked of u64::MAX is bounded: the looking stops
        // after the gap of records not found.
        assert!(found.looked_for <= 2 * 64, "{found:?}");
    }
}

/// An ack log whose last ack claims seq 2^40 (a forged or damaged log: no run writes
/// that many records of one stream) must not hold verify: finding the layout replayed
/// the placer once per record up to the last ack's seq, for each alignment candidate,
/// and never finished. Now sequential records of one size are placed by arithmetic,
/// and placements that must be drawn give up (nothing counted) past `MAX_REPLAYED`.
#[test]
fn attack_today_a_last_ack_of_a_huge_seq_does_not_hold_verify() {
    use plugpull::record::RecordId;
    for placement in [Placement::Sequential, Placement::Random] {
        let p = Plan {
            placement,
            ..plan(RunId([3; 16]), 20, 11)
        };
        let dev = MemDevice::new(REGION as usize);
        let mut acks = write(&dev, &p);
        let last = acks.last_mut().unwrap();
        last.record = RecordId {
            seq: 1 << 40,
            ..last.record
        };
        let mut per = LastPerStream::default();
        per.add(&acks);
        let d = descriptor(&p);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(
                count_unacked(&dev, &d, &per)
                    .map(|f| f.map(|f| f.records))
                    .ok(),
            );
        });
        // Acks that the run's placement does not place: nothing counted, at once.
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(20)),
            Ok(Some(None)),
            "{placement:?}: count_unacked did not finish in 20 s"
        );
    }
}

/// The arithmetic skip is the replay: the same next place after any number of records,
/// across the ring's wrap.
#[test]
fn attack_today_skipping_sequential_records_is_replaying_them() {
    use plugpull::placer::{Layout, Placer};
    let layout = Layout {
        region_offset: 8192,
        region_bytes: 10 * 4096 + 512,
        record_min: 4096,
        record_max: 4096,
        placement: Placement::Sequential,
        streams: 2,
        seed: 5,
        align: 512,
    };
    for stream in 0..2 {
        let mut replayed = Placer::new(&layout, stream);
        for n in 0..40u64 {
            let mut skipped = Placer::new(&layout, stream);
            assert!(skipped.skip_arithmetic(n));
            assert_eq!(skipped.next_record(), replayed.next_record(), "n = {n}");
        }
    }
    let mut random = Placer::new(
        &Layout {
            placement: Placement::Random,
            ..layout
        },
        0,
    );
    assert!(
        !random.skip_arithmetic(3),
        "a drawn placement cannot be skipped"
    );
}
