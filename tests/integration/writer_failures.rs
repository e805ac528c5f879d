//! Guarantee 1: an ack only after the flush covering its record succeeded, and nothing
//! more after any failed write or flush.

use plugpull::device::Device;
use plugpull::device::mem::MemDevice;
use plugpull::model::Ack;
use plugpull::model::Placement;
use plugpull::record::RunId;
use plugpull::write::engine::{AckSink, Progress, run_streams};
use plugpull::write::plan::Plan;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

/// Fails the `fail_at`-th flush (1-based) and every later one, or the write instead.
struct FailingDevice {
    inner: MemDevice,
    flushes: AtomicU64,
    ok_flushes: AtomicU64,
    fail_at: u64,
    fail_writes: bool,
    failed: AtomicBool,
}

impl Device for FailingDevice {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if self.fail_writes && self.flushes.load(SeqCst) + 1 >= self.fail_at {
            self.failed.store(true, SeqCst);
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        let n = self.flushes.fetch_add(1, SeqCst) + 1;
        if !self.fail_writes && n >= self.fail_at {
            self.failed.store(true, SeqCst);
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        self.ok_flushes.fetch_add(1, SeqCst);
        Ok(())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
}

/// Records acks, and whether the device had already failed when each was pushed.
struct Sink<'a> {
    dev: &'a FailingDevice,
    acks: Mutex<Vec<(Ack, bool)>>,
}

impl AckSink for Sink<'_> {
    fn push(&self, ack: Ack) {
        let after_failure = self.dev.failed.load(SeqCst);
        self.acks.lock().unwrap().push((ack, after_failure));
    }
}

fn plan(streams: u16) -> Plan {
    Plan {
        run: RunId([1; 16]),
        region_offset: 0,
        region_bytes: 1 << 20,
        record_min: 4096,
        record_max: 4096,
        placement: Placement::Sequential,
        streams,
        seed: 1,
        align: 512,
        count: Some(100_000),
        duration: None,
    }
}

fn device(fail_at: u64, fail_writes: bool) -> FailingDevice {
    FailingDevice {
        inner: MemDevice::new(1 << 20),
        flushes: AtomicU64::new(0),
        ok_flushes: AtomicU64::new(0),
        fail_at,
        fail_writes,
        failed: AtomicBool::new(false),
    }
}

#[test]
fn one_stream_acks_exactly_the_successful_flushes_then_nothing() {
    for fail_writes in [false, true] {
        let dev = device(101, fail_writes);
        let sink = Sink {
            dev: &dev,
            acks: Mutex::new(vec![]),
        };
        let p = Progress::default();
        run_streams(&dev, &plan(1), &sink, &AtomicBool::new(false), &p)
            .expect("the record buffers");
        let acks = sink.acks.lock().unwrap();
        assert_eq!(
            acks.len() as u64,
            dev.ok_flushes.load(SeqCst),
            "fail_writes={fail_writes}"
        );
        assert_eq!(acks.len(), 100);
        assert!(
            acks.iter().all(|(_, after)| !after),
            "an ack was pushed after the failure"
        );
        let f = p.failure().expect("the failure is reported");
        assert_eq!(f.during, if fail_writes { "write" } else { "flush" });
        assert!(
            acks.iter().all(|(a, _)| a.record.seq != f.record.seq),
            "the failing record was acked"
        );
        assert_eq!(p.last_ack().unwrap().record.seq, 100);
    }
}

#[test]
fn many_streams_never_ack_the_failing_record_nor_more_than_flushed() {
    let dev = device(500, false);
    let sink = Sink {
        dev: &dev,
        acks: Mutex::new(vec![]),
    };
    let p = Progress::default();
    run_streams(&dev, &plan(4), &sink, &AtomicBool::new(false), &p).expect("the record buffers");
    let acks = sink.acks.lock().unwrap();
    assert!(acks.len() as u64 <= dev.ok_flushes.load(SeqCst));
    let f = p.failure().unwrap();
    assert!(
        !acks
            .iter()
            .any(|(a, _)| a.record.stream == f.record.stream && a.record.seq == f.record.seq)
    );
    // Every stream stopped: the failing flush is the last one any stream attempted,
    // give or take one in flight per other stream.
    assert!(
        dev.flushes.load(SeqCst) <= 500 + 3,
        "streams kept writing after the failure"
    );
}

#[test]
fn acks_carry_flush_completion_after_submission() {
    let dev = device(u64::MAX, false);
    let sink = Sink {
        dev: &dev,
        acks: Mutex::new(vec![]),
    };
    let mut pl = plan(2);
    pl.count = Some(200);
    run_streams(
        &dev,
        &pl,
        &sink,
        &AtomicBool::new(false),
        &Progress::default(),
    )
    .expect("the record buffers");
    let acks = sink.acks.lock().unwrap();
    assert_eq!(acks.len(), 200);
    assert!(
        acks.iter()
            .all(|(a, _)| a.flushed_ns >= a.record.write_time_ns)
    );
}
