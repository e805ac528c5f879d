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
