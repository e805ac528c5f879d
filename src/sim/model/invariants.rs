//! What the drive model guarantees between operations, checked after every operation in
//! every build (see `sim::invariant`).
//!
//! Why these: they are the model's stated design (module docs of `model`, `media`, and
//! docs/fault-model.md) turned into checks, so a change that breaks one fails the first
//! test that exercises it rather than skewing an oracle that verify is judged against:
//! - the cache: at most one pending write covers a sector, and a powered read of a
//!   covered sector returns that write's bytes;
//! - media: a powered read differs from what a cut now would leave only where a cached
//!   write or a fault the oracle logged says so (the image is pristine data plus logged
//!   faults);
//! - the profile: an honest drive holds no flushed write once its flush returned, a PLP
//!   drive holds nothing, the other profiles hold flushed writes only as their fault;
//! - power: a drive without power holds nothing in cache;
//! - counters (writes, flushes, fault ids, oracle sessions and events) never go back;
//! - the oracle's own invariants, and the live resolver equals a replay of the log.

use super::{Cache, Counters, Model, Power, SECTOR_U64};
use crate::record::SECTOR;
use crate::sim::invariant::{InvariantViolation, Sweep, assert_holds, ensure};
use crate::sim::oracle::{Resolver, read_events};
use crate::sim::profile::Kind;

impl Cache {
    /// The cache's own invariants: every pending write is whole sectors inside the drive
    /// with some sector still cached; `cover` maps exactly the still-cached sectors to
    /// their write; the overlay holds that write's bytes for each of them.
    fn check_invariants(&self, size_bytes: u64, sweep: Sweep) -> Result<(), InvariantViolation> {
        for (&id, p) in sweep.over(self.pending.iter()) {
            ensure(
                p.offset % SECTOR_U64 == 0
                    && p.data.len() == p.remaining.len() * SECTOR
                    && p.offset + p.data.len() as u64 <= size_bytes,
                "cache write shape",
                || {
                    format!(
                        "write {id} at {} is not whole sectors in the drive",
                        p.offset
                    )
                },
            )?;
            ensure(p.remaining.iter().any(|&r| r), "cache write shape", || {
                format!("write {id} has no cached sector left but is still pending")
            })?;
            let s0 = p.offset / SECTOR_U64;
            for (i, _) in p.remaining.iter().enumerate().filter(|(_, r)| **r) {
                let s = s0 + i as u64;
                ensure(self.cover.get(&s) == Some(&id), "cache cover", || {
                    format!(
                        "sector {s} of write {id} is covered by {:?}",
                        self.cover.get(&s)
                    )
                })?;
                ensure(
                    self.overlay
                        .get(&s)
                        .is_some_and(|b| b[..] == p.data[i * SECTOR..(i + 1) * SECTOR]),
                    "cache overlay",
                    || format!("a powered read of sector {s} does not return write {id}'s bytes"),
                )?;
            }
        }
        let cached: usize = self
            .pending
            .values()
            .map(|p| p.remaining.iter().filter(|&&r| r).count())
            .sum();
        ensure(cached == self.cover.len(), "cache cover", || {
            format!(
                "{} covered sectors for {cached} cached ones",
                self.cover.len()
            )
        })
    }

    fn is_empty(&self) -> bool {
        self.pending.is_empty()
            && self.cover.is_empty()
            && self.overlay.is_empty()
            && self.held.is_empty()
            && self.reorder.is_empty()
    }
}

