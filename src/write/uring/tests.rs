//! The io_uring engine on real file descriptors: a file, /dev/full (every write fails),
//! and the refusal of a target without a descriptor.

use super::*;
use crate::model::Ack;
use crate::record::decode_stamp;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::time::Duration;

fn plan(streams: u16, count: u64) -> Plan {
    Plan {
        run: crate::record::RunId([9; 16]),
        region_offset: 0,
        region_bytes: 8 << 20,
        record_min: 4096,
        record_max: 4096,
        placement: crate::model::Placement::Sequential,
        streams,
        seed: 1,
        align: 512,
        count: Some(count),
        duration: None,
    }
}

const DEPTH: DepthSettings = DepthSettings {
    iodepth: 8,
    flush_every: 8,
    flush_within: Duration::from_millis(1),
};

/// Runs `plan` on `file` with `flush`; the acks and the counters.
fn run_on(file: &std::fs::File, plan: &Plan, flush: FlushMethod) -> (Vec<Ack>, Progress) {
    let (sink, stop, progress) = (
        Mutex::new(Vec::new()),
        AtomicBool::new(false),
        Progress::default(),
    );
    let rings = Rings::set_up(plan.streams, &DEPTH).expect("io_uring on this machine");
    let buffers = RecordBuffers::allocate(plan, DEPTH.iodepth as usize).expect("buffers");
    run_streams(
        Some(file.as_fd()),
        rings,
        plan,
        &DEPTH,
        flush,
        buffers,
        &sink,
        &stop,
        &progress,
    )
    .expect("a descriptor");
    (sink.into_inner().unwrap(), progress)
}

/// Every record is acknowledged once, in sequence order per stream, and is on the file
/// where its ack says, for each flush method.
#[test]
fn every_record_is_acked_in_order_and_on_the_file() {
    for flush in FlushMethod::ALL {
        let file = tempfile::tempfile().unwrap();
        file.set_len(8 << 20).unwrap();
        let plan = plan(2, 600);
        let (acks, progress) = run_on(&file, &plan, flush);
        assert!(
            progress.failure().is_none(),
            "{flush}: {:?}",
            progress.failure()
        );
        assert_eq!(acks.len(), 600, "{flush}");
        assert_eq!(progress.records_acked(), 600);
        for stream in 0..2 {
            let seqs: Vec<u64> = acks
                .iter()
                .filter(|a| a.record.stream == stream)
                .map(|a| a.record.seq)
                .collect();
            assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{flush}");
        }
        let mut sector = [0u8; 512];
        for a in &acks {
            file.read_exact_at(&mut sector, a.record.offset).unwrap();
            let st = decode_stamp(&sector).expect("a stamp where the ack says");
            assert_eq!(st.record, a.record, "{flush}");
        }
    }
}

/// Every write fails (ENOSPC): nothing is acknowledged, the failure names a write, and
/// the writes in flight with it were reaped and counted.
#[test]
fn failing_writes_ack_nothing_and_are_all_reaped() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let (acks, progress) = run_on(&full, &plan(1, 1000), FlushMethod::Fdatasync);
    assert!(acks.is_empty(), "{} acked", acks.len());
    let f = progress.failure().expect("a failure");
    assert_eq!((f.during, f.raw_os_error), ("write", Some(libc::ENOSPC)));
    // The first failed completion stops the stream; the others in flight with it (the
    // depth was full before the first wait) are reaped and counted.
    assert_eq!(
        progress.writes_reaped_after_failure(),
        DEPTH.iodepth as u64 - 1
    );
}

#[test]
fn a_target_without_a_descriptor_is_refused() {
    let plan = plan(1, 10);
    let rings = Rings::set_up(1, &DEPTH).expect("io_uring on this machine");
    let buffers = RecordBuffers::allocate(&plan, 8).unwrap();
    let r = run_streams(
        None,
        rings,
        &plan,
        &DEPTH,
        FlushMethod::Fdatasync,
        buffers,
        &Mutex::new(Vec::new()),
        &AtomicBool::new(false),
        &Progress::default(),
    );
    assert!(matches!(r, Err(UringRefused::NoFileDescriptor)), "{r:?}");
}

/// Setup errors read as what they mean, with what to do.
#[test]
fn a_blocked_setup_says_why_and_what_to_do() {
    let e = refusal(64, std::io::Error::from_raw_os_error(libc::EPERM)).to_string();
    assert!(
        e.contains("seccomp") && e.contains("without --iodepth"),
        "{e}"
    );
    let e = refusal(64, std::io::Error::from_raw_os_error(libc::ENOSYS)).to_string();
    assert!(e.contains("no io_uring"), "{e}");
}

/// With `--flush-every` out of reach, `--flush-within` alone makes the flushes: acks
/// arrive in many groups while writes keep flowing, not all at the end. O_DIRECT on the
/// root disk, so writes stay in flight (a tmpfs completes them at submission).
#[test]
fn flush_within_flushes_while_writes_keep_flowing() {
    use std::os::unix::fs::OpenOptionsExt;
    let named = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(named.path())
        .unwrap();
    file.set_len(8 << 20).unwrap();
    let mut plan = plan(1, 0);
    plan.count = None;
    plan.duration = Some(Duration::from_millis(400));
    let depth = DepthSettings {
        iodepth: 8,
        flush_every: 1_000_000,
        flush_within: Duration::from_millis(2),
    };
    let (sink, stop, progress) = (
        Mutex::new(Vec::new()),
        AtomicBool::new(false),
        Progress::default(),
    );
    let rings = Rings::set_up(1, &depth).unwrap();
    let buffers = RecordBuffers::allocate(&plan, 8).unwrap();
    run_streams(
        Some(file.as_fd()),
        rings,
        &plan,
        &depth,
        FlushMethod::Fdatasync,
        buffers,
        &sink,
        &stop,
        &progress,
    )
    .unwrap();
    let acks = sink.into_inner().unwrap();
    let mut groups: Vec<u64> = acks.iter().map(|a| a.flushed_ns).collect();
    groups.dedup();
    assert!(progress.failure().is_none(), "{:?}", progress.failure());
    assert!(
        groups.len() >= 10,
        "{} records acked in {} group(s)",
        acks.len(),
        groups.len()
    );
}
