//! Verify against damage injected by hand into an in-memory device after a real write
//! loop: each class is reported, exit-worthy, and undamaged records stay intact.

use plugpull::device::mem::MemDevice;
use plugpull::device::{Device, FlushMethod};
use plugpull::model::Placement;
use plugpull::model::Verdict;
use plugpull::model::{Ack, RunDescriptor, RunLog, WriterSettings};
use plugpull::record::RunKey;
use plugpull::record::{RecordId, RunId, fill_record};
use plugpull::verify::report::Report;
use plugpull::verify::verify_device;
use plugpull::write::engine::{Progress, run_streams};
use plugpull::write::plan::Plan;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const REGION: u64 = 1 << 20;

fn plan(run: RunId, count: u64, placement: Placement, streams: u16, min: u64, max: u64) -> Plan {
    Plan {
        run,
        region_offset: 0,
        region_bytes: REGION,
        record_min: min,
        record_max: max,
        placement,
        streams,
        seed: 7,
        align: 512,
        count: Some(count),
        duration: None,
    }
}

fn descriptor(p: &Plan) -> RunDescriptor {
    RunDescriptor {
        run_id: p.run,
        format_version: plugpull::record::FORMAT_VERSION,
        plugpull_version: "test".into(),
        host: "test".into(),
        started_at: "now".into(),
        device: Default::default(),
        settings: WriterSettings {
            region_offset: p.region_offset,
            region_bytes: p.region_bytes,
            record_bytes_min: p.record_min,
            record_bytes_max: p.record_max,
            placement: "sequential".into(),
            streams: p.streams,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: p.seed,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
        tree: None,
    }
}

fn write(dev: &MemDevice, p: &Plan) -> RunLog {
    let sink = Mutex::new(Vec::<Ack>::new());
    run_streams(dev, p, &sink, &AtomicBool::new(false), &Progress::default())
        .expect("the record buffers");
    RunLog {
        files: Default::default(),
        descriptor: descriptor(p),
        acks: sink.into_inner().unwrap(),
        events: vec![],
    }
}

fn verify(dev: Arc<MemDevice>, log: &RunLog) -> Report {
    verify_device(dev, log, Duration::from_secs(10))
}

fn count(r: &Report, class: &str) -> u64 {
    r.counts[class]
}

/// 64 records of 4 KiB, no wrap: every record has exactly one place.
fn fresh() -> (Arc<MemDevice>, RunLog) {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let log = write(
        &dev,
        &plan(RunId([1; 16]), 64, Placement::Sequential, 1, 4096, 4096),
    );
    assert_eq!(log.acks.len(), 64);
    (dev, log)
}

#[test]
fn round_trip_passes() {
    let (dev, log) = fresh();
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert_eq!(count(&r, "intact"), 64);
}

#[test]
fn wrapping_several_times_passes_with_superseded() {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    // 1 MiB region / 4 KiB = 256 places; 1000 records wrap ~4 times.
    let log = write(
        &dev,
        &plan(RunId([1; 16]), 1000, Placement::Sequential, 1, 4096, 4096),
    );
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert_eq!(count(&r, "intact"), 256);
    assert_eq!(count(&r, "superseded"), 1000 - 256);
}

#[test]
fn random_variable_sizes_and_streams_pass() {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let log = write(
        &dev,
        &plan(RunId([1; 16]), 3000, Placement::Random, 4, 512, 16384),
    );
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert!(count(&r, "superseded") > 0 && count(&r, "intact") > 0);
}

#[test]
fn one_flipped_bit_is_corrupt_with_one_bit() {
    let (dev, log) = fresh();
    let victim = log.acks[10].record;
    dev.edit(|b| b[victim.offset as usize + 1000] ^= 0x08);
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(count(&r, "corrupt"), 1);
    assert_eq!(count(&r, "intact"), 63);
    assert_eq!(r.corrupt_bits, 1);
    assert_eq!(
        (r.findings[0].seq, r.findings[0].corrupt_bits),
        (victim.seq, Some(1))
    );
}

#[test]
fn second_half_zeroed_or_old_is_shorn() {
    for older in [false, true] {
        let (dev, log) = fresh();
        let v = log.acks[20].record;
        let half = v.offset as usize + 2048;
        if older {
            // An older record of the same stream at this place: set the second half back.
            let run = log.descriptor.run_id;
            let old = RecordId { seq: 0, ..v };
            let mut b = vec![0u8; 4096];
            fill_record(&mut b, &RunKey::new(run), run, &old);
            dev.edit(|d| d[half..half + 2048].copy_from_slice(&b[2048..]));
        } else {
            dev.edit(|d| d[half..half + 2048].fill(0));
        }
        let r = verify(dev, &log);
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(count(&r, "shorn"), 1, "older={older}: {}", r.to_text());
        assert_eq!(count(&r, "intact"), 63);
    }
}

#[test]
fn record_copied_over_another_is_misdirected() {
    let (dev, log) = fresh();
    let (a, b) = (log.acks[5].record, log.acks[30].record);
    dev.edit(|d| {
        let src = d[a.offset as usize..a.end() as usize].to_vec();
        d[b.offset as usize..b.end() as usize].copy_from_slice(&src);
    });
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(count(&r, "misdirected"), 1, "{}", r.to_text());
    assert_eq!(
        r.findings[0].seq, b.seq,
        "the record whose place holds a foreign record"
    );
    assert_eq!(count(&r, "intact"), 63);
}

#[test]
fn misdirected_write_leaves_old_data_and_is_found_elsewhere() {
    let (dev, log) = fresh();
    let v = log.acks[40].record;
    // The drive wrote record v beyond the run's records and left zeros at its home.
    dev.edit(|d| {
        let src = d[v.offset as usize..v.end() as usize].to_vec();
        d[v.offset as usize..v.end() as usize].fill(0);
        let far = 64 * 4096 + 8192;
        d[far..far + 4096].copy_from_slice(&src);
    });
    let mut log2 = log.clone();
    // Make the scanned span include the landing place: one more acked record beyond it.
    let extra = write_extra(&dev, &log, 64 * 4096 + 16384);
    log2.acks.push(extra);
    let r = verify(dev, &log2);
    assert_eq!(count(&r, "misdirected"), 1, "{}", r.to_text());
    assert_eq!(r.findings[0].found_at, Some(64 * 4096 + 8192));
}

fn write_extra(dev: &MemDevice, log: &RunLog, offset: u64) -> Ack {
    let run = log.descriptor.run_id;
    let rec = RecordId {
        stream: 0,
        seq: 10_000,
        offset,
        sectors: 8,
        write_time_ns: plugpull::model::now_ns(),
    };
    let mut b = vec![0u8; 4096];
    fill_record(&mut b, &RunKey::new(run), run, &rec);
    dev.write_at(&b, offset).unwrap();
    Ack {
        record: rec,
        flushed_ns: plugpull::model::now_ns(),
    }
}

#[test]
fn region_set_back_to_older_image_is_lost_with_window_and_holes() {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let p = plan(RunId([1; 16]), 100, Placement::Sequential, 1, 4096, 4096);
    let log = write(&dev, &p);
    // Set records 40..50 back to zeros (their state before the run): lost, while 50..100
    // survive, so these are holes, not a lost tail.
    let (a, b) = (
        log.acks[40].record.offset as usize,
        log.acks[50].record.offset as usize,
    );
    dev.edit(|d| d[a..b].fill(0));
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(count(&r, "lost"), 10);
    assert_eq!(count(&r, "intact"), 90);
    let w = r.loss_window.as_ref().unwrap();
    assert_eq!((w.records, w.bytes), (10, 40960));
    // The window runs from the earliest lost record's ack (record 40's) to the run's
    // last ack (record 99's): ack times come from the writer's clock, so read them back.
    let want_ms = (log.acks[99].flushed_ns - log.acks[40].flushed_ns) as f64 / 1e6;
    assert!(want_ms > 0.0, "59 flushes take time: {want_ms} ms");
    assert_eq!(w.ms, want_ms);
    assert_eq!(r.ordering_holes.count, 10);
}

#[test]
fn lost_tail_is_not_a_hole() {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let log = write(
        &dev,
        &plan(RunId([1; 16]), 100, Placement::Sequential, 1, 4096, 4096),
    );
    let a = log.acks[90].record.offset as usize;
    dev.edit(|d| d[a..a + 10 * 4096].fill(0));
    let r = verify(dev, &log);
    assert_eq!(count(&r, "lost"), 10);
    assert_eq!(r.ordering_holes.count, 0, "{}", r.to_text());
}

#[test]
fn another_runs_records_are_stale_not_corrupt() {
    let (dev, log) = fresh();
    let other = Arc::new(MemDevice::new(REGION as usize));
    write(
        &other,
        &plan(RunId([2; 16]), 64, Placement::Sequential, 1, 4096, 4096),
    );
    let o = other.snapshot();
    dev.edit(|d| d[0..8 * 4096].copy_from_slice(&o[0..8 * 4096]));
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(count(&r, "stale"), 8, "{}", r.to_text());
    assert_eq!(count(&r, "corrupt"), 0);
    assert_eq!(count(&r, "intact"), 56);
}

#[test]
fn unflushed_later_writes_partly_surviving_are_no_alarm() {
    // An honest drive after a cut: all acked records present, plus a later unacked write
    // that was torn (half of it landed over an acked record's place).
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let p = plan(RunId([1; 16]), 300, Placement::Sequential, 1, 4096, 4096);
    let log = write(&dev, &p);
    let mut acked = log.clone();
    acked.acks.truncate(280); // the last 20 were "in flight": never acknowledged
    let older = Arc::new(MemDevice::new(REGION as usize));
    older.restore(&dev.snapshot());
    // Tear record 290: only its first half survived; the rest shows what was there before
    // (record 290-256 = 34 of this run, which is acked and older).
    let v = log.acks[290].record;
    let prev = log.acks[34].record;
    assert_eq!(prev.offset, v.offset);
    let run = log.descriptor.run_id;
    let mut b = vec![0u8; 4096];
    fill_record(&mut b, &RunKey::new(run), run, &prev);
    older.edit(|d| d[v.offset as usize + 2048..v.end() as usize].copy_from_slice(&b[2048..]));
    let r = verify(older, &acked);
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
}

#[test]
fn nothing_acked_is_inconclusive() {
    let dev = Arc::new(MemDevice::new(REGION as usize));
    let p = plan(RunId([1; 16]), 0, Placement::Sequential, 1, 4096, 4096);
    let log = write(&dev, &p);
    let r = verify(dev, &log);
    assert_eq!(r.verdict, Verdict::Inconclusive);
}

#[test]
fn device_smaller_than_region_marks_the_rest_unreadable() {
    let (dev, log) = fresh();
    let small = Arc::new(MemDevice::new(32 * 4096));
    small.restore(&dev.snapshot()[..32 * 4096]);
    let r = verify(small, &log);
    assert_eq!(count(&r, "unreadable"), 32);
    assert_eq!(count(&r, "intact"), 32);
    assert_eq!(r.verdict, Verdict::Fail);
}

/// A device whose reads fail with EIO in [bad_from, bad_to), or hang forever if `hang`;
/// with `slow_odd_chunks`, reads of odd 2 MiB chunks take 20 ms (one of verify's readers
/// then runs ahead of the other).
struct Faulty {
    inner: Arc<MemDevice>,
    bad_from: u64,
    bad_to: u64,
    hang: bool,
    slow_odd_chunks: bool,
}

impl Device for Faulty {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
        panic!("verify must never write")
    }
    fn flush(&self) -> std::io::Result<()> {
        panic!("verify must never flush")
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        if self.slow_odd_chunks && (offset >> 21) % 2 == 1 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let end = offset + buf.len() as u64;
        if offset < self.bad_to && end > self.bad_from {
            if self.hang {
                std::thread::sleep(Duration::from_secs(3600));
            }
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.read_at(buf, offset)
    }
}

#[test]
fn eio_range_is_unreadable_and_the_rest_judged() {
    let (dev, log) = fresh();
    let f = Arc::new(Faulty {
        inner: dev,
        bad_from: 8 * 4096,
        bad_to: 12 * 4096,
        hang: false,
        slow_odd_chunks: false,
    });
    let r = verify_device(f, &log, Duration::from_secs(10));
    assert_eq!(r.verdict, Verdict::Fail);
    assert_eq!(count(&r, "unreadable"), 4, "{}", r.to_text());
    assert_eq!(count(&r, "intact"), 60);
    assert_eq!(
        r.unreadable_ranges.iter().map(|u| u.1).sum::<u64>(),
        4 * 4096
    );
}

#[test]
fn hung_reads_time_out_as_unreadable_and_inconclusive() {
    let (dev, log) = fresh();
    let f = Arc::new(Faulty {
        inner: dev,
        bad_from: 0,
        bad_to: 1 << 40,
        hang: true,
        slow_odd_chunks: false,
    });
    let limit = Duration::from_millis(300);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(verify_device(f, &log, limit));
    });
    // A hung read sleeps an hour. The watchdog (400 times the read timeout) only turns
    // a verify that waits for it into a failure now rather than in an hour.
    let r = done
        .recv_timeout(Duration::from_secs(120))
        .expect("verify waited on a hung read instead of giving up at its read timeout");
    // What gave up is the read timeout, at the first read, before any record was read.
    let t = r.facts.read_timeout.as_ref().expect("no read timed out");
    assert_eq!(
        (t.limit, t.unread, t.acks, t.damage_seen),
        (limit, 64, 64, false),
        "{t:?}"
    );
    assert_eq!(count(&r, "unreadable"), 64);
    // A timeout proves no damage: not a verdict on the drive.
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.to_text());
}

