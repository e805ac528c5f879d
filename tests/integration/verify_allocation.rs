//! How much memory verify takes for a small run.
//!
//! Why: verify's read pipeline used a fixed pool of six 2 MiB chunk buffers, allocated
//! and zeroed on every call, so a verify of a few sectors cost 12 MiB and most of its
//! time (tests/integration/verify_exhaustive.rs runs tens of thousands of such verifies). The
//! buffers are now no longer than the span verify reads. A counting allocator measures
//! what the calling thread allocates, where the pool is built. It is the allocator of
//! the whole integration test binary, but each thread counts only its own allocations,
//! so the tests of other files running beside this one add nothing to its count.

use plugpull::device::mem::MemDevice;
use plugpull::device::{Device, FlushMethod};
use plugpull::model::Verdict;
use plugpull::model::{Ack, RunDescriptor, RunLog, WriterSettings};
use plugpull::record::RunKey;
use plugpull::record::{RecordId, RunId, fill_record};
use plugpull::verify::verify_device;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

/// Counts the bytes each thread allocates, then defers to the system allocator.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|a| a.set(a.get() + bytes as u64));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counter is a const-initialised thread-local Cell, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: as for `dealloc`, and the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocated_here() -> u64 {
    ALLOCATED.with(|a| a.get())
}

fn descriptor(run: RunId) -> RunDescriptor {
    RunDescriptor {
        run_id: run,
        format_version: plugpull::record::FORMAT_VERSION,
        plugpull_version: "test".into(),
        host: "test".into(),
        started_at: "now".into(),
        device: Default::default(),
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: 8 * 512,
            record_bytes_min: 512,
            record_bytes_max: 1536,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 1,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec![],
        tree: None,
    }
}

#[test]
fn a_verify_of_a_few_sectors_does_not_allocate_megabytes() {
    let run = RunId([0x33; 16]);
    let dev = Arc::new(MemDevice::new(8 * 512));
    let acks: Vec<Ack> = (0..4u64)
        .map(|i| {
            let record = RecordId {
                stream: 0,
                seq: i + 1,
                offset: i * 1024,
                sectors: 2,
                write_time_ns: 1_000 + i,
            };
            let mut b = vec![0u8; 1024];
            fill_record(&mut b, &RunKey::new(run), run, &record);
            dev.write_at(&b, record.offset).unwrap();
            Ack {
                record,
                flushed_ns: 2_000 + i,
            }
        })
        .collect();
    let log = RunLog {
        files: Default::default(),
        descriptor: descriptor(run),
        acks,
        events: vec![],
    };
    let before = allocated_here();
    let r = verify_device(dev, &log, Duration::from_secs(30));
    let used = allocated_here() - before;
    assert_eq!(r.verdict, Verdict::Pass, "{}", r.to_text());
    assert!(
        used < 1 << 20,
        "verifying 4 KiB allocated {used} bytes in the calling thread"
    );
}
