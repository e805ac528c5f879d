//! Reads that follow the records (`sparse`): a verify that reads only the live records'
//! blocks gives the report of one that reads the whole region, for few records at
//! random over a large region, of one size or of many, honest and damaged; it reads
//! far less; and `--scan-region`, a dense run or a hung read still read as before.

use crate::device::Device;
use crate::device::mem::{MemDevice, ReadHook};
use crate::model::{Ack, RunDescriptor};
use crate::record::{RecordId, RunId, RunKey, SECTOR, fill_record};
use crate::rng::Rng;
use crate::verify::engine::verify_streamed;
use crate::verify::scale::AckPasses;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const REGION: u64 = 64 << 20;

/// Acks that tell their count before a pass, as a log file does by its size.
struct Hinted(Vec<Ack>);

impl AckPasses for Hinted {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), crate::verify::VerifyError> {
        self.0.pass(sink)
    }
    fn ack_count_hint(&self) -> Option<u64> {
        Some(self.0.len() as u64)
    }
}

/// Acks that cannot tell their count before a pass (a stream): verify reads the whole
/// region, the reference the sparse reads are held to.
struct Unhinted(Vec<Ack>);

impl AckPasses for Unhinted {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), crate::verify::VerifyError> {
        self.0.pass(sink)
    }
}

/// `n` acks at random slots of the region: `sectors` each (None: 1 to 16), each record
/// written, lost, torn or bit-flipped on the device.
fn run(seed: u64, n: usize, sectors: Option<u32>) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    damaged_run(seed, n, sectors, true)
}

/// [`run`], every record written whole unless `damage`.
fn damaged_run(
    seed: u64,
    n: usize,
    sectors: Option<u32>,
    damage: bool,
) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let mut rng = Rng::new(seed);
    let id = RunId([seed as u8 | 1; 16]);
    let key = RunKey::new(id);
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = id;
    d.settings.region_offset = 1 << 20;
    d.settings.region_bytes = REGION;
    d.settings.streams = 2;
    d.settings.placement = "random".into();
    let size = sectors.map(|s| s as u64 * SECTOR as u64);
    d.settings.record_bytes_min = size.unwrap_or(SECTOR as u64);
    d.settings.record_bytes_max = size.unwrap_or(16 * SECTOR as u64);
    let dev = Arc::new(MemDevice::new((d.settings.region_offset + REGION) as usize));
    let mut seqs = [0u64; 2];
    let mut acks = vec![];
    for i in 0..n {
        let stream = (rng.next_u64() % 2) as u16;
        seqs[stream as usize] += 1;
        let secs = sectors.unwrap_or(1 + (rng.next_u64() % 16) as u32);
        let len = secs as u64 * SECTOR as u64;
        let step = size.unwrap_or(SECTOR as u64);
        let offset = d.settings.region_offset + (rng.next_u64() % ((REGION - len) / step)) * step;
        let record = RecordId {
            stream,
            seq: seqs[stream as usize],
            offset,
            sectors: secs,
            write_time_ns: 1_000_000 + i as u64 * 1000,
        };
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 500,
        });
        let mut buf = vec![0u8; len as usize];
        fill_record(&mut buf, &key, id, &record);
        match rng.next_u64() % if damage { 8 } else { 1 << 20 } {
            0 => {}
            1 => dev.write_at(&buf[..SECTOR], offset).unwrap(),
            2 => {
                buf[len as usize - 3] ^= 1;
                dev.write_at(&buf, offset).unwrap();
            }
            _ => dev.write_at(&buf, offset).unwrap(),
        }
    }
    (d, acks, dev)
}

fn without_reads(r: &crate::verify::report::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("verify_ms");
    o.remove("bytes_read");
    v
}

#[test]
fn reading_only_the_records_gives_the_whole_region_s_report() {
    let t = Duration::from_secs(10);
    let mut failing = 0;
    for seed in 0..12u64 {
        let sectors = [None, Some(8), Some(1)][seed as usize % 3];
        // Few enough that their runs (gaps read through) cover under a quarter of the region.
        let (d, acks, dev) = run(seed, 20 + seed as usize * 3, sectors);
        let unhinted = Unhinted(acks.clone());
        let whole = verify_streamed(dev.clone(), &d, &unhinted, t, false, &|_, _| {}).unwrap();
        let hinted = Hinted(acks.clone());
        let sparse = verify_streamed(dev.clone(), &d, &hinted, t, false, &|_, _| {}).unwrap();
        assert_eq!(
            without_reads(&whole.report),
            without_reads(&sparse.report),
            "seed {seed}"
        );
        let most = acks.len() as u64 * (16 * SECTOR as u64 + super::COALESCE_GAP_BYTES);
        assert!(
            sparse.report.bytes_read <= most && whole.report.bytes_read >= REGION / 2,
            "seed {seed}: {} read sparse, {} whole",
            sparse.report.bytes_read,
            whole.report.bytes_read
        );
        failing += (sparse.report.verdict == crate::model::Verdict::Fail) as u32;
    }
    assert!(failing >= 6, "{failing}");
}

