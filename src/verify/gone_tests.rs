use super::*;
use crate::model::{Ack, RunLog};
use crate::record::{RecordId, RunId, SECTOR};
use crate::verify::dead_device_report;
use crate::verify::partition::plan;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

const MIB: u64 = 1 << 20;
const S: u64 = SECTOR as u64;

/// A gone drive that counts its reads.
struct Counted {
    inner: Gone,
    reads: AtomicU64,
}

impl Device for Counted {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        self.inner.logical_block_bytes()
    }
    fn write_at(&self, b: &[u8], o: u64) -> io::Result<()> {
        self.inner.write_at(b, o)
    }
    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }
    fn read_at(&self, b: &mut [u8], o: u64) -> io::Result<()> {
        self.reads.fetch_add(1, SeqCst);
        self.inner.read_at(b, o)
    }
    fn gone(&self) -> Option<String> {
        self.inner.gone()
    }
}

/// A random run: records of one size or many, sequential or anywhere in the region,
/// overwriting each other (so some are superseded), two streams.
fn random_run(seed: u64) -> RunLog {
    let mut rng = crate::rng::Rng::new(seed);
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = RunId([(seed as u8) | 0x41; 16]);
    d.format_version = crate::record::FORMAT_VERSION;
    let (min, max) =
        [(4096, 4096), (512, 64 * 1024), (S, S), (MIB, 3 * MIB)][rng.below(4) as usize];
    d.settings.region_offset = rng.below(8) * MIB + [0, S, 4096][rng.below(3) as usize];
    d.settings.region_bytes = (rng.range(4, 24) * MIB).max(2 * max);
    d.settings.record_bytes_min = min;
    d.settings.record_bytes_max = max;
    d.settings.streams = 2;
    d.settings.placement = ["random", "sequential"][rng.below(2) as usize].into();
    let (offset, bytes) = (d.settings.region_offset, d.settings.region_bytes);
    let n = [0usize, 1, 3, 40, 400][rng.below(5) as usize];
    let mut seqs = [0u64; 2];
    let mut cursor = offset;
    let acks = (0..n)
        .map(|_| {
            let stream = rng.below(2) as u16;
            seqs[stream as usize] += 1;
            let len = rng.range(min / S, max / S) * S;
            let at = if rng.below(2) == 0 && cursor + len <= offset + bytes {
                cursor += len;
                cursor - len
            } else {
                offset + rng.below((bytes - len) / S + 1) * S
            };
            let record = RecordId {
                stream,
                seq: seqs[stream as usize],
                offset: at,
                sectors: (len / S) as u32,
                write_time_ns: 1_000_000 + seqs[stream as usize] * 1000 + stream as u64,
            };
            Ack {
                record,
                flushed_ns: record.write_time_ns + 500,
            }
        })
        .collect();
    RunLog {
        files: Default::default(),
        descriptor: d,
        acks,
        events: vec![],
    }
}

fn json(r: &Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("verify_ms");
    v
}

/// The streamed report on a gone drive is the report the acks held whole give, to the
/// byte, whole and in parts, and no read is narrowed down (a few reads a chunk, where narrowing down would take dozens).
#[test]
fn a_gone_drive_is_judged_as_the_acks_held_whole_judge_it() {
    let why = "the drive did not come back".to_string();
    let (mut failing, mut in_parts) = (0, 0);
    for seed in 0..48 {
        let log = random_run(seed);
        let d = &log.descriptor;
        let expected = json(&dead_device_report(&log, why.clone()));
        for budget in [
            Budget::default(),
            Budget {
                memory_bytes: plan::FIXED_BYTES + 8 * MIB,
                work_dir: Some(std::env::temp_dir()),
            },
        ] {
            let dev = Arc::new(Counted {
                inner: Gone::for_run(d, why.clone()),
                reads: AtomicU64::new(0),
            });
            let got = report_on(
                dev.clone(),
                d,
                ScanRun::from(d),
                &log.acks,
                why.clone(),
                &budget,
            )
            .unwrap();
            assert_eq!(
                json(&got),
                expected,
                "seed {seed}, budget {}",
                budget.memory_bytes
            );
            let chunks = d.settings.region_bytes / (2 * MIB) + 2;
            assert!(
                dev.reads.load(SeqCst) <= 4 * chunks + 8,
                "seed {seed}: {} reads of a gone drive for {chunks} chunks",
                dev.reads.load(SeqCst)
            );
            failing += got.to_summary().counts.failing();
            let hint = Some(log.acks.len() as u64);
            in_parts += u32::from(!crate::verify::partition::whole_run_fits(d, hint, &budget));
        }
    }
    assert!(failing > 0, "the runs judged had records to lose");
    assert!(in_parts > 0, "some runs were judged in parts");
}
