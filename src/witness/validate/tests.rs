use super::*;
use crate::wire::msg::tests::sample_descriptor;

/// sample_descriptor: region [0, 1 MiB), 4096-byte records, one stream; here with
/// two streams and 4 KiB..64 KiB records at offset 1 MiB.
fn desc() -> RunDescriptor {
    let mut d = sample_descriptor(1);
    d.settings.streams = 2;
    d.settings.region_offset = 1 << 20;
    d.settings.record_bytes_max = 64 << 10;
    d
}

fn rules() -> AckRules {
    AckRules::for_run(&desc()).unwrap()
}

fn rec(stream: u16, seq: u64, offset: u64, sectors: u32) -> RecordId {
    RecordId {
        stream,
        seq,
        offset,
        sectors,
        write_time_ns: 1,
    }
}

fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
    Ack {
        record: rec(stream, seq, offset, sectors),
        flushed_ns: 2,
    }
}

fn fault_of(d: impl FnOnce(&mut RunDescriptor)) -> DescriptorFault {
    let mut x = desc();
    d(&mut x);
    AckRules::for_run(&x).unwrap_err()
}

#[test]
fn a_writer_descriptor_passes() {
    let r = rules();
    assert_eq!(r.min_sectors, 8);
    assert_eq!(r.max_sectors, 128);
    assert_eq!((r.region_start, r.region_end), (1 << 20, 2 << 20));
}

#[test]
fn descriptor_needs_a_stream() {
    assert_eq!(
        fault_of(|d| d.settings.streams = 0),
        DescriptorFault::NoStreams
    );
}

#[test]
fn descriptor_record_sizes_are_whole_sectors() {
    assert_eq!(
        fault_of(|d| d.settings.record_bytes_min = 0),
        DescriptorFault::RecordSizeNotSectors { bytes: 0 }
    );
    assert_eq!(
        fault_of(|d| d.settings.record_bytes_max = 4097),
        DescriptorFault::RecordSizeNotSectors { bytes: 4097 }
    );
}

#[test]
fn descriptor_min_is_not_above_max() {
    assert_eq!(
        fault_of(|d| d.settings.record_bytes_min = 128 << 10),
        DescriptorFault::MinAboveMax {
            min: 128 << 10,
            max: 64 << 10
        }
    );
}

#[test]
fn descriptor_record_fits_an_ack() {
    let bytes = (u32::MAX as u64 + 1) * 512;
    assert_eq!(
        fault_of(|d| {
            d.settings.record_bytes_max = bytes;
            d.settings.region_bytes = u64::MAX / 2;
        }),
        DescriptorFault::RecordTooLarge { bytes }
    );
}

#[test]
fn descriptor_region_offset_is_aligned() {
    assert_eq!(
        fault_of(|d| d.settings.region_offset = 1000),
        DescriptorFault::RegionOffsetUnaligned { offset: 1000 }
    );
}

#[test]
fn descriptor_region_end_fits() {
    assert!(matches!(
        fault_of(|d| d.settings.region_offset = u64::MAX / 512 * 512),
        DescriptorFault::RegionEndOverflows { .. }
    ));
}

#[test]
fn descriptor_region_holds_a_largest_record_per_stream() {
    // Empty region.
    assert!(matches!(
        fault_of(|d| d.settings.region_bytes = 0),
        DescriptorFault::RegionTooSmall { .. }
    ));
    // Two streams of 64 KiB records need 128 KiB; one sector less is too small.
    assert!(matches!(
        fault_of(|d| d.settings.region_bytes = (128 << 10) - 512),
        DescriptorFault::RegionTooSmall { .. }
    ));
    let mut d = desc();
    d.settings.region_bytes = 128 << 10;
    assert!(AckRules::for_run(&d).is_ok());
    // An unaligned region size is what `write --size 1000000` gives: allowed.
    d.settings.region_bytes = 1_000_000;
    assert!(AckRules::for_run(&d).is_ok());
}

#[test]
fn ack_stream_must_exist() {
    let r = rules();
    assert_eq!(r.check(&rec(1, 1, 1 << 20, 8)), Ok(()));
    assert_eq!(
        r.check(&rec(2, 1, 1 << 20, 8)),
        Err(AckFault::StreamBeyondRun { streams: 2 })
    );
}

#[test]
fn ack_size_within_record_range() {
    let r = rules();
    let range = Err(AckFault::SizeOutOfRange { min: 8, max: 128 });
    for sectors in [0, 7, 129, u32::MAX] {
        assert_eq!(r.check(&rec(0, 1, 1 << 20, sectors)), range, "{sectors}");
    }
    for sectors in [8, 9, 128] {
        assert_eq!(r.check(&rec(0, 1, 1 << 20, sectors)), Ok(()), "{sectors}");
    }
}

