use super::*;
use crate::record::RecordId;

fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
    Ack {
        record: RecordId {
            stream,
            seq,
            offset,
            sectors,
            write_time_ns: seq,
        },
        flushed_ns: seq,
    }
}

#[test]
fn later_acks_hide_earlier_sectors() {
    let acks = [
        ack(0, 1, 0, 8),    // [0, 4096)
        ack(0, 3, 1024, 2), // [1024, 2048) later: hides part of seq 1
        ack(0, 2, 4096, 8), // untouched
        ack(0, 4, 0, 8),    // hides all of seq 1 and seq 3
        ack(0, 5, 6144, 8), // hides the tail of seq 2
    ];
    let v = visible_ranges(&acks);
    assert_eq!(v[0], vec![]);
    assert_eq!(v[1], vec![]);
    assert_eq!(v[2], vec![(4096, 6144)]);
    assert_eq!(v[3], vec![(0, 4096)]);
    assert_eq!(v[4], vec![(6144, 10240)]);
    // Acks arrive in any order; the result does not depend on it.
    let mut rev = acks;
    rev.reverse();
    let mut w = visible_ranges(&rev);
    w.reverse();
    assert_eq!(v, w);
}

#[test]
fn a_selected_scan_gives_the_whole_scan_s_tallies_for_the_selected() {
    use crate::device::mem::MemDevice;
    use crate::record::{RunId, RunKey, fill_record};
    let run = RunId([3; 16]);
    let key = RunKey::new(run);
    let dev = Arc::new(MemDevice::new(64 * 1024));
    // seq 2 overwrites half of seq 1; seq 3 is never written (lost).
    let acks = [
        ack(0, 1, 0, 8),
        ack(0, 2, 2048, 8),
        ack(0, 3, 16384, 8),
        ack(0, 4, 32768, 8),
    ];
    for a in [acks[0], acks[1], acks[3]] {
        let mut buf = vec![0u8; a.record.len_bytes() as usize];
        fill_record(&mut buf, &key, run, &a.record);
        dev.write_at(&buf, a.record.offset).unwrap();
    }
    let t = Duration::from_secs(5);
    let whole = scan(dev.clone(), run, &acks, t);
    let some = scan_selected(dev, run, &acks, &[0, 2], t).unwrap();
    assert_eq!(some.tallies[0], whole.tallies[0]);
    assert_eq!(some.tallies[2], whole.tallies[2]);
    assert_eq!(some.tallies[1], SectorTally::default());
    assert_eq!(some.tallies[3], SectorTally::default());
    // Seq 1's second half is superseded by seq 2 though seq 2 was not selected.
    assert_ne!(whole.tallies[0], SectorTally::default());
    assert!(some.bytes_read < whole.bytes_read);
}

#[test]
fn a_later_record_inside_splits_an_earlier_one() {
    let v = visible_ranges(&[ack(0, 1, 0, 8), ack(0, 2, 1024, 2)]);
    assert_eq!(v[0], vec![(0, 1024), (2048, 4096)]);
    assert_eq!(v[1], vec![(1024, 2048)]);
}
