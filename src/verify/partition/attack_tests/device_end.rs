//! A device that ends before the run's records start.

use super::*;

/// A run whose region starts at 8 MiB on a device of 4 MiB (the wrong device, or a
/// partition that shrank): its one record, at 10 MiB, lies wholly past the device's end.
fn past_the_device() -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let d = descriptor(RunId([0x5a; 16]), 8 * MIB, 8 * MIB, 4096, 4096);
    let acks = vec![ack(0, 1, 10 * MIB, 8)];
    (d, acks, Arc::new(MemDevice::new((4 * MIB) as usize)))
}

/// Once broke: the whole run gives a report for every run (the promise's "whole run's
/// report" must exist to be matched), here a device shorter than where the records
/// start. With few acks for the region (an exact count: reads follow the records) the
/// whole run panics: `scan::Span::new` (src/verify/scan/mod.rs:436, `readable_end:
/// end.min(dev_end(..))`, not raised to `start` as `Span::of_part` does at :449) gives
/// a readable end before the span's start, and `sparse::record_runs`
/// (src/verify/scan/sparse.rs:50-51) clamps with `lo > hi`: "min > max". The parts
/// judge it (each part's readable end is at least its start).
#[test]
fn attack_a_device_ending_before_the_records_start_panics_the_sparse_whole_run() {
    let (d, acks, mem) = past_the_device();
    let t = Duration::from_secs(10);
    let plan = Plan::with_parts(&d, 2, 512, 1);
    let parts = in_parts(mem.clone(), &d, &acks, false, plan, t);
    assert_eq!(parts.report.counts.get("unreadable"), Some(&1));
    let whole = whole_run(mem.clone(), &d, &acks, t, false);
    let whole = whole.expect("the whole run judges a device shorter than the region");
    assert_eq!(without_time(&parts.report), without_time(&whole.report));
}

/// Once broke: same unreadable ranges. The same device shorter than where the records start,
/// read as a span (acks that cannot tell their count: a stream). The whole run lists
/// "beyond the end of the device" from the device's end (4 MiB) to the record's end,
/// 6 MiB of bytes no record holds and no scan was meant to read; the parts list it
/// from the span's start (10 MiB). Cause: `scan::Span::new`
/// (src/verify/scan/mod.rs:436, `readable_end: end.min(dev_end(dev, block))`) lets the
/// readable end fall before the span's start, and `scan_inner` (:315-320) pushes
/// `(readable_end, end - readable_end)`; `Span::of_part` (:449) raises it to the start.
#[test]
fn attack_a_device_ending_before_the_records_start_lists_another_unreadable_range() {
    let (d, acks, mem) = past_the_device();
    let t = Duration::from_secs(10);
    let stream = Unhinted(&acks);
    let whole = whole_run(mem.clone(), &d, &stream, t, false).unwrap();
    for room in [1, 1 << 20] {
        let plan = Plan::with_parts(&d, 2, 512, room);
        let parts = in_parts(mem.clone(), &d, &stream, false, plan, t);
        assert_eq!(
            parts.report.unreadable_ranges, whole.report.unreadable_ranges,
            "room {room}"
        );
        assert_eq!(without_time(&parts.report), without_time(&whole.report));
    }
}
