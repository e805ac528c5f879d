//! The compact tracker and judge against what they replaced, on random logs of every
//! shape the kernel can log: records of 1 to 16 sectors from two streams over one small
//! region (many records at one offset, records of both streams overlapping, records at
//! offset 0), written whole, split over several entries in any order, rewritten (more
//! durable sectors than the record has), at the wrong home, or stamped by another run;
//! FUA writes, flushes with data, discards, marks, unacked records.
//!
//! The reference tracker is the map-based one the compact one replaced, kept here as it
//! was: the compact one must hand out the same acks at the same points, in the same
//! order. The incremental judge (whose overlap search the compact one changed) must
//! agree with a whole verify at every point.

use super::encode::LogEncoder;
use super::format::{FLUSH, FUA, LogReader};
use super::image::ScratchImage;
use super::replay::{PassOptions, main_pass};
use super::track::Tracker;
use crate::model::{Ack, RunDescriptor, Verdict};
use crate::record::{RecordId, RunId, RunKey, SECTOR, decode_stamp, fill_record};
use crate::rng::Rng;
use std::collections::HashMap;
use std::io::Cursor;
use std::time::Duration;

const RUN: RunId = RunId([0x61; 16]);
const OTHER: RunId = RunId([0x62; 16]);
const REGION: u64 = 32 << 10;

/// The tracker as it was before it was made compact (a map by (stream, seq), a state
/// with an `ackable` flag per ack), without the write list.
struct Reference {
    run: RunId,
    acks: Vec<Ack>,
    by_key: HashMap<(u16, u64), usize>,
    durable: Vec<u32>,
    ackable: Vec<bool>,
    pending: Vec<(usize, u32)>,
    ready: Vec<usize>,
    unacked_sectors: u64,
}

impl Reference {
    fn new(run: RunId, acks: &[Ack]) -> Reference {
        Reference {
            run,
            acks: acks.to_vec(),
            by_key: acks
                .iter()
                .enumerate()
                .map(|(i, a)| ((a.record.stream, a.record.seq), i))
                .collect(),
            durable: vec![0; acks.len()],
            ackable: vec![false; acks.len()],
            pending: vec![],
            ready: vec![],
            unacked_sectors: 0,
        }
    }

    /// Notes one entry; returns the acks whose sectors a write holds.
    fn note(&mut self, e: &super::format::Entry) -> Vec<usize> {
        if e.is_flush() {
            for (i, n) in std::mem::take(&mut self.pending) {
                self.make_durable(i, n);
            }
        }
        if !e.is_write() {
            return vec![];
        }
        let mut held: Vec<(usize, u32)> = vec![];
        for (k, sector) in e.data.chunks_exact(SECTOR).enumerate() {
            let Ok(st) = decode_stamp(sector) else {
                continue;
            };
            if st.run != self.run || st.home() != e.offset + (k * SECTOR) as u64 {
                continue;
            }
            match self.by_key.get(&(st.record.stream, st.record.seq)) {
                Some(&i) if self.acks[i].record == st.record => match held.last_mut() {
                    Some((j, n)) if *j == i => *n += 1,
                    _ => held.push((i, 1)),
                },
                _ => self.unacked_sectors += 1,
            }
        }
        for &(i, n) in &held {
            if e.is_fua() {
                self.make_durable(i, n);
            } else {
                self.pending.push((i, n));
            }
        }
        held.into_iter().map(|(i, _)| i).collect()
    }

    fn make_durable(&mut self, i: usize, n: u32) {
        self.durable[i] += n;
        if !self.ackable[i] && self.durable[i] >= self.acks[i].record.sectors {
            self.ackable[i] = true;
            self.ready.push(i);
        }
    }

    fn never_ackable(&self) -> Vec<usize> {
        (0..self.acks.len()).filter(|&i| !self.ackable[i]).collect()
    }
}

fn descriptor() -> RunDescriptor {
    descriptor_over(REGION)
}

/// The run's descriptor over a region of `region` bytes.
pub(super) fn descriptor_over(region: u64) -> RunDescriptor {
    super::tests::run_descriptor(RUN, region, (512, 8192), "random", 2)
}

