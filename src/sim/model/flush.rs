//! The flush: the moment a write becomes a promise. What the profile does with the newly
//! flushed writes (persist, hold, shear, corrupt, misdirect, reorder) is decided here.
//!
//! Why its own module: flush is where every profile differs, and where the oracle learns
//! of conditional faults (held writes) and ordering holes.

use super::cache::cached_span;
use super::{Model, ReorderHold};
use crate::sim::oracle::{Class, Event, records_in};
use crate::sim::profile::Kind;
use std::io;

impl Model {
    /// Keeps flushed write `id` in cache only; logs the conditional fault on the sectors
    /// still cached (shorn if an early destage already put the others on media).
    pub(super) fn hold(&mut self, id: u64, class: Class) -> io::Result<u64> {
        let p = &self.cache.pending[&id];
        let (offset, bytes) = cached_span(p);
        let len = bytes.len() as u64;
        let records = records_in(bytes, offset);
        let class = if p.touched { Class::Shorn } else { class };
        let fid = self.fault_id();
        self.emit(Event::Fault {
            id: fid,
            class,
            write: id,
            offset,
            len,
            records,
            flips: vec![],
            to_offset: None,
            conditional: true,
        })?;
        Ok(fid)
    }

    /// A cache flush. Returns how long the caller should sleep (outside the lock) before
    /// reporting success: the simulated flush latency.
    pub fn flush(&mut self) -> io::Result<u64> {
        let latency_us = self.flush_cache()?;
        self.assert_invariants();
        Ok(latency_us)
    }

    fn flush_cache(&mut self) -> io::Result<u64> {
        self.check_open()?;
        let epoch = self.completed_flushes + 1;
        let newly = self.mark_flushed();
        self.log_flushed(&newly)?;
        let kind = self.profile.kind;
        match kind {
            Kind::Lying | Kind::LoseRecent => self.flush_holding(kind, &newly)?,
            Kind::Shorn | Kind::Corrupt | Kind::Misdirected | Kind::Reorder => {
                self.flush_faulty(kind, epoch, &newly)?
            }
            Kind::Honest | Kind::HonestPlp | Kind::MetadataLoss | Kind::Dead => {
                self.destage_unheld()?;
            }
        }
        self.completed_flushes = epoch;
        Ok(self.profile.flush_latency_us)
    }

    /// Marks every cached write not yet flushed as flushed; returns their ids, oldest
    /// first.
    fn mark_flushed(&mut self) -> Vec<u64> {
        self.cache
            .pending
            .iter_mut()
            .filter(|(_, p)| !p.flushed)
            .map(|(&id, p)| {
                p.flushed = true;
                id
            })
            .collect()
    }

    /// What the oracle learns from a flush whatever the profile: the newly flushed
    /// writes supersede earlier records under them, and one flushed over a stray copy of
    /// a misdirected write shows a foreign record until it reaches media.
    fn log_flushed(&mut self, newly: &[u64]) -> io::Result<()> {
        // Verify judges the latest acknowledged record at each sector: faults of earlier
        // records under a newly flushed write stop counting.
        for &id in newly {
            let p = &self.cache.pending[&id];
            let ev = Event::Superseded {
                write: id,
                offset: p.offset,
                len: p.data.len() as u64,
            };
            if self.resolver.apply(&ev) {
                self.log.append(ev)?;
            }
            // A stray copy of another write sits where this one belongs: until this
            // write reaches media, verify finds a foreign record here.
            let (offset, bytes) = cached_span(p);
            let len = bytes.len() as u64;
            if self.resolver.stray_copy_in(offset, len) {
                let records = records_in(bytes, offset);
                let fid = self.fault_id();
                self.emit(Event::Fault {
                    id: fid,
                    class: Class::Misdirected,
                    write: id,
                    offset,
                    len,
                    records,
                    flips: vec![],
                    to_offset: None,
                    conditional: true,
                })?;
            }
        }
        Ok(())
    }

    /// Lying and lose-recent: every newly flushed write is held in cache; lose-recent
    /// lets go of all but the last N, lying of the oldest beyond its cache size.
    fn flush_holding(&mut self, kind: Kind, newly: &[u64]) -> io::Result<()> {
        for &id in newly {
            if self.cache.pending[&id].stuck {
                continue;
            }
            self.hold(id, Class::Lost)?;
            self.cache.held.push_back(id);
        }
        if kind == Kind::LoseRecent {
            while self.cache.held.len() > self.profile.lose_recent_n {
                let id = self.cache.held.pop_front().expect("non-empty");
                self.destage_all(id)?;
            }
            Ok(())
        } else {
            self.shrink_cache()
        }
    }

    /// Shorn, corrupt, misdirected, reorder: each eligible newly flushed write suffers
    /// the profile's fault with chance `fault_p`; the others reach media now. Then
    /// ordering holes are witnessed and reorder holds that are due released.
    fn flush_faulty(&mut self, kind: Kind, epoch: u64, newly: &[u64]) -> io::Result<()> {
        let mut destaged_now = Vec::new();
        for &id in newly {
            let p = &self.cache.pending[&id];
            let eligible = !p.touched && !p.stuck && p.remaining.iter().all(|&r| r);
            let n = p.remaining.len();
            if eligible
                && (kind != Kind::Shorn || n > 1)
                && self.rng_fault.chance(self.profile.fault_p)
            {
                match kind {
                    Kind::Shorn => self.shear(id)?,
                    Kind::Corrupt => self.corrupt(id)?,
                    Kind::Misdirected => self.misdirect(id)?,
                    _ => {
                        let fault = self.hold(id, Class::Hole)?;
                        self.cache.reorder.push(ReorderHold {
                            write: id,
                            fault,
                            flush_epoch: epoch,
                            release_at: epoch + self.profile.hold_flushes,
                            witnessed: false,
                        });
                    }
                }
            } else {
                destaged_now.push((id, self.cache.pending[&id].arrived_after_flushes));
                self.destage_all(id)?;
            }
        }
        self.witness_holes(&destaged_now)?;
        self.release_due_holds(epoch)?;
        self.destage_unheld()
    }

    /// Ordering holes: a write that arrived after a held write's flush completed is now
    /// on media while the held write is not. `destaged_now` holds (write, flushes
    /// completed when it arrived).
    fn witness_holes(&mut self, destaged_now: &[(u64, u64)]) -> io::Result<()> {
        for i in 0..self.cache.reorder.len() {
            let h = &self.cache.reorder[i];
            if !h.witnessed && destaged_now.iter().any(|&(_, a)| a >= h.flush_epoch) {
                self.cache.reorder[i].witnessed = true;
                let fault = self.cache.reorder[i].fault;
                self.emit(Event::HoleWitness { fault })?;
            }
        }
        Ok(())
    }

    /// Reorder holds whose time came at flush `epoch` reach media.
    fn release_due_holds(&mut self, epoch: u64) -> io::Result<()> {
        let due: Vec<u64> = self
            .cache
            .reorder
            .iter()
            .filter(|h| h.release_at <= epoch)
            .map(|h| h.write)
            .collect();
        self.cache.reorder.retain(|h| h.release_at > epoch);
        for id in due {
            self.destage_all(id)?;
        }
        Ok(())
    }
}
