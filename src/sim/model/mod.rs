//! The drive model: a durable image, a volatile write cache, and the fault layer that
//! decides, at destage time, what reaches the image.
//!
//! Why it is built this way (after TigerBeetle's simulated storage): pristine data is
//! kept apart from faults. `overlay` holds the newest bytes of every sector whose newest
//! bytes are not (or may not be) on the image, so reads while powered always return the
//! newest data, and a fault only ever changes the image. The image therefore always
//! equals what survives a cut at this instant (see `media`), which makes a SIGKILL of the
//! FUSE daemon a faithful power cut.
//!
//! Invariants:
//! - at most one pending write covers a sector (`cover`): a newer write trims the
//!   sectors of older pending writes, as a real cache overwrites its lines, so an older
//!   write can never land over a newer one;
//! - writing the image never changes what a powered read returns;
//! - every random decision comes from one seed through forked [`Rng`]s.
//!
//! The model is single-threaded (`&mut self`); `SimDrive` wraps it in a mutex.

use super::media::{Image, Sidecar, sidecar_path};
use super::oracle::{Event, Fault, OracleLog, Resolver};
use super::profile::{Kind, Profile};
use crate::record::SECTOR;
use crate::rng::Rng;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::path::PathBuf;

const SECTOR_U64: u64 = SECTOR as u64;

/// Everything needed to start (power on) a drive.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub size_bytes: u64,
    pub profile: Profile,
    pub seed: u64,
    /// Backing file of the durable image; `None` keeps the image in memory.
    pub backing: Option<PathBuf>,
    /// Oracle log file (appended to); the events are also kept in memory.
    pub oracle: Option<PathBuf>,
}

/// Power state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    On,
    /// After a cut: every I/O fails like a vanished drive.
    Off,
    /// Powered on but dead: every I/O fails, opening fails.
    Dead,
}

struct Pending {
    offset: u64,
    data: Vec<u8>,
    /// Sectors of this write still in cache only.
    remaining: Vec<bool>,
    flushed: bool,
    /// Some sectors already reached media before its flush (an early destage).
    touched: bool,
    /// Never destaged (the unpersisted tail of a shorn write).
    stuck: bool,
    /// Flushes completed when the write arrived.
    arrived_after_flushes: u64,
}

/// The volatile write cache: what the drive holds in memory only. Everything here is
/// gone at a cut.
#[derive(Default)]
struct Cache {
    /// Pending writes by arrival sequence number.
    pending: BTreeMap<u64, Pending>,
    /// sector -> the one pending write whose bytes for that sector are still cached.
    cover: HashMap<u64, u64>,
    /// The newest bytes of every sector whose newest bytes are not (or may not be) on
    /// the image.
    overlay: BTreeMap<u64, Box<[u8; SECTOR]>>,
    /// Flushed writes held in cache (lying, lose-recent), oldest first.
    held: VecDeque<u64>,
    reorder: Vec<ReorderHold>,
}

struct ReorderHold {
    write: u64,
    fault: u64,
    flush_epoch: u64,
    release_at: u64,
    witnessed: bool,
}

/// What a read must do outside the drive lock.
pub enum ReadOutcome {
    Done,
    /// Hang this long, then fail with EIO.
    Hang(u64),
}

/// The model's counters, remembered by the last invariant check (`invariants`) to prove they never go back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Counters {
    next_write: u64,
    completed_flushes: u64,
    next_fault: u64,
    oracle_events: usize,
}

pub struct Model {
    profile: Profile,
    seed: u64,
    size_bytes: u64,
    image: Image,
    sidecar: Sidecar,
    sidecar_file: Option<PathBuf>,
    cache: Cache,
    next_write: u64,
    completed_flushes: u64,
    next_fault: u64,
    rng_io: Rng,
    rng_fault: Rng,
    rng_cut: Rng,
    rng_layout: Rng,
    log: OracleLog,
    /// The oracle file, where there is one: the whole log across sessions.
    oracle_file: Option<PathBuf>,
    resolver: Resolver,
    power: Power,
    /// The counters as the last invariant check saw them (see `invariants`).
    last_counters: Cell<Counters>,
    /// Which window the next per-operation check reads (see `sim::invariant::Sweep`).
    check_step: Cell<usize>,
}

/// EIO, the errno a vanished or failing drive gives; `what` goes to stderr-bound logs
/// through the caller's context, the errno through FUSE replies.
fn eio(_what: &str) -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