/// A random log of `steps` operations and the run's acks (each stream's in seq order).
fn random_log(seed: u64, steps: usize) -> (Vec<u8>, Vec<Ack>) {
    random_log_over(seed, steps, REGION, true)
}

/// [`random_log`] over a region of `region` bytes (at least 8 KiB); without `damage`,
/// no write at a wrong home, of another run, or discarded: an honest log.
pub(super) fn random_log_over(
    seed: u64,
    steps: usize,
    region: u64,
    damage: bool,
) -> (Vec<u8>, Vec<Ack>) {
    let mut rng = Rng::new(seed);
    let (key, other_key) = (RunKey::new(RUN), RunKey::new(OTHER));
    let mut enc = LogEncoder::new(512);
    let mut acks = vec![];
    let mut seqs = [0u64; 2];
    // Records written so far: (id, bytes), for rewrites and wrong homes.
    let mut written: Vec<(RecordId, Vec<u8>)> = vec![];
    // Pieces of split records still to be logged: (offset, bytes).
    let mut pieces: Vec<(u64, Vec<u8>)> = vec![];
    let mut t = 1_000_000u64;
    for _ in 0..steps {
        t += 10;
        match rng.below(20) {
            0..=8 => {
                let stream = rng.below(2) as u16;
                seqs[stream as usize] += 1;
                let sectors = rng.range(1, 16);
                let slots = (region / 512 - sectors) + 1;
                let offset = if rng.chance(0.1) {
                    0
                } else {
                    rng.below(slots) * 512
                };
                let rec = RecordId {
                    stream,
                    seq: seqs[stream as usize],
                    offset,
                    sectors: sectors as u32,
                    write_time_ns: t,
                };
                let mut buf = vec![0u8; rec.len_bytes() as usize];
                fill_record(&mut buf, &key, RUN, &rec);
                if rng.chance(0.85) {
                    acks.push(Ack {
                        record: rec,
                        flushed_ns: t + 5,
                    });
                }
                if sectors > 1 && rng.chance(0.3) {
                    // Split in two, logged later in either order.
                    let cut = rng.range(1, sectors - 1) as usize * 512;
                    pieces.push((offset, buf[..cut].to_vec()));
                    pieces.push((offset + cut as u64, buf[cut..].to_vec()));
                } else {
                    enc.write(offset, &buf, rng.chance(0.15));
                }
                written.push((rec, buf));
            }
            9 | 10 if !pieces.is_empty() => {
                let k = rng.below(pieces.len() as u64) as usize;
                let (o, b) = pieces.swap_remove(k);
                enc.write(o, &b, rng.chance(0.15));
            }
            11 if !written.is_empty() => {
                // A rewrite of an earlier record's bytes at its home.
                let (r, b) = &written[rng.below(written.len() as u64) as usize];
                enc.write(r.offset, b, false);
            }
            12 if damage && !written.is_empty() => {
                // A record's bytes at the wrong home.
                let (r, b) = &written[rng.below(written.len() as u64) as usize];
                let at = rng.below((region - r.len_bytes()) / 512 + 1) * 512;
                enc.write(at, b, false);
            }
            13 if damage => {
                let rec = RecordId {
                    stream: 0,
                    seq: rng.range(1, 20),
                    offset: rng.below(region / 512 - 8) * 512,
                    sectors: 8,
                    write_time_ns: t,
                };
                let mut buf = vec![0u8; 4096];
                fill_record(&mut buf, &other_key, OTHER, &rec);
                enc.write(rec.offset, &buf, false);
            }
            14 if damage => {
                let at = rng.below(region / 512 - 4) * 512;
                enc.discard(at, rng.range(1, 4) * 512);
            }
            15 if !written.is_empty() => {
                // A flush with data: everything before durable, its own data only with FUA.
                let (r, b) = &written[rng.below(written.len() as u64) as usize];
                let flags = if rng.chance(0.5) { FLUSH | FUA } else { FLUSH };
                enc.entry(flags, r.offset, b.len() as u64, b, "");
            }
            16 => enc.mark("m"),
            _ => enc.flush(),
        }
    }
    for (o, b) in pieces {
        enc.write(o, &b, false);
    }
    enc.flush();
    (enc.finish(), acks)
}

