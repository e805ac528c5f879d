//! `write --batch N` (queue depth per stream): N records written, one flush, then all N
//! acknowledged. What is checked, in process on the real writer engine:
//! - the acknowledgement rule: no ack is pushed before a flush that came after its
//!   write returned, and there is one flush per batch (a device that records the order);
//! - on the simulated drive, cut at every point of a batch (before each write and
//!   before the flush), verified by the real verify and compared with the drive's
//!   oracle (`sim::compare`): an honest drive PASSes, a lying one FAILs; a drive that
//!   lands the writes of an unflushed batch out of order (`batch_reorder_p`) with an
//!   honest flush PASSes (nothing acknowledged was lost; its oracle shows it reordered),
//!   and the same reordering on a lying drive FAILs.
//!
//! And through the built binary: `plugpull write --batch` to a real witness, then verify.

use crate::common;

use plugpull::cycle::judge;
use plugpull::device::identity::DeviceIdentity;
use plugpull::device::{Device, FlushMethod};
use plugpull::model::{Ack, Placement, RunLog, Verdict};
use plugpull::record::RunId;
use plugpull::sim::oracle::Event;
use plugpull::sim::{Profile, SimDrive};
use plugpull::soak::CutAt;
use plugpull::write::engine::{AckSink, Progress, run_streams_batched};
use plugpull::write::plan::Plan;
use plugpull::write::run_descriptor;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const RECORD: u64 = 4096;
const DRIVE: u64 = 8 << 20;

fn plan(seed: u64, count: Option<u64>) -> Plan {
    let mut id = [7u8; 16];
    id[..8].copy_from_slice(&seed.to_le_bytes());
    Plan {
        run: RunId(id),
        region_offset: 0,
        region_bytes: DRIVE,
        record_min: RECORD,
        record_max: RECORD,
        placement: Placement::Sequential,
        streams: 1,
        seed,
        align: RECORD,
        count,
        duration: None,
    }
}

/// What the device saw and when each ack was pushed, in one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// A write of the record at this offset returned.
    Wrote(u64),
    Flushed,
    /// The ack of the record at this offset was pushed.
    Acked(u64),
}

struct Recorder {
    ops: Mutex<Vec<Op>>,
}

impl Device for Recorder {
    fn size_bytes(&self) -> u64 {
        DRIVE
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, _buf: &[u8], offset: u64) -> io::Result<()> {
        self.ops.lock().unwrap().push(Op::Wrote(offset));
        Ok(())
    }
    fn flush(&self) -> io::Result<()> {
        self.ops.lock().unwrap().push(Op::Flushed);
        Ok(())
    }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }
}

impl AckSink for Recorder {
    fn push(&self, ack: Ack) {
        self.ops.lock().unwrap().push(Op::Acked(ack.record.offset));
    }
}

#[test]
fn a_batch_is_written_then_flushed_once_then_acknowledged_whole() {
    for (batch, count) in [(1usize, 20u64), (8, 64), (8, 61), (32, 100)] {
        let rec = Recorder {
            ops: Mutex::new(Vec::new()),
        };
        let progress = Progress::default();
        run_streams_batched(
            &rec,
            &plan(3, Some(count)),
            batch,
            &rec,
            &AtomicBool::new(false),
            &progress,
        )
        .expect("the record buffers");
        let ops = rec.ops.into_inner().unwrap();
        let flushes = ops.iter().filter(|o| **o == Op::Flushed).count() as u64;
        assert_eq!(
            flushes,
            count.div_ceil(batch as u64),
            "batch {batch}, count {count}: one flush per batch (the last one short): {ops:?}"
        );
        assert_eq!(progress.records_acked(), count);
        // Every ack comes after a flush that came after its record's write.
        let mut written_unflushed = Vec::new();
        let mut flushed = std::collections::HashSet::new();
        let mut acked = 0;
        for op in &ops {
            match *op {
                Op::Wrote(o) => written_unflushed.push(o),
                Op::Flushed => flushed.extend(written_unflushed.drain(..)),
                Op::Acked(o) => {
                    assert!(
                        flushed.contains(&o),
                        "batch {batch}: record at {o} acked before a flush covered it: {ops:?}"
                    );
                    acked += 1;
                }
            }
        }
        assert_eq!(acked, count);
        // Batches are whole: between two flushes, `batch` writes (the last may be short).
        let per_flush: Vec<usize> = ops
            .split(|o| *o == Op::Flushed)
            .map(|s| s.iter().filter(|o| matches!(o, Op::Wrote(_))).count())
            .filter(|&n| n > 0)
            .collect();
        assert!(
            per_flush[..per_flush.len() - 1].iter().all(|&n| n == batch),
            "batch {batch}: {per_flush:?}"
        );
    }
}

struct Cycle {
    verdict: Verdict,
    acked: usize,
    /// Verify's findings equal what the oracle says about the acknowledged records.
    matches_oracle: bool,
    reordered: usize,
}

