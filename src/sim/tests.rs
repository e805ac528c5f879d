//! Property tests of the model: many seeds, random workloads, random cut points. A small
//! independent checker reads the drive back after the cut the way verify would (latest
//! flushed record per slot) and must agree exactly with the resolved oracle. Every
//! failure message names the seed.

use super::oracle::Class;
use super::{Kind, Profile, SimConfig, SimDrive};
use crate::device::Device;
use crate::record::RunKey;
use crate::record::{RecordId, RunId, SECTOR, bit_difference, decode_stamp, fill_record};
use crate::rng::Rng;
use std::collections::{BTreeSet, HashMap};

const SLOT: u64 = 4096;
const SLOTS: u64 = 128;
const SIZE: u64 = SLOT * SLOTS;

struct Written {
    seq: u64,
    slot: u64,
    flushed: bool,
}

struct Workload {
    run: RunId,
    key: RunKey,
    writes: Vec<Written>,
}

impl Workload {
    fn record(&self, seq: u64, slot: u64) -> (RecordId, Vec<u8>) {
        let rec = RecordId {
            stream: 0,
            seq,
            offset: slot * SLOT,
            sectors: (SLOT as usize / SECTOR) as u32,
            write_time_ns: seq,
        };
        let mut buf = vec![0u8; SLOT as usize];
        fill_record(&mut buf, &self.key, self.run, &rec);
        (rec, buf)
    }
}

/// Runs a random workload: writes to random slots, flushes now and then, `ops` steps.
fn drive_workload(dev: &SimDrive, rng: &mut Rng, ops: usize) -> Workload {
    let run = RunId([7; 16]);
    let mut w = Workload {
        run,
        key: RunKey::new(run),
        writes: Vec::new(),
    };
    for seq in 1..=ops as u64 {
        let slot = rng.below(SLOTS);
        let (_, buf) = w.record(seq, slot);
        dev.write_at(&buf, slot * SLOT).unwrap();
        w.writes.push(Written {
            seq,
            slot,
            flushed: false,
        });
        if rng.chance(0.7) {
            dev.flush().unwrap();
            for x in &mut w.writes {
                x.flushed = true;
            }
        }
    }
    w
}

/// What the checker finds: (seq, class) for every latest flushed record not intact.
fn check(dev: &SimDrive, w: &Workload) -> BTreeSet<(u64, Class, u64)> {
    let mut image = vec![0u8; SIZE as usize];
    let mut unreadable = vec![false; SLOTS as usize];
    for slot in 0..SLOTS {
        let at = (slot * SLOT) as usize;
        if dev
            .read_at(&mut image[at..at + SLOT as usize], slot * SLOT)
            .is_err()
        {
            unreadable[slot as usize] = true;
        }
    }
    // Where each record's first sector was found.
    let mut found: HashMap<u64, Vec<u64>> = HashMap::new();
    for slot in 0..SLOTS {
        let at = (slot * SLOT) as usize;
        if let Ok(st) = decode_stamp(&image[at..at + SECTOR]) {
            found.entry(st.record.seq).or_default().push(slot);
        }
    }
    let mut out = BTreeSet::new();
    for slot in 0..SLOTS {
        let Some(a) = w
            .writes
            .iter()
            .filter(|x| x.slot == slot && x.flushed)
            .map(|x| x.seq)
            .max()
        else {
            continue;
        };
        if unreadable[slot as usize] {
            out.insert((a, Class::Unreadable, 0));
            continue;
        }
        let at = (slot * SLOT) as usize;
        let bytes = &image[at..at + SLOT as usize];
        let (_, expect) = w.record(a, slot);
        let sectors: Vec<&[u8]> = bytes.chunks(SECTOR).collect();
        // Sectors a later write of this run reached are judged for that write; the rest
        // are still this record's (sector by sector, as verify judges).
        let later = |i: usize, s: &[u8]| {
            decode_stamp(s)
                .is_ok_and(|st| st.record.seq > a && st.home() == slot * SLOT + (i * SECTOR) as u64)
        };
        let diffs: Vec<u64> = sectors
            .iter()
            .zip(expect.chunks(SECTOR))
            .enumerate()
            .filter(|(i, (g, _))| !later(*i, g))
            .map(|(_, (g, e))| bit_difference(g, e))
            .collect();
        if diffs.iter().all(|&d| d == 0) {
            continue;
        }
        if diffs.iter().all(|&d| d <= 8) {
            out.insert((a, Class::Corrupt, diffs.iter().sum()));
        } else if diffs.contains(&0) {
            out.insert((a, Class::Shorn, 0));
        } else if found.get(&a).is_some_and(|v| v.iter().any(|&s| s != slot))
            || sectors.iter().enumerate().any(|(i, s)| {
                decode_stamp(s).is_ok_and(|st| {
                    st.run == w.run && st.home() != slot * SLOT + (i * SECTOR) as u64
                })
            })
        {
            out.insert((a, Class::Misdirected, 0));
        } else {
            out.insert((a, Class::Lost, 0));
        }
    }
    out
}