#[test]
fn scan_region_and_dense_runs_still_read_the_whole_span() {
    let t = Duration::from_secs(10);
    let (d, acks, dev) = run(3, 50, Some(8));
    let hinted = Hinted(acks.clone());
    let r = verify_streamed(dev.clone(), &d, &hinted, t, true, &|_, _| {}).unwrap();
    assert!(r.report.bytes_read >= REGION, "{}", r.report.bytes_read);
    // As many acks as slots: dense, read as a span.
    let mut d2 = d.clone();
    d2.settings.region_bytes = 64 << 10;
    let dense: Vec<Ack> = (0..16u64)
        .map(|i| {
            let mut a = acks[0];
            a.record.stream = 0;
            a.record.seq = i + 1;
            a.record.offset = d2.settings.region_offset + i * 4096;
            a
        })
        .collect();
    assert!(!super::sparse_at_most(&d2, Some(dense.len() as u64)));
    assert!(super::sparse_at_most(&d, Some(acks.len() as u64)));
}

#[test]
fn a_hung_read_of_a_record_s_run_times_out_as_in_a_whole_read() {
    let (d, acks, dev) = damaged_run(5, 60, Some(8), false);
    // The read of the block holding the 20th ack's record hangs.
    let hang_at = acks[20].record.offset;
    let calls = Arc::new(AtomicU64::new(0));
    let c = calls.clone();
    let hook = Arc::new(ReadHook {
        inner: dev,
        before: move |len: usize, off: u64| {
            c.fetch_add(1, Ordering::SeqCst);
            if off <= hang_at && hang_at < off + len as u64 {
                std::thread::sleep(Duration::from_millis(600));
            }
            Ok(())
        },
    });
    let t = Duration::from_millis(200);
    let hinted = Hinted(acks.clone());
    let r = verify_streamed(hook, &d, &hinted, t, false, &|_, _| {}).unwrap();
    assert!(
        r.report
            .unreadable_ranges
            .iter()
            .any(|u| u.2.contains("did not complete"))
    );
    assert!(calls.load(Ordering::SeqCst) > 0);
    assert_eq!(
        r.report.verdict,
        crate::model::Verdict::Inconclusive,
        "{:?}",
        r.report.verdict
    );
}

/// Whether the whole region was read is a fact of the reads, not of a byte count: the
/// records' blocks alone leave it unread (and the plain words point to `--scan-region`
/// when a record is lost); `--scan-region` reads it; a hung read leaves it unread
/// whatever was read before.
#[test]
fn the_region_counts_as_read_only_when_every_byte_of_it_was() {
    let t = Duration::from_secs(10);
    let hint = "--scan-region reads the whole region";
    let (d, acks, dev) = damaged_run(3, 40, Some(8), false);
    let hinted = Hinted(acks[1..].to_vec());
    let sparse = verify_streamed(dev.clone(), &d, &hinted, t, false, &|_, _| {}).unwrap();
    assert!(!sparse.report.region_read);
    let whole = verify_streamed(dev.clone(), &d, &hinted, t, true, &|_, _| {}).unwrap();
    assert!(whole.report.region_read, "{}", whole.report.bytes_read);
    assert!(!whole.report.plain.contains(hint), "{}", whole.report.plain);
    // A record lost: the sparse reads say where to look for it.
    let mut lost = acks.clone();
    lost[0].record.offset = d.settings.region_offset;
    let hinted = Hinted(lost);
    let r = verify_streamed(dev.clone(), &d, &hinted, t, false, &|_, _| {}).unwrap();
    assert_eq!(
        r.report.counts.get("lost"),
        Some(&1),
        "{:?}",
        r.report.counts
    );
    assert!(r.report.plain.contains(hint), "{}", r.report.plain);
    // A hang near the region's end: nearly all of it read, yet not all.
    let end = d.settings.region_offset + d.settings.region_bytes - 4096;
    let hook = Arc::new(ReadHook {
        inner: dev,
        before: move |len: usize, off: u64| {
            if off <= end && end < off + len as u64 {
                std::thread::sleep(Duration::from_millis(600));
            }
            Ok(())
        },
    });
    let hung = verify_streamed(
        hook,
        &d,
        &hinted,
        Duration::from_millis(200),
        true,
        &|_, _| {},
    );
    let hung = hung.unwrap().report;
    assert!(
        hung.bytes_read >= d.settings.region_bytes / 2,
        "{}",
        hung.bytes_read
    );
    assert!(!hung.region_read);
}