/// One cycle: the writer with `batch` on a `profile` drive, cut before operation
/// `cut_op`, power on, verify, compare with the oracle.
fn cycle(profile: &str, seed: u64, batch: usize, cut_op: u64) -> Cycle {
    let profile = Profile::parse(profile).unwrap();
    let drive = Arc::new(SimDrive::create(DRIVE, profile, seed, None).unwrap());
    let plan = plan(seed, None);
    let sink: Mutex<Vec<Ack>> = Mutex::new(Vec::new());
    let dev = CutAt::new(&drive, cut_op);
    // The cut makes the next operation fail; the writer stops there.
    run_streams_batched(
        &dev,
        &plan,
        batch,
        &sink,
        &AtomicBool::new(false),
        &Progress::default(),
    )
    .expect("the record buffers");
    let acks = sink.into_inner().unwrap();
    let descriptor = run_descriptor(
        &plan,
        DeviceIdentity {
            target: "batch-test".into(),
            kind: "simulated".into(),
            size_bytes: DRIVE,
            ..Default::default()
        },
        FlushMethod::Fdatasync,
        true,
    );
    let log = RunLog {
        files: Default::default(),
        descriptor,
        acks,
        events: vec![],
    };
    drive.power_on().unwrap();
    let report = judge(
        Ok(drive.clone() as Arc<dyn Device>),
        &log,
        Duration::from_secs(10),
    )
    .unwrap();
    let expected = plugpull::sim::compare::expected(&plan.run.hex(), &log.acks, &drive.oracle());
    let found = plugpull::sim::compare::found(&report).unwrap_or_default();
    let reordered = drive
        .oracle_events()
        .iter()
        .filter(|e| matches!(e, Event::Reordered { .. }))
        .count();
    Cycle {
        verdict: report.verdict,
        acked: log.acks.len(),
        matches_oracle: expected == found,
        reordered,
    }
}

/// Cut points covering every position in a batch of `batch` (batch writes then one
/// flush: `batch + 1` operations), after `batches` whole batches.
fn cuts(batch: usize, batches: u64) -> impl Iterator<Item = u64> {
    let per = batch as u64 + 1;
    (1..=per).map(move |j| batches * per + j)
}

#[test]
fn honest_drive_with_batches_passes_at_every_cut_point() {
    for (i, cut) in cuts(8, 20).enumerate() {
        let c = cycle("honest,flush_latency_us=0", 100 + i as u64, 8, cut);
        assert_eq!(c.acked, 160, "cut {cut}: the 20 whole batches are acked");
        assert_eq!(c.verdict, Verdict::Pass, "honest, batch 8, cut {cut}");
        assert!(c.matches_oracle, "cut {cut}");
    }
}

#[test]
fn lying_drive_with_batches_fails() {
    for (i, cut) in cuts(8, 20).enumerate() {
        let c = cycle("lying", 200 + i as u64, 8, cut);
        assert_eq!(c.verdict, Verdict::Fail, "lying, batch 8, cut {cut}");
        assert!(c.matches_oracle, "cut {cut}");
    }
}

#[test]
fn reordering_inside_an_unflushed_batch_with_an_honest_flush_passes() {
    let mut reordered = 0;
    for (i, cut) in cuts(8, 20).chain(cuts(32, 6)).enumerate() {
        let batch = if cut > 9 * 21 { 32 } else { 8 };
        let c = cycle(
            "honest,batch_reorder_p=0.5,flush_latency_us=0",
            300 + i as u64,
            batch,
            cut,
        );
        assert_eq!(c.verdict, Verdict::Pass, "batch {batch}, cut {cut}");
        assert!(c.matches_oracle, "cut {cut}");
        reordered += c.reordered;
    }
    // The oracle shows the drive did reorder (p = 0.5 per write, ~7 chances per batch).
    assert!(
        reordered > 100,
        "only {reordered} reorderings: the test tested nothing"
    );
}

#[test]
fn reordering_lying_drive_fails() {
    let mut reordered = 0;
    for (i, cut) in cuts(8, 20).enumerate() {
        let c = cycle("lying,batch_reorder_p=0.5", 400 + i as u64, 8, cut);
        assert_eq!(c.verdict, Verdict::Fail, "cut {cut}");
        assert!(c.matches_oracle, "cut {cut}");
        reordered += c.reordered;
    }
    assert!(reordered > 50, "only {reordered} reorderings");
}

#[test]
fn cli_batches_reach_the_witness_and_verify_passes() {
    let d = tempfile::tempdir().unwrap();
    let w = common::WitnessProc::start(&d.path().join("w"));
    // 501: the last batch of each stream is short.
    for (streams, batch) in [("1", "8"), ("2", "32")] {
        let t = d.path().join(format!("t{streams}.img"));
        let args = [
            "--size",
            "8M",
            "--count",
            "501",
            "--streams",
            streams,
            "--batch",
            batch,
        ];
        let wr = common::write(&w, &t, &args);
        assert_eq!(wr.code, 0, "{wr:?}");
        assert_eq!(wr.json()["records_acked"], 501, "{wr:?}");
        assert_eq!(wr.json()["witness_durable"], 501, "{wr:?}");
        let v = common::verify(&w, &t, &[]);
        assert_eq!(v.code, 0, "{v:?}");
        assert_eq!(v.json()["counts"]["intact"], 501, "{v:?}");
    }
    let bad = common::write(
        &w,
        &d.path().join("x.img"),
        &["--size", "8M", "--batch", "0"],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
}
