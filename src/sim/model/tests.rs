//! The model's invariant checks can fail: each test breaks one invariant on purpose
//! through a test hook and expects the check to name it. (That they hold is shown by every
//! other sim test, which runs them after every operation.)

use super::invariants::Breakage;
use super::{Model, SimConfig};
use crate::sim::oracle::{Class, Event};
use crate::sim::{Kind, Profile};

fn model(kind: Kind) -> Model {
    let mut profile = Profile::new(kind);
    profile.early_destage_p = 0.0;
    profile.flush_latency_us = 0;
    Model::start(SimConfig {
        size_bytes: 1 << 20,
        profile,
        seed: 42,
        backing: None,
        oracle: None,
    })
    .unwrap()
}

/// A model with one cached (unflushed) 4 KiB write at offset 8192.
fn with_cached_write(kind: Kind) -> Model {
    let mut m = model(kind);
    m.write(&[7u8; 4096], 8192).unwrap();
    m.check_invariants().unwrap();
    m
}

fn broken(m: &Model) -> &'static str {
    m.check_invariants()
        .expect_err("the check must catch it")
        .invariant
}

#[test]
fn cover_pointing_at_another_write_is_caught() {
    let mut m = with_cached_write(Kind::Honest);
    m.break_for_test(Breakage::CoverPointsAway);
    assert_eq!(broken(&m), "cache cover");
}

#[test]
fn a_read_not_returning_the_cached_bytes_is_caught() {
    let mut m = with_cached_write(Kind::Honest);
    m.break_for_test(Breakage::StaleOverlay);
    assert_eq!(broken(&m), "cache overlay");
}

#[test]
fn an_honest_drive_keeping_a_flushed_write_is_caught() {
    let mut m = with_cached_write(Kind::Honest);
    m.break_for_test(Breakage::FlushedWriteKept);
    assert_eq!(broken(&m), "flushed write in cache");
}

#[test]
fn media_damage_no_fault_explains_is_caught() {
    let mut m = model(Kind::Honest);
    m.break_for_test(Breakage::SilentMediaDamage);
    assert_eq!(broken(&m), "media");
}

#[test]
fn a_counter_going_back_is_caught() {
    let mut m = with_cached_write(Kind::Honest);
    m.break_for_test(Breakage::CounterRewound);
    assert!(broken(&m).starts_with("counters"));
}

#[test]
fn a_cache_surviving_the_cut_is_caught() {
    let mut m = model(Kind::Lying);
    m.break_for_test(Breakage::CacheWithoutPower);
    assert_eq!(broken(&m), "power");
}

#[test]
fn a_fault_outside_the_drive_is_caught() {
    let mut m = model(Kind::Honest);
    m.log_mut_for_test().push_unchecked(Event::Fault {
        id: 99,
        class: Class::Lost,
        write: 1,
        offset: 1 << 20,
        len: 4096,
        records: vec![],
        flips: vec![],
        to_offset: None,
        conditional: true,
    });
    assert_eq!(broken(&m), "oracle range");
}

#[test]
fn fault_ids_out_of_order_are_caught() {
    let mut m = model(Kind::Honest);
    for id in [5, 5] {
        m.log_mut_for_test().push_unchecked(Event::Fault {
            id,
            class: Class::Corrupt,
            write: 1,
            offset: 0,
            len: 512,
            records: vec![],
            flips: vec![3],
            to_offset: None,
            conditional: false,
        });
    }
    assert_eq!(broken(&m), "oracle fault order");
}

#[test]
fn a_witness_of_no_hole_is_caught() {
    let mut m = model(Kind::Reorder);
    m.log_mut_for_test()
        .push_unchecked(Event::HoleWitness { fault: 7 });
    assert_eq!(broken(&m), "oracle hole witness");
}

#[test]
fn an_event_after_the_cut_other_than_start_is_caught() {
    let mut m = model(Kind::Honest);
    m.log_mut_for_test().push_unchecked(Event::Cut);
    m.log_mut_for_test().push_unchecked(Event::Destaged {
        write: 1,
        offset: 0,
        len: 512,
    });
    assert_eq!(broken(&m), "oracle order");
}

#[test]
fn a_resolver_index_losing_a_fault_is_caught() {
    let mut m = model(Kind::Lying);
    m.write(&[7u8; 4096], 8192).unwrap();
    m.flush().unwrap();
    m.check_invariants().unwrap();
    // The lying drive holds the write: a conditional lost fault on sectors 16..24.
    m.resolver_mut_for_test().unindex_for_test(16);
    assert_eq!(broken(&m), "resolver by_sector");
}

#[test]
fn a_resolver_change_the_log_does_not_show_is_caught() {
    let mut m = model(Kind::Honest);
    m.check_oracle_replays().unwrap();
    // An event applied but never logged: the replay of the log misses the fault.
    m.resolver_mut_for_test().apply(&Event::Fault {
        id: 1,
        class: Class::Shorn,
        write: 1,
        offset: 0,
        len: 512,
        records: vec![],
        flips: vec![],
        to_offset: None,
        conditional: false,
    });
    m.check_invariants().unwrap();
    assert_eq!(
        m.check_oracle_replays().unwrap_err().invariant,
        "oracle replay"
    );
}

/// In every build the drive runs the checks itself after every operation.
#[test]
#[should_panic(expected = "simulated drive invariant broken: cache overlay")]
fn the_next_operation_panics_on_a_broken_invariant() {
    let mut m = with_cached_write(Kind::Honest);
    m.break_for_test(Breakage::StaleOverlay);
    let mut buf = [0u8; 512];
    let _ = m.read(&mut buf, 0);
}
