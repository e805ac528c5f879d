//! The decision table: what one sector says about one acknowledged record, and what a
//! record's set of sector findings makes it. Kept apart from I/O so every combination is
//! tested (see `every_combination_lands_in_one_class`).

use crate::model::RecordClass;
use crate::record::{RecordId, RunId, SECTOR, Stamp, StampError, bit_difference};

/// Bits that may differ from the expected sector before we stop calling it "corrupt" and
/// call it "something else is here". Random data differs in ~2048 of 4096 bits (σ ≈ 32),
/// so 512 leaves no doubt either way.
pub const CORRUPT_MAX_BITS: u64 = 512;

/// What was found at one sector of an acknowledged record's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SectorFinding {
    /// Exactly this record's sector.
    Intact,
    /// A newer record of this run, at its own home: a legitimate overwrite.
    Superseded,
    /// An older record of this run at its own home: the write never landed.
    Old,
    /// No plugpull stamp and nothing like the expected bytes (zeros, other data).
    Blank,
    /// A valid record of another run.
    Foreign,
    /// This record's sector with bits flipped (count).
    Corrupt(u64),
    /// A valid record of this run whose home is elsewhere: a misdirected write landed here.
    Misplaced,
    /// The read failed or timed out.
    Unreadable,
}

/// Classifies the sector found at `index` of acknowledged record `rec`. `content_ok`:
/// the sector's content matches the CRC in its (valid) stamp, computed by the reader
/// threads. `later_runs`: runs of this drive that began after `run`'s writer stopped
/// (witness clock); their records at their own home superseded `run`'s. `expected` is
/// called only when bits must be counted (it regenerates the sector).
#[allow(clippy::too_many_arguments)]
pub fn classify_sector(
    found: &[u8],
    stamp: &Result<Stamp, StampError>,
    content_ok: bool,
    run: RunId,
    later_runs: &[RunId],
    rec: &RecordId,
    index: u32,
    expected: impl FnOnce() -> [u8; SECTOR],
) -> SectorFinding {
    let here = rec.offset + index as u64 * SECTOR as u64;
    let bits = |e: [u8; SECTOR]| bit_difference(found, &e);
    match stamp {
        Ok(s) if s.run != run && s.home() == here && later_runs.contains(&s.run) => {
            SectorFinding::Superseded
        }
        Ok(s) if s.run != run => SectorFinding::Foreign,
        Ok(s) if s.home() != here => SectorFinding::Misplaced,
        Ok(s) if s.record == *rec && s.index == index => {
            if content_ok {
                SectorFinding::Intact
            } else {
                SectorFinding::Corrupt(bits(expected()).max(1))
            }
        }
        Ok(s) if s.record.stream == rec.stream => match s.record.seq.cmp(&rec.seq) {
            std::cmp::Ordering::Greater => SectorFinding::Superseded,
            std::cmp::Ordering::Less => SectorFinding::Old,
            // Same record id, other fields: damaged in a way the CRC cannot see.
            std::cmp::Ordering::Equal => SectorFinding::Corrupt(bits(expected()).max(1)),
        },
        // Streams own disjoint shares, so this only happens with overlapping runs of
        // the same id; order by submission time.
        Ok(s) if s.record.write_time_ns > rec.write_time_ns => SectorFinding::Superseded,
        Ok(_) => SectorFinding::Old,
        // A stamp from a format this build does not know: another run, not damage.
        Err(StampError::UnknownVersion(_)) => SectorFinding::Foreign,
        // A sector of one byte value (zeros after a lost write or a discard, 0xFF from
        // erased flash) is blank without regenerating the expected one: it would differ
        // from it in the set (or clear) bits of 448 bytes of keyed-hash output, about
        // 1,792 (σ ≈ 30), never as few as CORRUPT_MAX_BITS. Why: regenerating every
        // sector of a drive that lost everything cost most of verify's time.
        Err(_) if found.iter().all(|&b| b == found[0]) && (found[0] == 0 || found[0] == 0xff) => {
            SectorFinding::Blank
        }
        Err(_) => {
            let d = bits(expected());
            if d <= CORRUPT_MAX_BITS {
                SectorFinding::Corrupt(d.max(1))
            } else {
                SectorFinding::Blank
            }
        }
    }
}

