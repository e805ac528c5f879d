use super::*;

fn fault(id: u64, class: Class, write: u64, offset: u64, len: u64, cond: bool) -> Event {
    Event::Fault {
        id,
        class,
        write,
        offset,
        len,
        records: vec![],
        flips: vec![],
        to_offset: None,
        conditional: cond,
    }
}

fn start() -> Event {
    Event::Start {
        seed: 1,
        profile: "x".into(),
        size_bytes: 1 << 20,
    }
}

#[test]
fn held_write_destaged_later_is_not_lost() {
    let ev = vec![
        start(),
        fault(1, Class::Lost, 5, 4096, 4096, true),
        Event::Destaged {
            write: 5,
            offset: 4096,
            len: 4096,
        },
    ];
    assert!(resolve_events(&ev).is_empty());
}

#[test]
fn later_write_undoes_only_its_sectors() {
    let ev = vec![
        start(),
        fault(1, Class::Shorn, 5, 0, 4096, false),
        Event::Destaged {
            write: 4,
            offset: 0,
            len: 4096,
        },
        Event::Destaged {
            write: 6,
            offset: 0,
            len: 1024,
        },
    ];
    let f = resolve_events(&ev);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].sectors, 6);
}

#[test]
fn held_becomes_final_at_new_session_and_hole_needs_witness() {
    let ev = vec![
        start(),
        fault(1, Class::Lost, 5, 0, 512, true),
        fault(2, Class::Hole, 6, 512, 512, true),
        fault(3, Class::Hole, 7, 1024, 512, true),
        Event::HoleWitness { fault: 3 },
        start(),
        Event::Destaged {
            write: 5,
            offset: 0,
            len: 512,
        },
    ];
    let f = resolve_events(&ev);
    // The second start's write 5 is later than the first start's write 5: it overwrote the range.
    assert_eq!(f.len(), 2);
    assert_eq!(f[0].class, Class::Lost);
    assert_eq!(f[1].class, Class::Hole);
}

/// Found by `plugpull soak` (seed 7000050, lying, random placement): a later,
/// unacknowledged write that reached media over part of a held record used to drop the
/// whole record from the oracle, while its other sectors still held old data and
/// verify rightly reported it lost.
#[test]
fn a_later_write_torn_over_a_lost_record_leaves_the_rest_lost() {
    let rec = RecordRef {
        run: "r".into(),
        stream: 0,
        seq: 1,
        record_offset: 0,
        record_sectors: 8,
        first_index: 0,
        last_index: 7,
        at: 0,
    };
    let mut ev = vec![
        start(),
        Event::Fault {
            id: 1,
            class: Class::Lost,
            write: 5,
            offset: 0,
            len: 4096,
            records: vec![rec],
            flips: vec![],
            to_offset: None,
            conditional: true,
        },
        Event::Destaged {
            write: 6,
            offset: 0,
            len: 1024,
        },
    ];
    let f = resolve_events(&ev);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].class, Class::Lost);
    assert_eq!(
        (f[0].records[0].first_index, f[0].records[0].last_index),
        (2, 7)
    );
    assert_eq!(f[0].records[0].at, 1024);
    // A later write flushed over the rest takes those sectors over: nothing is left.
    ev.push(Event::Superseded {
        write: 7,
        offset: 1024,
        len: 3072,
    });
    assert!(resolve_events(&ev).is_empty());
}

/// Found by `cargo test --test integration scenarios::ext4_on_loop_honest_passes_lying_fails` (seed
/// 195881, lying cycle 195882): the target was a file in ext4, so record 1 sat at offset 0
/// of the file but at 10 MiB on the drive. The resolver placed the shorn record's landed
/// sectors at the file offset (drive sectors 0 and 1); e2fsck's rewrite of the drive's
/// first 4 KiB in the next session "covered" them and the oracle called the record lost,
/// while its first two sectors were on media and verify rightly reported it shorn.
#[test]
fn shorn_record_of_a_file_target_is_placed_by_its_drive_offset() {
    let at = 10 << 20; // drive offset of the record's sector 2, the first lost one
    let rec = RecordRef {
        run: "r".into(),
        stream: 0,
        seq: 1,
        record_offset: 0,
        record_sectors: 8,
        first_index: 2,
        last_index: 7,
        at,
    };
    let mut ev = vec![
        start(),
        Event::Fault {
            id: 1,
            class: Class::Shorn,
            write: 5,
            offset: at,
            len: 3072,
            records: vec![rec],
            flips: vec![],
            to_offset: None,
            conditional: true,
        },
        start(),
        // The next session rewrites the drive's first 4 KiB: not the record's sectors.
        Event::Destaged {
            write: 1,
            offset: 0,
            len: 4096,
        },
    ];
    let f = resolve_events(&ev);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].class, Class::Shorn);
    // A later write over the two sectors that did land (just before `at`) hides them:
    // nothing of the record is visible, which verify calls lost.
    ev.push(Event::Destaged {
        write: 2,
        offset: at - 1024,
        len: 1024,
    });
    let f = resolve_events(&ev);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].class, Class::Lost);
}