impl Model {
    /// Powers the drive on: opens (or creates) the image, applies post-cut faults armed by
    /// the previous session, and arms this session's.
    pub fn start(cfg: SimConfig) -> io::Result<Model> {
        if cfg.size_bytes == 0 || cfg.size_bytes % SECTOR_U64 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "drive size {} is not a positive multiple of 512",
                    cfg.size_bytes
                ),
            ));
        }
        let (image, sidecar, sidecar_file) = match &cfg.backing {
            Some(p) => {
                let sc = sidecar_path(p);
                (
                    Image::file(p, cfg.size_bytes)?,
                    Sidecar::load(&sc)?,
                    Some(sc),
                )
            }
            None => (Image::memory(cfg.size_bytes)?, Sidecar::default(), None),
        };
        let mut root = Rng::new(cfg.seed);
        let mut m = Model {
            rng_io: root.fork(1),
            rng_fault: root.fork(2),
            rng_cut: root.fork(3),
            rng_layout: root.fork(4),
            profile: cfg.profile,
            seed: cfg.seed,
            size_bytes: cfg.size_bytes,
            image,
            sidecar,
            sidecar_file,
            cache: Cache::default(),
            next_write: 1,
            completed_flushes: 0,
            next_fault: 1,
            log: OracleLog::new(cfg.oracle.as_deref())?,
            oracle_file: cfg.oracle.clone(),
            resolver: Resolver::new(),
            power: Power::Off,
            last_counters: Cell::default(),
            check_step: Cell::default(),
        };
        // Replay an existing oracle log so faults of earlier sessions stay known.
        if let Some(p) = cfg.oracle.as_deref()
            && p.exists()
        {
            for ev in super::oracle::read_events(p)? {
                m.resolver.apply(&ev);
            }
            m.reconcile_held_writes()?;
        }
        m.power_on_inner()?;
        m.assert_invariants_and_replay();
        Ok(m)
    }

    /// A SIGKILL can land between a held write reaching media and the Destaged event that
    /// says so, leaving an oracle that calls lost what the image holds. Before powering on,
    /// look for each still-held write's sectors on media (by their stamps) and log what
    /// landed, so the oracle matches the image whatever instant the cut came.
    fn reconcile_held_writes(&mut self) -> io::Result<()> {
        for (write, records) in self.resolver.held_records() {
            for r in records {
                let mut landed: Option<(u64, u64)> = None;
                let mut runs = Vec::new();
                for k in r.first_index..=r.last_index {
                    let at = r.at + (k - r.first_index) as u64 * SECTOR_U64;
                    let mut sector = [0u8; SECTOR];
                    self.image.read_at(&mut sector, at)?;
                    let here = crate::record::decode_stamp(&sector).is_ok_and(|st| {
                        st.run.hex() == r.run
                            && st.record.stream == r.stream
                            && st.record.seq == r.seq
                            && st.index == k
                    });
                    landed = match (landed, here) {
                        (Some((o, l)), true) => Some((o, l + SECTOR_U64)),
                        (None, true) => Some((at, SECTOR_U64)),
                        (Some(run), false) => {
                            runs.push(run);
                            None
                        }
                        (None, false) => None,
                    };
                }
                runs.extend(landed);
                for (offset, len) in runs {
                    let ev = Event::Destaged { write, offset, len };
                    if self.resolver.apply(&ev) {
                        self.log.append(ev)?;
                    }
                }
            }
        }
        Ok(())
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn profile(&self) -> &Profile {
        &self.profile
    }
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    pub fn power(&self) -> Power {
        self.power
    }
    /// Oracle events of this drive object, in order.
    pub fn events(&self) -> &[Event] {
        self.log.events()
    }
    /// The faults that are real if the cut happens now.
    pub fn faults(&self) -> Vec<Fault> {
        self.resolver.faults()
    }
    /// Bytes currently in cache only (for tests and status).
    pub fn pending_writes(&self) -> usize {
        self.cache.pending.len()
    }

    fn emit(&mut self, ev: Event) -> io::Result<()> {
        self.resolver.apply(&ev);
        self.log.append(ev)
    }

    fn fault_id(&mut self) -> u64 {
        let id = self.next_fault;
        self.next_fault += 1;
        id
    }

    /// Whether the drive can be opened (fails for a dead drive).
    pub fn check_open(&self) -> io::Result<()> {
        match self.power {
            Power::On => Ok(()),
            Power::Off => Err(eio("simulated drive has no power")),
            Power::Dead => Err(eio("simulated drive is dead and does not respond")),
        }
    }

    fn check_range(&self, offset: u64, len: usize) -> io::Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size_bytes => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "I/O at {offset}+{len} is past the end of the {}-byte drive",
                    self.size_bytes
                ),
            )),
        }
    }

    /// What a powered read returns for whole sectors [s0, s1).
    fn live(&self, s0: u64, s1: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; ((s1 - s0) * SECTOR_U64) as usize];
        self.image.read_at(&mut buf, s0 * SECTOR_U64)?;
        for (s, data) in self.cache.overlay.range(s0..s1) {
            let o = ((s - s0) * SECTOR_U64) as usize;
            buf[o..o + SECTOR].copy_from_slice(&data[..]);
        }
        Ok(buf)
    }

    /// Reads the newest data. Unreadable ranges fail (or ask the caller to hang).
    pub fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<ReadOutcome> {
        let outcome = self.read_newest(buf, offset)?;
        self.assert_invariants();
        Ok(outcome)
    }

    fn read_newest(&self, buf: &mut [u8], offset: u64) -> io::Result<ReadOutcome> {
        self.check_open()?;
        self.check_range(offset, buf.len())?;
        let end = offset + buf.len() as u64;
        for &(o, l) in &self.sidecar.active.unreadable {
            if offset < o + l && o < end {
                if let Some(ms) = self.sidecar.active.read_hang_ms {
                    return Ok(ReadOutcome::Hang(ms));
                }
                return Err(eio("simulated media error: range unreadable"));
            }
        }
        if buf.is_empty() {
            return Ok(ReadOutcome::Done);
        }
        let s0 = offset / SECTOR_U64;
        let s1 = end.div_ceil(SECTOR_U64);
        let live = self.live(s0, s1)?;
        let skip = (offset - s0 * SECTOR_U64) as usize;
        buf.copy_from_slice(&live[skip..skip + buf.len()]);
        Ok(ReadOutcome::Done)
    }

    /// Reads what is on media now (what a cut at this instant would leave).
    pub fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.check_range(offset, buf.len())?;
        self.image.read_at(buf, offset)
    }

    /// Accepts a write into the cache. Any alignment; the cache works in sectors.
    pub fn write(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.accept_write(buf, offset)?;
        self.assert_invariants();
        Ok(())
    }

    fn accept_write(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_open()?;
        self.check_range(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let end = offset + buf.len() as u64;
        let s0 = offset / SECTOR_U64;
        let s1 = end.div_ceil(SECTOR_U64);
        let mut data = if offset % SECTOR_U64 == 0 && end % SECTOR_U64 == 0 {
            buf.to_vec()
        } else {
            self.live(s0, s1)?
        };
        let skip = (offset - s0 * SECTOR_U64) as usize;
        data[skip..skip + buf.len()].copy_from_slice(buf);
        let id = self.next_write;
        self.next_write += 1;
        let n = (s1 - s0) as usize;
        for (i, s) in (s0..s1).enumerate() {
            if let Some(old) = self.cache.cover.insert(s, id)
                && let Some(p) = self.cache.pending.get_mut(&old)
            {
                p.remaining[(s - p.offset / SECTOR_U64) as usize] = false;
                if !p.remaining.iter().any(|&r| r) {
                    self.cache.pending.remove(&old);
                }
            }
            let mut sector = Box::new([0u8; SECTOR]);
            sector.copy_from_slice(&data[i * SECTOR..(i + 1) * SECTOR]);
            self.cache.overlay.insert(s, sector);
        }
        self.cache.pending.insert(
            id,
            Pending {
                offset: s0 * SECTOR_U64,
                data,
                remaining: vec![true; n],
                flushed: false,
                touched: false,
                stuck: false,
                arrived_after_flushes: self.completed_flushes,
            },
        );
        if self.profile.kind == Kind::HonestPlp {
            // Power-loss protection: the cache survives a cut, and a SIGKILL gives no
            // chance to destage, so the only faithful model is write-through.
            return self.destage(id, 0..n);
        }
        // Any drive may destage an unflushed write early, and may tear it.
        if self.rng_io.chance(self.profile.early_destage_p) {
            let k = if n > 1 && self.rng_io.chance(self.profile.tear_p) {
                self.rng_io.range(1, n as u64 - 1) as usize
            } else {
                n
            };
            if let Some(p) = self.cache.pending.get_mut(&id) {
                p.touched = true;
            }
            self.destage(id, 0..k)?;
        }
        if self.profile.batch_reorder_p > 0.0 {
            self.reorder_unflushed()?;
        }
        if self.profile.kind == Kind::Lying {
            self.shrink_cache()?;
        }
        Ok(())
    }

    /// Zeroes a byte range through the cache (fallocate punch-hole / zero-range): a drive
    /// sees a discard or write-zeroes as one more write.
    pub fn zero(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let end = offset.saturating_add(len).min(self.size_bytes);
        let mut at = offset;
        const CHUNK: u64 = 1 << 20;
        let zeros = vec![0u8; CHUNK as usize];
        while at < end {
            let n = (end - at).min(CHUNK);
            self.write(&zeros[..n as usize], at)?;
            at += n;
        }
        Ok(())
    }
}

mod cache;
mod faults;
mod flush;
mod invariants;
mod power;
#[cfg(test)]
mod tests;
