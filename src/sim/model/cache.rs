//! The volatile cache's way to media: destaging cached sectors to the image without
//! changing what a powered read returns.
//!
//! Why one place: every byte that reaches the image intact at its home goes through
//! `destage` → `image_write`, so the overlay bookkeeping (reads always see the newest
//! data) and the oracle's "this destage undid a fault" events are kept in one spot.

use super::{Model, Pending, SECTOR_U64};
use crate::record::SECTOR;
use crate::sim::oracle::Event;
use crate::sim::profile::Kind;
use std::io;

/// The span from the first to the last sector of `p` still in cache only.
pub(super) fn cached_span(p: &Pending) -> (u64, &[u8]) {
    let first = p.remaining.iter().position(|&r| r).unwrap_or(0);
    let last = p.remaining.iter().rposition(|&r| r).unwrap_or(0);
    (
        p.offset + (first * SECTOR) as u64,
        &p.data[first * SECTOR..(last + 1) * SECTOR],
    )
}

impl Model {
    /// Writes bytes to the image at sector `s0` without changing what reads return.
    pub(super) fn image_write(&mut self, s0: u64, data: &[u8]) -> io::Result<()> {
        let n = (data.len() / SECTOR) as u64;
        if self.cache.overlay.range(s0..s0 + n).count() as u64 != n {
            // Preserve the live content of sectors whose newest data is the image's.
            let old = self.live(s0, s0 + n)?;
            for i in 0..n {
                self.cache.overlay.entry(s0 + i).or_insert_with(|| {
                    let mut b = Box::new([0u8; SECTOR]);
                    let o = (i as usize) * SECTOR;
                    b.copy_from_slice(&old[o..o + SECTOR]);
                    b
                });
            }
        }
        self.image.write_at(data, s0 * SECTOR_U64)?;
        for i in 0..n {
            let s = s0 + i;
            let o = (i as usize) * SECTOR;
            if !self.cache.cover.contains_key(&s)
                && self
                    .cache
                    .overlay
                    .get(&s)
                    .is_some_and(|b| b[..] == data[o..o + SECTOR])
            {
                self.cache.overlay.remove(&s);
            }
        }
        Ok(())
    }

    /// Puts the still-cached sectors `idx` of write `id` on media, at home, intact.
    pub(super) fn destage(&mut self, id: u64, idx: std::ops::Range<usize>) -> io::Result<()> {
        let Some(p) = self.cache.pending.get_mut(&id) else {
            return Ok(());
        };
        let s0 = p.offset / SECTOR_U64;
        // (first sector index, bytes) of each contiguous run still cached.
        let mut runs: Vec<(usize, Vec<u8>)> = Vec::new();
        for i in idx {
            if !p.remaining[i] {
                continue;
            }
            p.remaining[i] = false;
            let bytes = &p.data[i * SECTOR..(i + 1) * SECTOR];
            match runs.last_mut() {
                Some((a, run)) if *a + run.len() / SECTOR == i => run.extend_from_slice(bytes),
                _ => runs.push((i, bytes.to_vec())),
            }
        }
        if !p.remaining.iter().any(|&r| r) {
            self.cache.pending.remove(&id);
        }
        for (a, bytes) in runs {
            let first = s0 + a as u64;
            let n = (bytes.len() / SECTOR) as u64;
            for s in first..first + n {
                if self.cache.cover.get(&s) == Some(&id) {
                    self.cache.cover.remove(&s);
                }
            }
            self.image_write(first, &bytes)?;
            let ev = Event::Destaged {
                write: id,
                offset: first * SECTOR_U64,
                len: bytes.len() as u64,
            };
            // Log only destages that undo a fault: the rest cannot change the verdict.
            if self.resolver.apply(&ev) {
                self.log.append(ev)?;
            }
        }
        Ok(())
    }

    pub(super) fn destage_all(&mut self, id: u64) -> io::Result<()> {
        let n = self.cache.pending.get(&id).map_or(0, |p| p.remaining.len());
        self.destage(id, 0..n)
    }

    /// Lying cache: destage the oldest writes while it holds too many.
    pub(super) fn shrink_cache(&mut self) -> io::Result<()> {
        while self.cache.pending.len() > self.profile.cache_writes.max(1) {
            let Some(&id) = self.cache.pending.keys().next() else {
                break;
            };
            self.destage_all(id)?;
        }
        Ok(())
    }

    /// Destages every cached write that is neither held nor stuck, oldest first.
    pub(super) fn destage_unheld(&mut self) -> io::Result<()> {
        let ids: Vec<u64> = self
            .cache
            .pending
            .iter()
            .filter(|(id, p)| !p.stuck && !self.cache.reorder.iter().any(|h| h.write == **id))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.destage_all(id)?;
        }
        Ok(())
    }

    /// Writes in flight together land in any order: with chance `batch_reorder_p`, one
    /// cached unflushed write other than the oldest reaches media now, ahead of the
    /// oldest, and the oracle says so. Only unflushed writes: what a flush covered is
    /// the profile's business (an honest drive has it on media already).
    pub(super) fn reorder_unflushed(&mut self) -> io::Result<()> {
        if self.profile.kind == Kind::HonestPlp {
            return Ok(());
        }
        let unflushed: Vec<u64> = self
            .cache
            .pending
            .iter()
            .filter(|(_, p)| !p.flushed && !p.stuck && p.remaining.iter().any(|&r| r))
            .map(|(&id, _)| id)
            .collect();
        if unflushed.len() < 2 || !self.rng_io.chance(self.profile.batch_reorder_p) {
            return Ok(());
        }
        let oldest = unflushed[0];
        let write = unflushed[1 + self.rng_io.below(unflushed.len() as u64 - 1) as usize];
        let (offset, bytes) = cached_span(&self.cache.pending[&write]);
        let len = bytes.len() as u64;
        self.emit(Event::Reordered {
            write,
            ahead_of: oldest,
            offset,
            len,
        })?;
        self.destage_all(write)
    }
}