impl Model {
    /// Every invariant of the model, its cache and its oracle, over all their entries
    /// (the replay aside: see [`Model::check_oracle_replays`]).
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        self.check_invariants_in(Sweep::Full)
    }

    fn check_invariants_in(&self, sweep: Sweep) -> Result<(), InvariantViolation> {
        self.cache.check_invariants(self.size_bytes, sweep)?;
        self.check_power()?;
        self.check_profile_cache(sweep)?;
        self.check_media(sweep)?;
        self.check_counters()?;
        self.log.check_invariants(self.size_bytes)?;
        self.resolver.check_invariants(sweep)
    }

    /// The live resolver (which decides what the drive logs) is exactly what replaying
    /// the log gives: every event that changed it was logged, and nothing else was. The
    /// log is the oracle file where there is one (it holds earlier sessions too), else
    /// the events in memory. O(log), so it runs at session boundaries only.
    pub fn check_oracle_replays(&self) -> Result<(), InvariantViolation> {
        let events = match &self.oracle_file {
            Some(p) => read_events(p).map_err(|e| InvariantViolation {
                invariant: "oracle replay",
                detail: format!("the oracle log does not read back: {e}"),
            })?,
            None => self.log.events().to_vec(),
        };
        let mut replay = Resolver::new();
        for ev in &events {
            replay.apply(ev);
        }
        ensure(
            replay.faults() == self.resolver.faults()
                && replay.held_records() == self.resolver.held_records(),
            "oracle replay",
            || "the live resolver and a replay of the log disagree on the faults".into(),
        )
    }

    /// After every operation (in every build): all invariants over the next
    /// window of every structure, or a panic.
    pub(super) fn assert_invariants(&self) {
        assert_holds(|| {
            let step = self.check_step.get();
            self.check_step.set(step.wrapping_add(1));
            self.check_invariants_in(Sweep::Window(step))
        });
    }

    /// After a session boundary (start, power on, cut): everything, and the replay.
    pub(super) fn assert_invariants_and_replay(&self) {
        assert_holds(|| {
            self.check_invariants()?;
            self.check_oracle_replays()
        });
    }

    fn check_power(&self) -> Result<(), InvariantViolation> {
        ensure(
            self.power == Power::On || self.cache.is_empty(),
            "power",
            || format!("a drive in state {:?} still holds a cache", self.power),
        )
    }

    /// What the profile allows the cache to hold once an operation returned.
    fn check_profile_cache(&self, sweep: Sweep) -> Result<(), InvariantViolation> {
        let cache = &self.cache;
        let kind = self.profile.kind;
        if kind == Kind::HonestPlp {
            return ensure(cache.pending.is_empty(), "plp write-through", || {
                format!(
                    "{} writes cached on a write-through drive",
                    cache.pending.len()
                )
            });
        }
        match kind {
            Kind::Lying => ensure(
                cache.pending.len() <= self.profile.cache_writes.max(1),
                "lying cache size",
                || format!("{} writes cached", cache.pending.len()),
            )?,
            Kind::LoseRecent => ensure(
                cache.held.len() <= self.profile.lose_recent_n,
                "lose-recent held",
                || format!("{} flushed writes held", cache.held.len()),
            )?,
            _ => {}
        }
        for (&id, p) in sweep.over(cache.pending.iter()).filter(|(_, p)| p.flushed) {
            let allowed = match kind {
                // Held writes are pushed in flush order, so `held` is sorted.
                Kind::Lying | Kind::LoseRecent => cache.held.binary_search(&id).is_ok(),
                Kind::Shorn => p.stuck,
                Kind::Reorder => cache.reorder.iter().any(|h| h.write == id),
                Kind::Corrupt | Kind::Misdirected => false,
                Kind::Honest | Kind::HonestPlp | Kind::MetadataLoss | Kind::Dead => false,
            };
            ensure(allowed, "flushed write in cache", || {
                format!("{} drive still caches flushed write {id}", kind.name())
            })?;
        }
        for h in &cache.reorder {
            ensure(
                h.flush_epoch <= self.completed_flushes && self.completed_flushes < h.release_at,
                "reorder hold",
                || format!("hold of write {} is past its release", h.write),
            )?;
        }
        Ok(())
    }

    /// A powered read differs from media only where a cached write covers the sector or
    /// a logged fault damaged it.
    fn check_media(&self, sweep: Sweep) -> Result<(), InvariantViolation> {
        let mut on_media = [0u8; SECTOR];
        for (&s, newest) in sweep.over(self.cache.overlay.iter()) {
            if self.cache.cover.contains_key(&s) {
                continue;
            }
            self.image
                .read_at(&mut on_media, s * SECTOR_U64)
                .map_err(|e| InvariantViolation {
                    invariant: "media",
                    detail: format!("sector {s} does not read: {e}"),
                })?;
            ensure(
                on_media == newest[..] || self.resolver.damage_logged_at(s),
                "media",
                || {
                    format!(
                        "sector {s} on media differs from its newest data, and no logged fault says why"
                    )
                },
            )?;
        }
        Ok(())
    }

    fn counters(&self) -> Counters {
        Counters {
            next_write: self.next_write,
            completed_flushes: self.completed_flushes,
            next_fault: self.next_fault,
            oracle_events: self.log.events().len(),
        }
    }

    /// Counters never go back, and pending writes are ones the drive numbered.
    fn check_counters(&self) -> Result<(), InvariantViolation> {
        let now = self.counters();
        let before = self.last_counters.get();
        ensure(
            now.next_write >= before.next_write
                && now.completed_flushes >= before.completed_flushes
                && now.next_fault >= before.next_fault
                && now.oracle_events >= before.oracle_events,
            "counters monotone",
            || format!("{before:?} became {now:?}"),
        )?;
        self.last_counters.set(now);
        for (&id, p) in &self.cache.pending {
            ensure(
                id < self.next_write && p.arrived_after_flushes <= self.completed_flushes,
                "counters",
                || format!("pending write {id} is from the future"),
            )?;
        }
        Ok(())
    }
}

