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

use super::media::{Image, PostCut, Sidecar, sidecar_path};
use super::oracle::{Class, Event, Fault, OracleLog, Resolver, records_in};
use super::profile::{Kind, Profile};
use crate::record::SECTOR;
use crate::rng::Rng;
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

pub struct Model {
    profile: Profile,
    seed: u64,
    size_bytes: u64,
    image: Image,
    sidecar: Sidecar,
    sidecar_file: Option<PathBuf>,
    overlay: BTreeMap<u64, Box<[u8; SECTOR]>>,
    pending: BTreeMap<u64, Pending>,
    cover: HashMap<u64, u64>,
    next_write: u64,
    completed_flushes: u64,
    /// Flushed writes held in cache (lying, lose-recent), oldest first.
    held: VecDeque<u64>,
    reorder: Vec<ReorderHold>,
    next_fault: u64,
    rng_io: Rng,
    rng_fault: Rng,
    rng_cut: Rng,
    rng_layout: Rng,
    log: OracleLog,
    resolver: Resolver,
    power: Power,
}

/// The span from the first to the last sector of `p` still in cache only.
fn cached_span(p: &Pending) -> (u64, &[u8]) {
    let first = p.remaining.iter().position(|&r| r).unwrap_or(0);
    let last = p.remaining.iter().rposition(|&r| r).unwrap_or(0);
    (
        p.offset + (first * SECTOR) as u64,
        &p.data[first * SECTOR..(last + 1) * SECTOR],
    )
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
            overlay: BTreeMap::new(),
            pending: BTreeMap::new(),
            cover: HashMap::new(),
            next_write: 1,
            completed_flushes: 0,
            held: VecDeque::new(),
            reorder: Vec::new(),
            next_fault: 1,
            log: OracleLog::new(cfg.oracle.as_deref())?,
            resolver: Resolver::new(),
            power: Power::Off,
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
        self.pending.len()
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

    fn power_on_inner(&mut self) -> io::Result<()> {
        self.pending.clear();
        self.cover.clear();
        self.overlay.clear();
        self.held.clear();
        self.reorder.clear();
        let ev = Event::Start {
            seed: self.seed,
            profile: self.profile.to_string(),
            size_bytes: self.size_bytes,
        };
        self.emit(ev)?;
        let armed = self.sidecar.armed.clone();
        self.sidecar.power_on();
        for (off, len) in armed.unreadable {
            let mut buf = vec![0u8; len as usize];
            self.image.read_at(&mut buf, off)?;
            let records = records_in(&buf, off);
            let id = self.fault_id();
            self.emit(Event::Fault {
                id,
                class: Class::Unreadable,
                write: 0,
                offset: off,
                len,
                records,
                flips: vec![],
                to_offset: None,
                conditional: false,
            })?;
        }
        if armed.dead {
            let id = self.fault_id();
            self.emit(Event::Fault {
                id,
                class: Class::Dead,
                write: 0,
                offset: 0,
                len: self.size_bytes,
                records: vec![],
                flips: vec![],
                to_offset: None,
                conditional: false,
            })?;
        }
        // Arm this session's post-cut faults before any write could make them matter.
        match self.profile.kind {
            Kind::MetadataLoss => {
                let unit = 4096u64.min(self.size_bytes);
                let want = (self.size_bytes as f64 * self.profile.unreadable_fraction) as u64;
                let len = (want / unit * unit).clamp(unit, self.size_bytes / unit * unit);
                let slots = (self.size_bytes - len) / unit + 1;
                let off = self.rng_layout.below(slots) * unit;
                self.sidecar.armed = PostCut {
                    unreadable: vec![(off, len)],
                    read_hang_ms: self.profile.read_hang_ms,
                    dead: false,
                };
            }
            Kind::Dead => {
                self.sidecar.armed = PostCut {
                    dead: true,
                    ..PostCut::default()
                }
            }
            _ => {}
        }
        if let Some(p) = &self.sidecar_file {
            self.sidecar.store(p)?;
        }
        self.power = if self.sidecar.active.dead {
            Power::Dead
        } else {
            Power::On
        };
        Ok(())
    }

    /// Power comes back after a cut. A dead drive fails here.
    pub fn power_on(&mut self) -> io::Result<()> {
        if self.power == Power::On {
            return Ok(());
        }
        self.power_on_inner()?;
        self.check_open()
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
        for (s, data) in self.overlay.range(s0..s1) {
            let o = ((s - s0) * SECTOR_U64) as usize;
            buf[o..o + SECTOR].copy_from_slice(&data[..]);
        }
        Ok(buf)
    }

    /// Reads the newest data. Unreadable ranges fail (or ask the caller to hang).
    pub fn read(&self, buf: &mut [u8], offset: u64) -> io::Result<ReadOutcome> {
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
            if let Some(old) = self.cover.insert(s, id)
                && let Some(p) = self.pending.get_mut(&old)
            {
                p.remaining[(s - p.offset / SECTOR_U64) as usize] = false;
                if !p.remaining.iter().any(|&r| r) {
                    self.pending.remove(&old);
                }
            }
            let mut sector = Box::new([0u8; SECTOR]);
            sector.copy_from_slice(&data[i * SECTOR..(i + 1) * SECTOR]);
            self.overlay.insert(s, sector);
        }
        self.pending.insert(
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
            if let Some(p) = self.pending.get_mut(&id) {
                p.touched = true;
            }
            self.destage(id, 0..k)?;
        }
        if self.profile.kind == Kind::Lying {
            self.shrink_cache()?;
        }
        Ok(())
    }

    /// Writes bytes to the image at sector `s0` without changing what reads return.
    fn image_write(&mut self, s0: u64, data: &[u8]) -> io::Result<()> {
        let n = (data.len() / SECTOR) as u64;
        if self.overlay.range(s0..s0 + n).count() as u64 != n {
            // Preserve the live content of sectors whose newest data is the image's.
            let old = self.live(s0, s0 + n)?;
            for i in 0..n {
                self.overlay.entry(s0 + i).or_insert_with(|| {
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
            if !self.cover.contains_key(&s)
                && self
                    .overlay
                    .get(&s)
                    .is_some_and(|b| b[..] == data[o..o + SECTOR])
            {
                self.overlay.remove(&s);
            }
        }
        Ok(())
    }

    /// Puts the still-cached sectors `idx` of write `id` on media, at home, intact.
    fn destage(&mut self, id: u64, idx: std::ops::Range<usize>) -> io::Result<()> {
        let Some(p) = self.pending.get_mut(&id) else {
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
            self.pending.remove(&id);
        }
        for (a, bytes) in runs {
            let first = s0 + a as u64;
            let n = (bytes.len() / SECTOR) as u64;
            for s in first..first + n {
                if self.cover.get(&s) == Some(&id) {
                    self.cover.remove(&s);
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

    fn destage_all(&mut self, id: u64) -> io::Result<()> {
        let n = self.pending.get(&id).map_or(0, |p| p.remaining.len());
        self.destage(id, 0..n)
    }

    /// Lying cache: destage the oldest writes while it holds too many.
    fn shrink_cache(&mut self) -> io::Result<()> {
        while self.pending.len() > self.profile.cache_writes.max(1) {
            let Some(&id) = self.pending.keys().next() else {
                break;
            };
            self.destage_all(id)?;
        }
        Ok(())
    }

    /// Keeps flushed write `id` in cache only; logs the conditional fault on the sectors
    /// still cached (shorn if an early destage already put the others on media).
    fn hold(&mut self, id: u64, class: Class) -> io::Result<u64> {
        let p = &self.pending[&id];
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
        self.check_open()?;
        let epoch = self.completed_flushes + 1;
        let newly: Vec<u64> = self
            .pending
            .iter_mut()
            .filter(|(_, p)| !p.flushed)
            .map(|(&id, p)| {
                p.flushed = true;
                id
            })
            .collect();
        // Verify judges the latest acknowledged record at each sector: faults of earlier
        // records under a newly flushed write stop counting.
        for &id in &newly {
            let p = &self.pending[&id];
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
        let kind = self.profile.kind;
        match kind {
            Kind::Lying | Kind::LoseRecent => {
                for &id in &newly {
                    if self.pending[&id].stuck {
                        continue;
                    }
                    self.hold(id, Class::Lost)?;
                    self.held.push_back(id);
                }
                if kind == Kind::LoseRecent {
                    while self.held.len() > self.profile.lose_recent_n {
                        let id = self.held.pop_front().expect("non-empty");
                        self.destage_all(id)?;
                    }
                } else {
                    self.shrink_cache()?;
                }
            }
            Kind::Shorn | Kind::Corrupt | Kind::Misdirected | Kind::Reorder => {
                let mut destaged_now = Vec::new();
                for &id in &newly {
                    let p = &self.pending[&id];
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
                                self.reorder.push(ReorderHold {
                                    write: id,
                                    fault,
                                    flush_epoch: epoch,
                                    release_at: epoch + self.profile.hold_flushes,
                                    witnessed: false,
                                });
                            }
                        }
                    } else {
                        destaged_now.push((id, self.pending[&id].arrived_after_flushes));
                        self.destage_all(id)?;
                    }
                }
                // Ordering holes: a write that arrived after a held write's flush
                // completed is now on media while the held write is not.
                for i in 0..self.reorder.len() {
                    let h = &self.reorder[i];
                    if !h.witnessed && destaged_now.iter().any(|&(_, a)| a >= h.flush_epoch) {
                        self.reorder[i].witnessed = true;
                        let fault = self.reorder[i].fault;
                        self.emit(Event::HoleWitness { fault })?;
                    }
                }
                let due: Vec<u64> = self
                    .reorder
                    .iter()
                    .filter(|h| h.release_at <= epoch)
                    .map(|h| h.write)
                    .collect();
                self.reorder.retain(|h| h.release_at > epoch);
                for id in due {
                    self.destage_all(id)?;
                }
                self.destage_unheld()?;
            }
            Kind::Honest | Kind::HonestPlp | Kind::MetadataLoss | Kind::Dead => {
                self.destage_unheld()?;
            }
        }
        self.completed_flushes = epoch;
        Ok(self.profile.flush_latency_us)
    }

    /// Destages every cached write that is neither held nor stuck, oldest first.
    fn destage_unheld(&mut self) -> io::Result<()> {
        let ids: Vec<u64> = self
            .pending
            .iter()
            .filter(|(id, p)| !p.stuck && !self.reorder.iter().any(|h| h.write == **id))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.destage_all(id)?;
        }
        Ok(())
    }

    /// Shorn: the first k of n sectors reach media; the rest stay in cache forever.
    fn shear(&mut self, id: u64) -> io::Result<()> {
        let n = self.pending[&id].remaining.len();
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
        let p = self.pending.get_mut(&id).expect("present");
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
    fn corrupt(&mut self, id: u64) -> io::Result<()> {
        let p = self.pending.remove(&id).expect("present");
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
            self.cover.remove(&(s0 + i));
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
    fn misdirect(&mut self, id: u64) -> io::Result<()> {
        let (offset, len) = {
            let p = &self.pending[&id];
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
        let p = self.pending.remove(&id).expect("present");
        let s0 = offset / SECTOR_U64;
        for i in 0..p.remaining.len() as u64 {
            self.cover.remove(&(s0 + i));
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

    /// The deterministic power cut: the profile's last chance to destage, then the cache
    /// is gone. A PLP drive destages everything; any other drive destages a random subset
    /// of unflushed writes and may tear one; held and stuck writes are lost.
    pub fn cut(&mut self) -> io::Result<()> {
        if self.power != Power::On {
            self.power = Power::Off;
            return Ok(());
        }
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            let Some(p) = self.pending.get(&id) else {
                continue;
            };
            if self.profile.kind == Kind::HonestPlp {
                self.destage_all(id)?;
                continue;
            }
            if p.flushed || p.stuck {
                continue;
            }
            let n = p.remaining.len();
            if self.rng_cut.chance(0.5) {
                let k = if n > 1 && self.rng_cut.chance(self.profile.tear_p) {
                    self.rng_cut.range(1, n as u64 - 1) as usize
                } else {
                    n
                };
                self.destage(id, 0..k)?;
            }
        }
        self.emit(Event::Cut)?;
        self.pending.clear();
        self.cover.clear();
        self.overlay.clear();
        self.held.clear();
        self.reorder.clear();
        self.power = Power::Off;
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
