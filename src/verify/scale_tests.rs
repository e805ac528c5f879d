//! The streaming engine (`scale`) must judge as the slow reference judge
//! (`reference`) does: a differential test on random small runs, honest and damaged,
//! with overlapping records of several streams and sizes.

pub(super) mod reference;

use super::engine::verify_streamed;
use super::scale::AckPasses;
use crate::device::Device;
use crate::device::mem::{MemDevice, ReadHook};
use crate::model::{Ack, RunDescriptor, RunLog};
use crate::record::{RecordId, RunId, RunKey, SECTOR, fill_record};
use crate::rng::Rng;
use std::sync::Arc;
use std::time::Duration;

pub(super) const REGION: u64 = 64 << 10;

fn descriptor(run: RunId, placement: &str) -> RunDescriptor {
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = run;
    // The version the records are written in (`RunKey::new`), which the reference
    // judge regenerates them by.
    d.format_version = crate::record::FORMAT_VERSION;
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
    random_shaped_run(seed, n, Shape::Mixed)
}

/// The sizes and places of a random run's records.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// 1 to 16 sectors, at any sector.
    Mixed,
    /// `sectors` each, at whole multiples of that from the region's start (`base`), as
    /// the writer places records of one size; the ack numbered `odd` (if any) is one
    /// sector longer, or one sector off that grid, so verify's slot table must hand
    /// over to the map mid-run (`verify::slots`).
    Uniform {
        sectors: u32,
        base: u64,
        odd: Option<usize>,
    },
}

pub(super) fn random_shaped_run(
    seed: u64,
    n: usize,
    shape: Shape,
) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    random_shaped_run_at(seed, n, shape, 0)
}