#[test]
fn ack_offset_sector_aligned() {
    let r = rules();
    assert_eq!(
        r.check(&rec(0, 1, (1 << 20) + 100, 8)),
        Err(AckFault::OffsetUnaligned)
    );
    assert_eq!(r.check(&rec(0, 1, (1 << 20) + 512, 8)), Ok(()));
}

#[test]
fn ack_inside_region() {
    let r = rules();
    let outside = Err(AckFault::OutsideRegion {
        start: 1 << 20,
        end: 2 << 20,
    });
    // Before the region, ending past it, and far past it.
    assert_eq!(r.check(&rec(0, 1, (1 << 20) - 4096, 8)), outside);
    assert_eq!(r.check(&rec(0, 1, (2 << 20) - 512, 8)), outside);
    assert_eq!(r.check(&rec(0, 1, u64::MAX / 512 * 512, 8)), outside);
    // The last record that fits.
    assert_eq!(r.check(&rec(0, 1, (2 << 20) - 4096, 8)), Ok(()));
}

#[test]
fn seqs_rise_per_stream_within_and_across_batches() {
    let r = rules();
    let mut t = SeqTracker::default();
    let o = 1 << 20;
    // Interleaved streams, each rising; gaps are fine.
    t.check_batch(&r, 0, &[ack(0, 1, o, 8), ack(1, 1, o, 8), ack(0, 3, o, 8)])
        .unwrap();
    // A repeat within a batch.
    let v = t
        .check_batch(&r, 3, &[ack(1, 2, o, 8), ack(1, 2, o, 8)])
        .unwrap_err();
    assert_eq!(v.ack, 4);
    assert_eq!(v.fault, AckFault::SeqNotRising { previous: 2 });
    // Across batches: stream 0 is at 3.
    let v = t.check_batch(&r, 3, &[ack(0, 3, o, 8)]).unwrap_err();
    assert_eq!(
        (v.ack, v.fault),
        (3, AckFault::SeqNotRising { previous: 3 })
    );
    // The refused batches left nothing behind: stream 1 is still at 1.
    t.check_batch(&r, 3, &[ack(1, 2, o, 8), ack(0, 4, o, 8)])
        .unwrap();
    // A reset forgets.
    t.reset();
    t.check_batch(&r, 5, &[ack(0, 1, o, 8)]).unwrap();
}

#[test]
fn a_refused_batch_reports_its_first_bad_ack() {
    let mut t = SeqTracker::default();
    let o = 1 << 20;
    let v = t
        .check_batch(
            &rules(),
            10,
            &[ack(0, 1, o, 8), ack(0, 2, o, 0), ack(5, 3, o, 8)],
        )
        .unwrap_err();
    assert_eq!(v.ack, 11);
    assert!(v.to_string().contains("has 0 sectors"), "{v}");
    // Nothing of it was kept: seq 1 of stream 0 is still acceptable.
    t.check_batch(&rules(), 10, &[ack(0, 1, o, 8)]).unwrap();
}

#[test]
fn check_run_counts_every_bad_ack() {
    let o = 1 << 20;
    let acks = [
        ack(0, 1, o, 8),
        ack(0, 2, o, 0),
        ack(0, 3, o + 1, 8),
        ack(0, 4, o, 8),
    ];
    let v = check_run(&desc(), &acks).unwrap().unwrap();
    assert_eq!(v.count, 2);
    assert_eq!(v.first.ack, 1);
    assert_eq!(check_run(&desc(), &acks[..1]).unwrap(), None);
    let mut bad = desc();
    bad.settings.streams = 0;
    assert_eq!(check_run(&bad, &acks), Err(DescriptorFault::NoStreams));
}

/// A tree run's ack is a whole file (docs/protocol.md, file-entry acks): its offset is
/// 0, so one at another offset comes from no writer.
#[test]
fn a_file_entry_ack_starts_at_offset_zero() {
    let mut d = sample_descriptor(1);
    d.settings.region_bytes = 8 << 20;
    d.settings.record_bytes_min = 512;
    d.settings.record_bytes_max = 8 << 20;
    d.tree = Some(crate::model::TreeSettings {
        plan_version: 1,
        seed: 1,
        files: 10,
        total_bytes: 100_000,
        root: "plugpull-x".into(),
        flush: "fsync".into(),
    });
    let r = AckRules::for_run(&d).unwrap();
    assert_eq!(r.check(&rec(0, 1, 0, 8)), Ok(()));
    assert_eq!(r.check(&rec(0, 2, 512, 8)), Err(AckFault::FileNotAtZero));
    let v = Violation {
        ack: 3,
        record: rec(0, 2, 512, 8),
        fault: AckFault::FileNotAtZero,
    };
    assert!(
        v.to_string().contains("a file entry starts at offset 0"),
        "{v}"
    );
    // The same ack in a device run is fine.
    d.tree = None;
    assert_eq!(
        AckRules::for_run(&d).unwrap().check(&rec(0, 2, 512, 8)),
        Ok(())
    );
}