fn entries(log: &[u8]) -> Vec<super::format::Entry> {
    LogReader::new(Cursor::new(log.to_vec()), Some(log.len() as u64))
        .unwrap()
        .map(|e| e.unwrap())
        .collect()
}

/// Same acks ackable at the same points in the same order, same acks never durable and
/// unacked sectors, and (kept for drop states) each write's acks and durable point as
/// the reference gives them.
#[test]
fn the_compact_tracker_hands_out_what_the_map_based_one_did() {
    for seed in 0..300 {
        let (log, acks) = random_log(seed, 120);
        let mut new = Tracker::new(RUN, &acks, true);
        let mut old = Reference::new(RUN, &acks);
        let mut point = 0;
        let mut pending_writes: Vec<usize> = vec![];
        let mut durable_at: Vec<Option<usize>> = vec![];
        let mut write_acks: Vec<Vec<usize>> = vec![];
        for e in entries(&log) {
            // The reference's write list: what a write holds, when it became durable.
            if e.is_flush() {
                for w in pending_writes.drain(..) {
                    durable_at[w] = Some(point);
                }
            }
            let held = old.note(&e);
            new.note(&e, point);
            if e.is_write() || e.is_discard() {
                let durable_now = e.is_fua() && e.is_write();
                if !durable_now {
                    pending_writes.push(durable_at.len());
                }
                durable_at.push(durable_now.then_some(point));
                write_acks.push(held);
            }
            assert_eq!(new.unacked_sectors, old.unacked_sectors, "seed {seed}");
            if e.is_durable_point() {
                assert_eq!(
                    new.take_ackable(),
                    std::mem::take(&mut old.ready),
                    "seed {seed} entry {}",
                    e.index
                );
                point += 1;
            }
        }
        let never = old.never_ackable();
        assert_eq!(
            new.never_ackable(),
            (never.len(), never.first().copied()),
            "seed {seed}"
        );
        let writes = new.writes.take().unwrap();
        let got: Vec<Option<usize>> = writes.iter().map(|w| w.durable_at).collect();
        assert_eq!(got, durable_at, "seed {seed}");
        let got: Vec<Vec<usize>> = writes.iter().map(|w| w.acks.clone()).collect();
        assert_eq!(got, write_acks, "seed {seed}");
    }
}

/// At every durable point of random logs the incremental judge, which finds the acks a
/// range overlaps in an index of every witness ack by offset, gives what a whole verify
/// gives.
#[test]
fn the_incremental_judge_agrees_with_a_whole_verify_on_random_logs() {
    let d = descriptor();
    let mut disagreeing = 0;
    for seed in 0..12 {
        let (log, acks) = random_log(1000 + seed, 90);
        let pass = |full: bool| {
            let image = ScratchImage::create(&std::env::temp_dir(), REGION, None).unwrap();
            let reader = LogReader::new(Cursor::new(log.clone()), Some(log.len() as u64)).unwrap();
            let o = PassOptions {
                full_verify: full,
                for_drops: false,
                read_timeout: Duration::from_secs(30),
                part: None,
            };
            main_pass(reader, &image, &d, &acks, o).unwrap_or_else(|e| panic!("{e:?}"))
        };
        let (fast, whole) = (pass(false), pass(true));
        let key = |p: &super::replay::MainPass| -> Vec<(u64, u32, Verdict, u32, u32)> {
            p.points
                .iter()
                .map(|x| (x.entry, x.acks, x.verdict, x.failed, x.intact))
                .collect()
        };
        assert_eq!(key(&fast), key(&whole), "seed {}", 1000 + seed);
        disagreeing += fast
            .points
            .iter()
            .filter(|p| p.verdict != p.expected)
            .count();
    }
    // The logs carry damage (wrong homes, discards, other runs' data): some points fail.
    assert!(disagreeing > 0);
}
