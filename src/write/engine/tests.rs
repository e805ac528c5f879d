//! The write loop's tests: the gate's counts and order, a panicking stream, a run
//! without the memory for its buffers.

use super::*;

/// `n` acks of stream 0 from seq `from` on.
fn acks(from: u64, n: u64) -> Vec<Ack> {
    (from..from + n)
        .map(|seq| Ack {
            record: RecordId {
                stream: 0,
                seq,
                offset: 0,
                sectors: 8,
                write_time_ns: 0,
            },
            flushed_ns: 0,
        })
        .collect()
}

/// The acked counts are exact the moment a batch is pushed, and a refused batch
/// (a failure came first) counts nothing.
#[test]
fn acked_counts_are_exact_at_once_and_refused_batches_count_nothing() {
    let p = Progress::default();
    let sink = Mutex::new(Vec::new());
    assert!(p.ack(&sink, &acks(1, 3)));
    assert_eq!((p.records_acked(), p.bytes_acked()), (3, 3 * 4096));
    assert!(p.ack(&sink, &acks(4, 1)));
    assert_eq!((p.records_acked(), p.bytes_acked()), (4, 4 * 4096));
    p.fail(failure(
        "flush",
        acks(5, 1)[0].record,
        std::io::Error::other("cut"),
    ));
    assert!(!p.ack(&sink, &acks(5, 5)));
    assert_eq!((p.records_acked(), p.bytes_acked()), (4, 4 * 4096));
    assert_eq!(sink.lock().unwrap().len(), 4);
}

/// An ack that would leave its stream out of order (a seq again, or going back) is
/// a bug the gate stops in every build, before the witness sees it.
#[test]
fn an_ack_out_of_order_in_its_stream_is_stopped_at_the_gate() {
    for (first, second) in [((1, 3), (3, 1)), ((1, 3), (2, 2)), ((5, 1), (1, 1))] {
        let p = Progress::default();
        let sink = Mutex::new(Vec::new());
        assert!(p.ack(&sink, &acks(first.0, first.1)));
        let again =
            std::panic::catch_unwind(AssertUnwindSafe(|| p.ack(&sink, &acks(second.0, second.1))));
        assert!(again.is_err(), "{first:?} then {second:?} was pushed");
        assert_eq!(sink.lock().unwrap().len() as u64, first.1);
    }
}

/// Writes like a memory drive, but panics at the `at`-th write of stream 1's share
/// (offsets past `panic_from`): a bug in the write path.
struct PanicsInStreamOne {
    inner: crate::device::mem::MemDevice,
    panic_from: u64,
    writes: AtomicU64,
    at: u64,
}

impl Device for PanicsInStreamOne {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if offset >= self.panic_from && self.writes.fetch_add(1, Relaxed) + 1 == self.at {
            panic!("a bug in the write path");
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
}

/// One stream thread panics: the run ends (no deadlock, no cascade of PoisonError
/// panics from the other stream), the failure says plugpull panicked (not the
/// target), and no ack was pushed after it: the panicking stream acknowledged only
/// the records before its panicked write, and the total is what the gate counted.
#[test]
fn a_panicking_stream_is_a_failure_that_stops_every_stream() {
    let region = 1u64 << 20;
    let plan = Plan {
        run: crate::record::RunId([7; 16]),
        region_offset: 0,
        region_bytes: region,
        record_min: 4096,
        record_max: 4096,
        placement: crate::write::Placement::Sequential,
        streams: 2,
        seed: 1,
        align: 512,
        count: None,
        duration: None,
    };
    let dev = PanicsInStreamOne {
        inner: crate::device::mem::MemDevice::new(region as usize),
        panic_from: plan.region_offset + plan.share_bytes(),
        writes: AtomicU64::new(0),
        at: 20,
    };
    // Without the failure nothing would stop this run (no count, no duration); a
    // stream left waiting for its dead partner would hang it, hence the watchdog.
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (sink, stop, progress) = (
            Mutex::new(Vec::new()),
            AtomicBool::new(false),
            Progress::default(),
        );
        run_streams(&dev, &plan, &sink, &stop, &progress).expect("buffers");
        let _ = done.send((sink, progress));
    });
    let (sink, progress) = ended
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the run ended after the panic (no hang, no panic out of run_streams)");
    let f = progress.failure().expect("the panic is the run's failure");
    assert!(f.is_internal(), "{f:?}");
    assert_eq!(f.record.stream, 1);
    assert!(f.error.contains("a bug in the write path"), "{}", f.error);
    let acks = sink.lock().unwrap();
    assert_eq!(acks.len() as u64, progress.records_acked());
    let one: Vec<u64> = acks
        .iter()
        .filter(|a| a.record.stream == 1)
        .map(|a| a.record.seq)
        .collect();
    assert_eq!(
        one,
        (1..20).collect::<Vec<u64>>(),
        "stream 1 acked past its panic"
    );
}

/// The shared histogram lags a stream's samples by at most MERGE_BATCHES batches
/// or MERGE_NS, and holds all of them once the stream's latencies are dropped.
#[test]
fn stream_latencies_reach_the_shared_histogram_in_time_and_in_full() {
    let h = Histogram::default();
    let mut l = StreamLatency::new(&h);
    let t0 = 1_000_000_000_000u64;
    l.add(t0, 5_000);
    let first = h.count();
    l.add(t0 + 1_000_000, 6_000);
    assert_eq!(h.count(), first, "merged again after 1 ms");
    l.add(t0 + MERGE_NS + 1, 7_000);
    assert_eq!(h.count(), 3, "merged after MERGE_NS");
    // Batches close together in time: merged every MERGE_BATCHES.
    let t1 = t0 + MERGE_NS + 2;
    for k in 0..MERGE_BATCHES as u64 {
        assert_eq!(h.count(), 3, "batch {k}: merged early");
        l.add(t1 + k, 1_000);
    }
    assert_eq!(h.count(), 3 + MERGE_BATCHES as u64);
    l.add(t1 + 1_000, 9_000_000);
    drop(l);
    assert_eq!(h.count(), 4 + MERGE_BATCHES as u64, "the rest on drop");
    assert!(h.max_ns() >= 9_000_000);
}

/// Records too large for memory: the run is refused with the sizes that needed it,
/// before any stream starts (nothing written, nothing acknowledged), instead of the
/// process aborting in the middle of the run.
#[test]
fn a_run_without_memory_for_its_buffers_is_refused_before_it_writes() {
    let plan = Plan {
        run: crate::record::RunId([7; 16]),
        region_offset: 0,
        region_bytes: 1 << 20,
        record_min: 4096,
        // Past any address space: each buffer's mapping is refused.
        record_max: 1 << 62,
        placement: crate::write::Placement::Sequential,
        streams: 2,
        seed: 1,
        align: 512,
        count: Some(10),
        duration: None,
    };
    let dev = crate::device::mem::MemDevice::new(1 << 20);
    let (sink, progress) = (Mutex::new(Vec::new()), Progress::default());
    let e = run_streams(&dev, &plan, &sink, &AtomicBool::new(false), &progress)
        .expect_err("no memory for 2 streams of 4 EiB records");
    let text = crate::exit::error_chain(&e);
    assert!(
        text.starts_with(
            "cannot allocate the writer's record buffers (2 streams of 32 buffers of 4.0 EiB)"
        ),
        "{text}"
    );
    assert!(text.contains("cannot map an I/O buffer"), "{text}");
    assert_eq!(progress.records_acked(), 0);
    assert!(progress.failure().is_none(), "refused, not failed mid-run");
    assert!(sink.lock().unwrap().is_empty());
}