/// Which sector findings one record collected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectorTally {
    pub intact: u32,
    pub superseded: u32,
    pub old: u32,
    pub blank: u32,
    pub foreign: u32,
    pub corrupt: u32,
    pub corrupt_bits: u64,
    pub misplaced: u32,
    pub unreadable: u32,
}

impl SectorTally {
    pub fn add(&mut self, f: SectorFinding) {
        match f {
            SectorFinding::Intact => self.intact += 1,
            SectorFinding::Superseded => self.superseded += 1,
            SectorFinding::Old => self.old += 1,
            SectorFinding::Blank => self.blank += 1,
            SectorFinding::Foreign => self.foreign += 1,
            SectorFinding::Corrupt(b) => {
                self.corrupt += 1;
                self.corrupt_bits += b;
            }
            SectorFinding::Misplaced => self.misplaced += 1,
            SectorFinding::Unreadable => self.unreadable += 1,
        }
    }

    /// Adds the findings of `other`, for other sectors of the same record (a record
    /// across two parts of a run judged in parts gets a tally from each).
    pub fn add_tally(&mut self, other: &SectorTally) {
        self.intact += other.intact;
        self.superseded += other.superseded;
        self.old += other.old;
        self.blank += other.blank;
        self.foreign += other.foreign;
        self.corrupt += other.corrupt;
        self.corrupt_bits += other.corrupt_bits;
        self.misplaced += other.misplaced;
        self.unreadable += other.unreadable;
    }
}