/// The oracle's view in the checker's terms. Holes count as lost here: the checker has
/// no ack times (the hole test below checks them).
fn oracle_view(dev: &SimDrive) -> BTreeSet<(u64, Class, u64)> {
    let mut out = BTreeSet::new();
    for f in dev.oracle() {
        let class = match f.class {
            Class::Hole => Class::Lost,
            c => c,
        };
        for r in &f.records {
            out.insert((
                r.seq,
                class,
                if class == Class::Corrupt { f.bits } else { 0 },
            ));
        }
    }
    out
}

fn profile(kind: Kind) -> Profile {
    let mut p = Profile::new(kind);
    p.flush_latency_us = 0;
    // Make rare faults common in short runs.
    p.fault_p = 0.2;
    p.cache_writes = 16;
    p.hold_flushes = 20;
    p.unreadable_fraction = 0.2;
    p
}

/// One scenario: start, workload, cut (deterministic or a "SIGKILL": drop without cut
/// and start again from the backing file and oracle log), power on, compare.
fn scenario(kind: Kind, seed: u64, sigkill: bool) -> (BTreeSet<(u64, Class, u64)>, SimDrive) {
    let mut rng = Rng::new(seed);
    let ops = rng.range(20, 400) as usize;
    let dir = tempfile::tempdir().unwrap();
    let cfg = SimConfig {
        size_bytes: SIZE,
        profile: profile(kind),
        seed,
        backing: sigkill.then(|| dir.path().join("disk.img")),
        oracle: sigkill.then(|| dir.path().join("oracle.jsonl")),
    };
    let dev = SimDrive::start(cfg.clone()).unwrap();
    let w = drive_workload(&dev, &mut rng, ops);
    let dev = if sigkill {
        drop(dev);
        let Ok(dev) = SimDrive::start(SimConfig {
            seed: seed ^ 1,
            profile: Profile::new(Kind::Honest),
            ..cfg
        }) else {
            panic!("seed {seed}: restart failed");
        };
        dev
    } else {
        dev.cut().unwrap();
        match dev.power_on() {
            Ok(()) => {}
            Err(_) if kind == Kind::Dead => {
                assert!(
                    dev.oracle().iter().any(|f| f.class == Class::Dead),
                    "seed {seed}"
                );
                return (BTreeSet::new(), dev);
            }
            Err(e) => panic!("seed {seed}: power on failed: {e}"),
        }
        dev
    };
    if kind == Kind::Dead {
        assert!(
            dev.oracle().iter().any(|f| f.class == Class::Dead),
            "seed {seed}"
        );
        assert!(dev.read_at(&mut [0u8; 512], 0).is_err(), "seed {seed}");
        return (BTreeSet::new(), dev);
    }
    let mut found = check(&dev, &w);
    let oracle = oracle_view(&dev);
    // Unreadable faults name what was on media in the range; verify (and the checker)
    // name the latest acknowledged record there. Compare those by range instead.
    let ranges: Vec<(u64, u64)> = dev
        .oracle()
        .iter()
        .filter(|f| f.class == Class::Unreadable)
        .map(|f| (f.offset, f.offset + f.len))
        .collect();
    for &(seq, class, _) in &found {
        if class == Class::Unreadable {
            let at = w.writes[seq as usize - 1].slot * SLOT;
            assert!(
                ranges.iter().any(|&(a, b)| a <= at && at < b),
                "seed {seed}: unreadable record {seq} at {at} outside every oracle range {ranges:?}"
            );
        }
    }
    found.retain(|x| x.1 != Class::Unreadable);
    let oracle: BTreeSet<_> = oracle
        .into_iter()
        .filter(|x| x.1 != Class::Unreadable)
        .collect();
    assert_eq!(
        found, oracle,
        "seed {seed} profile {kind:?} sigkill {sigkill}: checker (left) != oracle (right)"
    );
    (found, dev)
}

#[test]
fn honest_never_loses_a_flushed_write() {
    for seed in 0..150 {
        for kind in [Kind::Honest, Kind::HonestPlp] {
            let (found, _) = scenario(kind, seed, seed % 3 == 0);
            assert!(found.is_empty(), "seed {seed} {kind:?}: {found:?}");
        }
    }
}

#[test]
fn every_faulty_profile_injects_its_fault_and_the_oracle_names_it() {
    for kind in Kind::ALL.into_iter().filter(|k| !k.is_honest()) {
        let mut classes = BTreeSet::new();
        for seed in 0..60 {
            let (found, dev) = scenario(kind, seed, seed % 2 == 0);
            classes.extend(found.iter().map(|x| x.1));
            if kind == Kind::MetadataLoss
                && dev.oracle().iter().any(|f| f.class == Class::Unreadable)
            {
                classes.insert(Class::Unreadable);
            }
        }
        let want = match kind {
            Kind::Lying | Kind::LoseRecent | Kind::Reorder => Class::Lost,
            Kind::Shorn => Class::Shorn,
            Kind::Corrupt => Class::Corrupt,
            Kind::Misdirected => Class::Misdirected,
            Kind::MetadataLoss => Class::Unreadable,
            Kind::Dead => continue,
            Kind::Honest | Kind::HonestPlp => unreachable!(),
        };
        assert!(
            classes.contains(&want),
            "{kind:?} never produced {want:?}: {classes:?}"
        );
    }
}