#[test]
fn a_reader_running_ahead_does_not_stall_verify() {
    // A shared chunk pool once let the fast reader hold every chunk while the decoder
    // waited for the slow reader's next one; the read timeout then turned the rest of
    // the region into false "unreadable" findings.
    let size = 64u64 << 20;
    let dev = Arc::new(MemDevice::new(size as usize));
    let mut p = plan(
        RunId([1; 16]),
        64,
        Placement::Sequential,
        1,
        1 << 20,
        1 << 20,
    );
    p.region_bytes = size;
    let log = write(&dev, &p);
    assert_eq!(log.acks.len(), 64);
    let lopsided = Faulty {
        inner: dev,
        bad_from: 0,
        bad_to: 0,
        hang: false,
        slow_odd_chunks: true,
    };
    let r = verify_device(Arc::new(lopsided), &log, Duration::from_secs(5));
    // A stall lasts until the read timeout and then shows as "unreadable" findings: the
    // verdict and the counts are what guard it, not the wall clock.
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert_eq!(count(&r, "intact"), 64);
    assert_eq!(count(&r, "unreadable"), 0, "{}", r.to_text());
}

#[test]
fn scan_region_finds_a_misdirected_copy_outside_the_acked_span() {
    let (dev, log) = fresh();
    let v = log.acks[40].record;
    // The copy lands in the run's region but past every acknowledged record.
    let far = 512 * 1024 + 8192;
    dev.edit(|d| {
        let src = d[v.offset as usize..v.end() as usize].to_vec();
        d[v.offset as usize..v.end() as usize].fill(0);
        d[far..far + 4096].copy_from_slice(&src);
    });
    let span_only = verify(dev.clone(), &log);
    assert_eq!(
        count(&span_only, "lost"),
        1,
        "without --scan-region the copy is not seen: {}",
        span_only.to_text()
    );
    let whole = plugpull::verify::verify_device_with_progress(
        dev,
        &log,
        Duration::from_secs(10),
        true,
        &|_, _| {},
    );
    assert_eq!(count(&whole, "misdirected"), 1, "{}", whole.to_text());
    assert_eq!(whole.findings[0].found_at, Some(far as u64));
    assert_eq!(count(&whole, "intact"), 63);
    assert_eq!(whole.bytes_read, REGION);
}