/// The decision table. `found_elsewhere`: this record's own stamp turned up at another
/// address. Rows are checked top to bottom; the first that matches wins.
pub fn classify_record(t: &SectorTally, found_elsewhere: bool) -> RecordClass {
    // Only the record's own sectors show that its write landed: a newer record over some
    // sectors says nothing about whether this one ever reached media, so superseded
    // sectors next to old ones are a lost record, not a shorn one.
    let new = t.intact;
    let old = t.old + t.blank + t.foreign;
    if t.unreadable > 0 {
        RecordClass::Unreadable
    } else if t.corrupt > 0 {
        RecordClass::Corrupt
    } else if t.misplaced > 0 {
        RecordClass::Misdirected
    } else if old == 0 {
        if t.superseded > 0 {
            RecordClass::Superseded
        } else {
            RecordClass::Intact
        }
    } else if new > 0 {
        RecordClass::Shorn
    } else if found_elsewhere {
        RecordClass::Misdirected
    } else if t.foreign > 0 {
        RecordClass::Stale
    } else {
        RecordClass::Lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RunKey;
    use crate::record::{decode_stamp, fill_record};

    #[test]
    fn every_combination_lands_in_one_class() {
        // All 2^8 presence patterns of the eight sector findings, with and without the
        // record found elsewhere: each lands in exactly one class, and the failure rules hold.
        for mask in 0u32..256 {
            for elsewhere in [false, true] {
                let t = SectorTally {
                    intact: mask & 1,
                    superseded: (mask >> 1) & 1,
                    old: (mask >> 2) & 1,
                    blank: (mask >> 3) & 1,
                    foreign: (mask >> 4) & 1,
                    corrupt: (mask >> 5) & 1,
                    corrupt_bits: (mask >> 5) as u64 & 1,
                    misplaced: (mask >> 6) & 1,
                    unreadable: (mask >> 7) & 1,
                };
                let c = classify_record(&t, elsewhere);
                let only_good =
                    t.old + t.blank + t.foreign + t.corrupt + t.misplaced + t.unreadable == 0;
                if only_good && t.intact + t.superseded > 0 {
                    assert!(
                        !c.is_failure(),
                        "a record whose every sector is its own or newer must pass: {mask:08b}"
                    );
                }
                if !only_good {
                    assert!(
                        c.is_failure(),
                        "a record with a bad sector must fail: {mask:08b} -> {c:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn named_rows() {
        let t = |f: &[SectorFinding]| {
            let mut t = SectorTally::default();
            f.iter().for_each(|&x| t.add(x));
            t
        };
        use SectorFinding::*;
        assert_eq!(
            classify_record(&t(&[Intact; 8]), false),
            RecordClass::Intact
        );
        assert_eq!(
            classify_record(&t(&[Intact, Superseded]), false),
            RecordClass::Superseded
        );
        assert_eq!(
            classify_record(&t(&[Intact, Intact, Old]), false),
            RecordClass::Shorn
        );
        assert_eq!(
            classify_record(&t(&[Intact, Blank]), false),
            RecordClass::Shorn
        );
        assert_eq!(classify_record(&t(&[Old, Blank]), false), RecordClass::Lost);
        // A newer record over part of a record whose other sectors are old: its own
        // write never landed.
        assert_eq!(
            classify_record(&t(&[Superseded, Old]), false),
            RecordClass::Lost
        );
        assert_eq!(
            classify_record(&t(&[Superseded, Intact, Old]), false),
            RecordClass::Shorn
        );
        assert_eq!(
            classify_record(&t(&[Old, Old]), true),
            RecordClass::Misdirected
        );
        assert_eq!(
            classify_record(&t(&[Foreign, Foreign]), false),
            RecordClass::Stale
        );
        assert_eq!(
            classify_record(&t(&[Intact, Corrupt(1)]), false),
            RecordClass::Corrupt
        );
        assert_eq!(
            classify_record(&t(&[Misplaced]), false),
            RecordClass::Misdirected
        );
        assert_eq!(
            classify_record(&t(&[Intact, Unreadable]), false),
            RecordClass::Unreadable
        );
    }

    /// A record of a run written in format `version`.
    fn setup(version: u16) -> (RunId, RunKey, RecordId, Vec<u8>) {
        let run = RunId([3; 16]);
        let key = RunKey::for_version(run, version).unwrap();
        let rec = RecordId {
            stream: 0,
            seq: 10,
            offset: 4096,
            sectors: 2,
            write_time_ns: 1000,
        };
        let mut buf = vec![0u8; 1024];
        fill_record(&mut buf, &key, run, &rec);
        (run, key, rec, buf)
    }

    fn sector(run: RunId, key: &RunKey, rec: &RecordId, found: &[u8]) -> SectorFinding {
        sector_after(run, &[], key, rec, found)
    }

    fn sector_after(
        run: RunId,
        later: &[RunId],
        key: &RunKey,
        rec: &RecordId,
        found: &[u8],
    ) -> SectorFinding {
        let st = decode_stamp(found);
        let ok = st
            .as_ref()
            .is_ok_and(|s| crate::record::content_matches(found, s));
        classify_sector(found, &st, ok, run, later, rec, 0, || {
            let mut e = [0u8; SECTOR];
            crate::record::expected_sector(&mut e, key, run, rec, 0);
            e
        })
    }

    /// A sector of zeros or of 0xFF is blank without regenerating the expected sector,
    /// and regenerating it would have said the same: it differs from it in far more
    /// than CORRUPT_MAX_BITS bits.
    #[test]
    fn a_uniform_sector_is_blank_without_regenerating() {
        let (run, _key, rec, buf) = setup(2);
        for fill in [0u8, 0xff] {
            let found = [fill; SECTOR];
            let stamp = decode_stamp(&found);
            let never = || -> [u8; SECTOR] { panic!("regenerated a uniform sector") };
            let f = classify_sector(&found, &stamp, false, run, &[], &rec, 0, never);
            assert_eq!(f, SectorFinding::Blank);
            let expected: [u8; SECTOR] = buf[..SECTOR].try_into().unwrap();
            assert!(bit_difference(&found, &expected) > 3 * CORRUPT_MAX_BITS);
        }
        // A sector of another repeated byte is not taken for blank unheard.
        let found = [0x5au8; SECTOR];
        let stamp = decode_stamp(&found);
        let mut asked = false;
        let expected: [u8; SECTOR] = buf[..SECTOR].try_into().unwrap();
        classify_sector(&found, &stamp, false, run, &[], &rec, 0, || {
            asked = true;
            expected
        });
        assert!(asked);
    }

    /// Runs written by this build (version 2) and by older ones (version 1) verify
    /// alike: bits are counted against the run's own generator, and either version's
    /// records of another run are foreign.
    #[test]
    fn sector_findings() {
        for version in [1, 2] {
            sector_findings_of(version);
        }
    }

    fn sector_findings_of(version: u16) {
        let (run, key, rec, buf) = setup(version);
        let s0 = &buf[..SECTOR];
        assert_eq!(sector(run, &key, &rec, s0), SectorFinding::Intact);
        let mut flip = s0.to_vec();
        flip[300] ^= 0x10;
        assert_eq!(sector(run, &key, &rec, &flip), SectorFinding::Corrupt(1));
        let mut stamp_flip = s0.to_vec();
        stamp_flip[20] ^= 1;
        assert_eq!(
            sector(run, &key, &rec, &stamp_flip),
            SectorFinding::Corrupt(1)
        );
        assert_eq!(
            sector(run, &key, &rec, &[0u8; SECTOR]),
            SectorFinding::Blank
        );
        // Newer and older records of the same stream at the same place.
        for (seq, want) in [(11, SectorFinding::Superseded), (9, SectorFinding::Old)] {
            let r2 = RecordId { seq, ..rec };
            let mut b = vec![0u8; 1024];
            fill_record(&mut b, &key, run, &r2);
            assert_eq!(sector(run, &key, &rec, &b[..SECTOR]), want);
        }
        // A flipped bit in a sector whose stamp is gone is counted too.
        let mut no_stamp = flip.clone();
        no_stamp[..4].fill(0);
        let bits = 1 + (0..4).map(|k| s0[k].count_ones() as u64).sum::<u64>();
        assert_eq!(
            sector(run, &key, &rec, &no_stamp),
            SectorFinding::Corrupt(bits)
        );
        // Another run's record here, in either format version.
        let other = RunId([4; 16]);
        for other_version in [1, 2] {
            let mut b = vec![0u8; 1024];
            let other_key = RunKey::for_version(other, other_version).unwrap();
            fill_record(&mut b, &other_key, other, &rec);
            assert_eq!(
                sector(run, &key, &rec, &b[..SECTOR]),
                SectorFinding::Foreign
            );
        }
        let mut b = vec![0u8; 1024];
        // A record of this run whose home is elsewhere.
        let far = RecordId {
            offset: 1 << 20,
            seq: 99,
            ..rec
        };
        fill_record(&mut b, &key, run, &far);
        assert_eq!(
            sector(run, &key, &rec, &b[..SECTOR]),
            SectorFinding::Misplaced
        );
    }

    /// A record of a run that began after this run's writer stopped, at its own home,
    /// superseded this run's record there; the same record away from its home, or a
    /// record of a run not known to be later, is foreign (stale) as before.
    #[test]
    fn a_later_runs_record_at_home_supersedes_and_only_there() {
        let (run, key, rec, _) = setup(2);
        let later = RunId([5; 16]);
        let unrelated = RunId([6; 16]);
        let later_key = RunKey::new(later);
        let mut here = vec![0u8; 1024];
        fill_record(&mut here, &later_key, later, &RecordId { seq: 1, ..rec });
        assert_eq!(
            sector_after(run, &[later], &key, &rec, &here[..SECTOR]),
            SectorFinding::Superseded
        );
        assert_eq!(
            sector_after(run, &[unrelated], &key, &rec, &here[..SECTOR]),
            SectorFinding::Foreign
        );
        assert_eq!(
            sector(run, &key, &rec, &here[..SECTOR]),
            SectorFinding::Foreign
        );
        let mut away = vec![0u8; 1024];
        let far = RecordId {
            offset: 1 << 20,
            ..rec
        };
        fill_record(&mut away, &later_key, later, &far);
        assert_eq!(
            sector_after(run, &[later], &key, &rec, &away[..SECTOR]),
            SectorFinding::Foreign
        );
    }
}
