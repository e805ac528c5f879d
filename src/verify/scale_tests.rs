//! Verify at scale (`scale`) must give the report the whole-run path
//! (`verify_device`) gives: a differential test on random small runs, honest and
//! damaged, with overlapping records of several streams and sizes.

use super::scale::{AckPasses, verify_streamed};
use super::verify_device;
use crate::device::Device;
use crate::device::mem::MemDevice;
use crate::model::{Ack, RunDescriptor, RunLog};
use crate::record::{RecordId, RunId, RunKey, SECTOR, fill_record};
use crate::rng::Rng;
use std::sync::Arc;
use std::time::Duration;

const REGION: u64 = 64 << 10;

fn descriptor(run: RunId, placement: &str) -> RunDescriptor {
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = run;
    d.settings.region_bytes = REGION;
    d.settings.record_bytes_min = 512;
    d.settings.record_bytes_max = 8192;
    d.settings.streams = 3;
    d.settings.placement = placement.into();
    d
}

/// A random run of `n` acks and a device holding what a drive might after a cut: each
/// record written, dropped, torn or bit-flipped, and some foreign bytes.
fn random_run(seed: u64, n: usize) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let mut rng = Rng::new(seed);
    let run = RunId([seed as u8 | 1; 16]);
    let key = RunKey::new(run);
    let sequential = seed % 2 == 0;
    let d = descriptor(run, if sequential { "sequential" } else { "random" });
    let dev = Arc::new(MemDevice::new(REGION as usize + 8192));
    let mut seqs = [0u64; 3];
    let mut ring = 0u64;
    let mut acks = vec![];
    for i in 0..n {
        let stream = (rng.next_u64() % 3) as u16;
        seqs[stream as usize] += 1 + rng.next_u64() % 2;
        let sectors = 1 + (rng.next_u64() % 16) as u32;
        let len = sectors as u64 * SECTOR as u64;
        let offset = if sequential {
            if ring + len > REGION {
                ring = 0;
            }
            ring += len;
            ring - len
        } else {
            (rng.next_u64() % ((REGION - len) / SECTOR as u64 + 1)) * SECTOR as u64
        };
        let record = RecordId {
            stream,
            seq: seqs[stream as usize],
            offset,
            sectors,
            write_time_ns: 1_000_000 + i as u64 * 1000,
        };
        let a = Ack {
            record,
            flushed_ns: record.write_time_ns + 100 + rng.next_u64() % 5000,
        };
        acks.push(a);
        let mut buf = vec![0u8; len as usize];
        fill_record(&mut buf, &key, run, &record);
        match rng.next_u64() % 10 {
            0 => {} // lost
            1 => {
                // torn: the first half only
                let half = (sectors as usize).div_ceil(2) * SECTOR;
                dev.write_at(&buf[..half], offset).unwrap();
            }
            2 => {
                buf[len as usize - 7] ^= 0x10; // one bit flipped
                dev.write_at(&buf, offset).unwrap();
            }
            _ => dev.write_at(&buf, offset).unwrap(),
        }
    }
    // Acks arrive with streams interleaved, as from a witness.
    (d, acks, dev)
}

fn without_time(r: &super::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn the_streamed_verify_gives_the_whole_run_s_report() {
    let t = Duration::from_secs(10);
    let mut failing = 0;
    for seed in 0..60u64 {
        let n = [1, 2, 5, 40, 200][seed as usize % 5];
        let (d, acks, dev) = random_run(seed, n);
        for scan_region in [false, true] {
            let log = RunLog {
                files: Default::default(),
                descriptor: d.clone(),
                acks: acks.clone(),
                events: vec![],
            };
            let whole =
                super::verify_device_with_progress(dev.clone(), &log, t, scan_region, &|_, _| {});
            let streamed =
                verify_streamed(dev.clone(), &d, &acks, t, scan_region, &|_, _| {}).unwrap();
            assert_eq!(
                without_time(&whole),
                without_time(&streamed.report),
                "seed {seed}, scan_region {scan_region}"
            );
            failing += (whole.verdict == crate::model::Verdict::Fail) as u32;
        }
    }
    // The runs exercise failures, not only PASS.
    assert!(failing > 10, "{failing}");
    let _ = verify_device;
}

/// A log no writer could produce is refused before the device is read, as
/// `refuse_impossible_run` refuses it on the whole-run path.
#[test]
fn an_impossible_log_is_refused() {
    let (d, mut acks, dev) = random_run(4, 40);
    acks[10].record.offset = REGION; // outside the region
    let log = RunLog {
        files: Default::default(),
        descriptor: d.clone(),
        acks: acks.clone(),
        events: vec![],
    };
    let whole = crate::witness::validate::refuse_impossible_run(&log).unwrap_err();
    let t = Duration::from_secs(10);
    match verify_streamed(dev, &d, &acks, t, false, &|_, _| {}) {
        Err(super::VerifyError::ImpossibleRun(e)) => assert_eq!(e.to_string(), whole.to_string()),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("judged an impossible log"),
    }
}

/// Memory follows the region, not the run: 20 laps of a ring leave one lap of live
/// records to scan.
#[test]
fn only_the_latest_record_at_each_location_is_kept() {
    let run = RunId([9; 16]);
    let d = descriptor(run, "sequential");
    let slots = REGION / 4096;
    let acks: Vec<Ack> = (0..slots * 20)
        .map(|i| Ack {
            record: RecordId {
                stream: 0,
                seq: i + 1,
                offset: (i % slots) * 4096,
                sectors: 8,
                write_time_ns: 1000 + i,
            },
            flushed_ns: 2000 + i,
        })
        .collect();
    struct Counting<'a>(&'a Vec<Ack>, std::cell::Cell<u32>);
    impl AckPasses for Counting<'_> {
        fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), super::VerifyError> {
            self.1.set(self.1.get() + 1);
            self.0.pass(sink)
        }
    }
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let src = Counting(&acks, Default::default());
    let r = verify_streamed(dev, &d, &src, Duration::from_secs(5), false, &|_, _| {}).unwrap();
    assert_eq!(src.1.get(), 2);
    assert_eq!(r.report.acked_records, slots * 20);
    assert_eq!(r.report.counts["superseded"], slots * 19);
    assert_eq!(r.report.counts["lost"], slots);
    assert!(r.sample.len() as u64 <= slots);
}