#[test]
fn dead_drive_refuses_to_power_on() {
    let dev = SimDrive::create(SIZE, profile(Kind::Dead), 5, None).unwrap();
    let (_, buf) = Workload {
        run: RunId([1; 16]),
        key: RunKey::new(RunId([1; 16])),
        writes: vec![],
    }
    .record(1, 0);
    dev.write_at(&buf, 0).unwrap();
    dev.flush().unwrap();
    dev.cut().unwrap();
    assert!(dev.read_at(&mut [0u8; 512], 0).is_err());
    assert!(dev.power_on().is_err());
    assert!(dev.read_at(&mut [0u8; 512], 0).is_err());
    assert_eq!(dev.oracle()[0].class, Class::Dead);
}

#[test]
fn reorder_produces_witnessed_holes() {
    let mut holes = 0;
    for seed in 0..40 {
        let (_, dev) = scenario(Kind::Reorder, seed, false);
        holes += dev
            .oracle()
            .iter()
            .filter(|f| f.class == Class::Hole)
            .count();
    }
    assert!(holes > 0, "reorder never produced a hole");
}

#[test]
fn same_seed_same_scenario() {
    for kind in Kind::ALL {
        let run = |seed| {
            let dev = SimDrive::create(SIZE, profile(kind), seed, None).unwrap();
            let w = drive_workload(&dev, &mut Rng::new(seed), 200);
            drop(w);
            dev.cut().unwrap();
            let mut img = vec![0u8; SIZE as usize];
            dev.read_durable(&mut img, 0).unwrap();
            (format!("{:?}", dev.oracle_events()), img)
        };
        assert!(run(11) == run(11), "{kind:?}: same seed differs");
    }
}

#[test]
fn reads_see_newest_data_while_powered() {
    for kind in Kind::ALL {
        let dev = SimDrive::create(SIZE, profile(kind), 3, None).unwrap();
        let mut rng = Rng::new(3);
        let w = drive_workload(&dev, &mut rng, 300);
        let mut latest: HashMap<u64, u64> = HashMap::new();
        for x in &w.writes {
            latest.insert(x.slot, x.seq);
        }
        for (&slot, &seq) in &latest {
            let mut got = vec![0u8; SLOT as usize];
            dev.read_at(&mut got, slot * SLOT).unwrap();
            assert!(got == w.record(seq, slot).1, "{kind:?} slot {slot}");
        }
    }
}

#[test]
fn unaligned_writes_and_bounds() {
    let dev = SimDrive::create(SIZE, profile(Kind::Honest), 1, None).unwrap();
    dev.write_at(b"hello", 510).unwrap();
    let mut b = [0u8; 7];
    dev.read_at(&mut b, 509).unwrap();
    assert_eq!(&b, b"\0hello\0");
    assert!(dev.write_at(&[0; 512], SIZE).is_err());
    assert!(dev.read_at(&mut [0; 512], SIZE - 256).is_err());
    assert!(SimDrive::create(1000, profile(Kind::Honest), 1, None).is_err());
}

/// A SIGKILL between a held write reaching media and its Destaged event: the restarted
/// drive must see the write on media and not call it lost.
#[test]
fn a_kill_between_destage_and_its_log_line_is_reconciled_at_power_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = profile(Kind::LoseRecent);
    p.lose_recent_n = 4;
    p.early_destage_p = 0.0;
    let cfg = SimConfig {
        size_bytes: SIZE,
        profile: p,
        seed: 11,
        backing: Some(dir.path().join("disk.img")),
        oracle: Some(dir.path().join("oracle.jsonl")),
    };
    let dev = SimDrive::start(cfg.clone()).unwrap();
    let run = RunId([8; 16]);
    let w = Workload {
        run,
        key: RunKey::new(run),
        writes: vec![],
    };
    let mut held = vec![];
    for seq in 1..=4 {
        let (_, bytes) = w.record(seq, seq);
        dev.write_at(&bytes, seq * SLOT).unwrap();
        dev.flush().unwrap();
        held.push(bytes);
    }
    assert_eq!(
        dev.oracle().len(),
        4,
        "the last four flushed writes are held"
    );
    // The drive destaged write 1 to media and died before logging it.
    drop(dev);
    let img = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("disk.img"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&img, &held[0], SLOT).unwrap();
    drop(img);
    let dev = SimDrive::start(SimConfig {
        profile: Profile::new(Kind::Honest),
        seed: 12,
        ..cfg
    })
    .unwrap();
    let lost: Vec<u64> = dev
        .oracle()
        .iter()
        .flat_map(|f| f.records.iter().map(|r| r.seq))
        .collect();
    assert_eq!(lost, vec![2, 3, 4], "write 1 is on media: it is not lost");
}