/// Ways to break the model's state on purpose, so tests can show each check fails.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Breakage {
    /// A cached sector claims another write covers it.
    CoverPointsAway,
    /// The overlay of a cached sector no longer holds the cached write's bytes.
    StaleOverlay,
    /// A flushed write stays in the cache of an honest drive.
    FlushedWriteKept,
    /// Media differs from the newest data of an uncovered sector, with no fault logged.
    SilentMediaDamage,
    /// The write counter goes back.
    CounterRewound,
    /// A drive without power still has a cache.
    CacheWithoutPower,
}

#[cfg(test)]
impl Model {
    /// Test hook: breaks one invariant (the model must hold at least one cached write for
    /// the cache breakages).
    pub(crate) fn break_for_test(&mut self, how: Breakage) {
        let first_cached = || -> (u64, u64) {
            let (&id, p) = self.cache.pending.iter().next().expect("a cached write");
            (id, p.offset / SECTOR_U64)
        };
        match how {
            Breakage::CoverPointsAway => {
                let (id, s) = first_cached();
                self.cache.cover.insert(s, id + 1000);
            }
            Breakage::StaleOverlay => {
                let (_, s) = first_cached();
                self.cache.overlay.get_mut(&s).expect("overlay")[0] ^= 1;
            }
            Breakage::FlushedWriteKept => {
                let (id, _) = first_cached();
                self.cache.pending.get_mut(&id).expect("pending").flushed = true;
            }
            Breakage::SilentMediaDamage => {
                let s = self.size_bytes / SECTOR_U64 - 1;
                self.cache.overlay.insert(s, Box::new([0xA5; SECTOR]));
            }
            Breakage::CounterRewound => self.next_write -= 1,
            Breakage::CacheWithoutPower => {
                self.cache.held.push_back(1);
                self.power = Power::Off;
            }
        }
    }

    pub(crate) fn resolver_mut_for_test(&mut self) -> &mut Resolver {
        &mut self.resolver
    }

    pub(crate) fn log_mut_for_test(&mut self) -> &mut crate::sim::oracle::OracleLog {
        &mut self.log
    }
}