/// [`random_shaped_run`] with its region `shift` bytes further on the device.
pub(super) fn random_shaped_run_at(
    seed: u64,
    n: usize,
    shape: Shape,
    shift: u64,
) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let mut rng = Rng::new(seed);
    let run = RunId([seed as u8 | 1; 16]);
    let key = RunKey::new(run);
    let sequential = seed % 2 == 0;
    let mut d = descriptor(run, if sequential { "sequential" } else { "random" });
    let base = shift
        + match shape {
            Shape::Uniform { base, .. } => base,
            Shape::Mixed => 0,
        };
    d.settings.region_offset = base;
    let dev = Arc::new(MemDevice::new((base + REGION) as usize + 8192));
    let mut seqs = [0u64; 3];
    let mut ring = 0u64;
    let mut acks = vec![];
    for i in 0..n {
        let stream = (rng.next_u64() % 3) as u16;
        seqs[stream as usize] += 1 + rng.next_u64() % 2;
        // `off_grid`: the odd ack one sector away from the grid of records.
        let (sectors, step, off_grid) = match shape {
            Shape::Mixed => (1 + (rng.next_u64() % 16) as u32, SECTOR as u64, false),
            Shape::Uniform { sectors, odd, .. } => {
                let step = sectors as u64 * SECTOR as u64;
                match (odd == Some(i), rng.next_u64() % 2) {
                    (true, 0) => (sectors + 1, step, false),
                    (true, _) => (sectors, step, true),
                    (false, _) => (sectors, step, false),
                }
            }
        };
        let len = sectors as u64 * SECTOR as u64;
        let mut offset = base
            + if sequential {
                if ring + len > REGION {
                    ring = 0;
                }
                // Back on the grid after an odd record.
                ring = ring.div_ceil(step) * step + len;
                if ring > REGION {
                    ring = len;
                }
                ring - len
            } else {
                (rng.next_u64() % ((REGION - len) / step + 1)) * step
            };
        if off_grid {
            offset = if offset >= base + SECTOR as u64 {
                offset - SECTOR as u64
            } else {
                offset + SECTOR as u64
            };
        }
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

pub(super) fn without_time(r: &super::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

#[test]
fn the_streamed_verify_judges_as_the_reference_does() {
    let t = Duration::from_secs(10);
    let mut failing = 0;
    for seed in 0..60u64 {
        let n = [1, 2, 5, 40, 200][seed as usize % 5];
        let (d, acks, dev) = random_run(seed, n);
        for scan_region in [false, true] {
            let streamed =
                verify_streamed(dev.clone(), &d, &acks, t, scan_region, &|_, _| {}).unwrap();
            let want = reference::judge(dev.as_ref(), &d, &acks, scan_region);
            let what = format!("seed {seed}, scan_region {scan_region}");
            assert_eq!(reference::observed(&streamed.report), want, "{what}");
            failing += (want.verdict == crate::model::Verdict::Fail) as u32;
            // What every other caller judges through: the same engine, the same report.
            let log = RunLog {
                files: Default::default(),
                descriptor: d.clone(),
                acks: acks.clone(),
                events: vec![],
            };
            let wrapped =
                super::verify_device_with_progress(dev.clone(), &log, t, scan_region, &|_, _| {});
            assert_eq!(
                without_time(&wrapped),
                without_time(&streamed.report),
                "{what}"
            );
        }
    }
    // The runs exercise failures, not only PASS.
    assert!(failing > 10, "{failing}");
}

/// The slot table (`verify::slots`) paints runs of one record size; it must judge as
/// the reference does (which owns each sector by brute force) on random and
/// ring placements, with streams interleaved so a later-arriving ack is often the
/// earlier record, with the grid starting off the record size's alignment, and when
/// one odd ack (another size, or off the grid) hands over to the map mid-run.
#[test]
fn the_slot_table_judges_as_the_reference_does() {
    let t = Duration::from_secs(10);
    let (mut failing, mut superseded) = (0, 0);
    for seed in 0..90u64 {
        let n = [1, 3, 40, 150, 400][seed as usize % 5];
        let sectors = [1, 8, 3][seed as usize % 3];
        let base = [0, 512, 4096, 1536][(seed / 3) as usize % 4];
        let odd = match seed % 4 {
            0 => Some(n / 2),
            1 => Some(0),
            _ => None,
        };
        let shape = Shape::Uniform { sectors, base, odd };
        let (d, acks, dev) = random_shaped_run(seed, n, shape);
        let scan_region = seed % 2 == 1;
        let want = reference::judge(dev.as_ref(), &d, &acks, scan_region);
        let streamed = verify_streamed(dev, &d, &acks, t, scan_region, &|_, _| {}).unwrap();
        assert_eq!(reference::observed(&streamed.report), want, "seed {seed}");
        failing += (want.verdict == crate::model::Verdict::Fail) as u32;
        superseded += want.counts.get("superseded").copied().unwrap_or(0);
    }
    assert!(failing > 20, "{failing}");
    assert!(superseded > 1000, "{superseded}");
}

/// The table and the map must leave the same live acks with the same visible ranges,
/// also when the table outgrows its free size and hands over for being too sparse.
#[test]
fn the_slot_table_and_the_map_leave_the_same_live_acks() {
    for seed in 0..40u64 {
        let n = [5, 60, 300, 1000][seed as usize % 4];
        let shape = Shape::Uniform {
            sectors: [1, 2][seed as usize % 2],
            base: 0,
            odd: (seed % 3 == 0).then_some(n / 3),
        };
        let (_, acks, _) = random_shaped_run(seed, n, shape);
        let map = super::paint::live_for_tests(&acks, None);
        for free in [0, 4, 1 << 20] {
            let table = super::slots::SlotTable::with_free_slots(0, free);
            let got = super::paint::live_for_tests(&acks, Some(table));
            assert_eq!(got, map, "seed {seed}, free slots {free}");
        }
    }
}

/// A log no writer could produce is refused before the device is judged, as
/// `refuse_impossible_run` refuses it on the whole-run path, with the same count of bad
/// acks (the first pass checks a chunk at a time, and a bad chunk ack by ack): a record
/// outside the region, a sequence number going back, a torn ack's zeroed record.
#[test]
fn an_impossible_log_is_refused() {
    let uniform = Shape::Uniform {
        sectors: 1,
        base: 0,
        odd: None,
    };
    for (seed, shape) in [(4, Shape::Mixed), (6, uniform), (7, uniform)] {
        let (d, mut acks, dev) = random_shaped_run(seed, 400, shape);
        acks[10].record.offset = REGION; // outside the region
        acks[200].record.seq = 0; // before its stream's first
        let torn = &mut acks[201].record; // a torn ack: its record zeroed
        (torn.stream, torn.seq, torn.offset, torn.sectors) = (0, 0, 0, 0);
        let log = RunLog {
            files: Default::default(),
            descriptor: d.clone(),
            acks: acks.clone(),
            events: vec![],
        };
        let whole = crate::witness::validate::refuse_impossible_run(&log).unwrap_err();
        assert!(whole.to_string().contains("3 of its 400"), "{whole}");
        let t = Duration::from_secs(10);
        match verify_streamed(dev, &d, &acks, t, false, &|_, _| {}) {
            Err(super::VerifyError::ImpossibleRun(e)) => {
                assert_eq!(e.to_string(), whole.to_string())
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("judged an impossible log"),
        }
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

/// The region read while the first pass runs (`scan::read_early`) is the read the scan
/// judges when it is the span the scan needs (a ring over the whole region): the
/// device is read once, and the judgment is the reference's. When the span is not the
/// region, those reads are dropped and the judgment is still the same.
#[test]
fn the_region_read_during_the_first_pass_is_judged_once() {
    let t = Duration::from_secs(10);
    for (n, whole_region) in [(3 * 128, true), (40, false)] {
        let shape = Shape::Uniform {
            sectors: 1,
            base: 0,
            odd: None,
        };
        // Seed 0: a ring (even seeds are sequential) of 512 B records, 128 slots.
        let (d, acks, mem) = random_shaped_run(0, n, shape);
        // Counts the bytes read.
        let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = read.clone();
        let dev = Arc::new(ReadHook {
            inner: mem.clone(),
            before: move |len, _| {
                counter.fetch_add(len as u64, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            },
        });
        let want = reference::judge(mem.as_ref(), &d, &acks, false);
        let streamed = verify_streamed(dev.clone(), &d, &acks, t, false, &|_, _| {}).unwrap();
        assert_eq!(reference::observed(&streamed.report), want, "{n}");
        if whole_region {
            let read = read.load(std::sync::atomic::Ordering::SeqCst);
            assert_eq!(read, REGION, "{n} acks");
        }
    }
}
