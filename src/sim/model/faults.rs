//! The faults a flushed write can suffer on its way to media: shorn, corrupt, misdirected.
//!
//! Why apart from the flush: each is a self-contained story (which sectors land where,
//! with which damage, and the oracle events that name it), chosen by the flush.

use super::{Model, SECTOR_U64};
use crate::record::SECTOR;
use crate::sim::oracle::{Class, Event, records_in};
use std::io;

impl Model {
    /// Shorn: the first k of n sectors reach media; the rest stay in cache forever.
    pub(super) fn shear(&mut self, id: u64) -> io::Result<()> {
        let n = self.cache.pending[&id].remaining.len();
        let k = if n % 8 == 0 {
            // The fractions observed on real drives (FAST 2013): 7/8 and 3/8.
            if self.rng_fault.chance(0.5) {
                n / 8 * 7
            } else {
                n / 8 * 3
            }
        } else {
            self.rng_fault.range(1, n as u64 - 1) as usize
        };
        let p = self.cache.pending.get_mut(&id).expect("present");
        p.stuck = true;
        let offset = p.offset + (k * SECTOR) as u64;
        let records = records_in(&p.data[k * SECTOR..], offset);
        let len = ((n - k) * SECTOR) as u64;
        let fid = self.fault_id();
        self.emit(Event::Fault {
            id: fid,
            class: Class::Shorn,
            write: id,
            offset,
            len,
            records,
            flips: vec![],
            to_offset: None,
            conditional: false,
        })?;
        self.destage(id, 0..k)
    }

    /// Corrupt: the write reaches media with 1..=bits_max flipped bits; the cache keeps
    /// serving the correct bytes until the power goes.
    pub(super) fn corrupt(&mut self, id: u64) -> io::Result<()> {
        let p = self.cache.pending.remove(&id).expect("present");
        let total_bits = p.data.len() as u64 * 8;
        let nbits = self
            .rng_fault
            .range(1, self.profile.corrupt_bits_max.max(1) as u64);
        let mut flips: Vec<u64> = Vec::new();
        while (flips.len() as u64) < nbits.min(total_bits) {
            let b = self.rng_fault.below(total_bits);
            if !flips.contains(&b) {
                flips.push(b);
            }
        }
        flips.sort_unstable();
        let mut bad = p.data.clone();
        for &b in &flips {
            bad[(b / 8) as usize] ^= 1 << (b % 8);
        }
        let s0 = p.offset / SECTOR_U64;
        for i in 0..p.remaining.len() as u64 {
            self.cache.cover.remove(&(s0 + i));
        }
        // The damaged bytes replace older data on media like any destage would.
        let ev = Event::Destaged {
            write: id,
            offset: p.offset,
            len: p.data.len() as u64,
        };
        if self.resolver.apply(&ev) {
            self.log.append(ev)?;
        }
        let fid = self.fault_id();
        self.emit(Event::Fault {
            id: fid,
            class: Class::Corrupt,
            write: id,
            offset: p.offset,
            len: p.data.len() as u64,
            records: records_in(&p.data, p.offset),
            flips,
            to_offset: None,
            conditional: false,
        })?;
        self.image_write(s0, &bad)
    }

    /// Misdirected: the write lands at another, clean offset; its home keeps old data.
    pub(super) fn misdirect(&mut self, id: u64) -> io::Result<()> {
        let (offset, len) = {
            let p = &self.cache.pending[&id];
            (p.offset, p.data.len() as u64)
        };
        let slots = self.size_bytes / len;
        let mut target = None;
        for _ in 0..16 {
            if slots < 2 {
                break;
            }
            let d = self.rng_fault.below(slots) * len;
            let clean = self
                .cache
                .overlay
                .range(d / SECTOR_U64..(d + len) / SECTOR_U64)
                .next()
                .is_none();
            if (d + len <= offset || offset + len <= d) && clean {
                target = Some(d);
                break;
            }
        }
        let Some(d) = target else {
            // Nowhere clean to land: destage normally rather than fake a fault.
            return self.destage_all(id);
        };
        let p = self.cache.pending.remove(&id).expect("present");
        let s0 = offset / SECTOR_U64;
        for i in 0..p.remaining.len() as u64 {
            self.cache.cover.remove(&(s0 + i));
        }
        let mut victim = vec![0u8; len as usize];
        self.image.read_at(&mut victim, d)?;
        let home = self.fault_id();
        self.emit(Event::Fault {
            id: home,
            class: Class::Misdirected,
            write: id,
            offset,
            len,
            records: records_in(&p.data, offset),
            flips: vec![],
            to_offset: Some(d),
            conditional: false,
        })?;
        let there = self.fault_id();
        self.emit(Event::Fault {
            id: there,
            class: Class::Misdirected,
            write: id,
            offset: d,
            len,
            // Victims are the records that belong at `d`, not stray copies sitting there.
            records: records_in(&victim, d)
                .into_iter()
                .filter(|r| r.record_offset + r.first_index as u64 * SECTOR_U64 == r.at)
                .collect(),
            flips: vec![],
            to_offset: None,
            conditional: false,
        })?;
        self.image_write(d / SECTOR_U64, &p.data)
    }
}
