//! The resolver: replays oracle events and keeps the set of faults that are real so far.
//!
//! Why a state machine and not a final list: the drive may be killed at any instant, so
//! which faults are real is decided by replaying the decisions in order; the live drive
//! runs the same resolver to know which of its events change anything.

use super::{Class, Event, Fault, RecordRef, SECTOR_U64};
use std::collections::{BTreeMap, HashMap};

pub(super) struct Tracked {
    pub(super) session: u64,
    pub(super) class: Class,
    pub(super) write: u64,
    pub(super) offset: u64,
    pub(super) len: u64,
    /// The plugpull records in the fault's range when it was injected.
    pub(super) records: Vec<RecordRef>,
    /// Sectors a later write was flushed over: verify judges that later record there, so
    /// these sectors no longer count against this fault's records. Per sector, because a
    /// record is judged only where it is the latest acknowledged one.
    pub(super) superseded: std::collections::BTreeSet<u64>,
    pub(super) flips: Vec<u64>,
    pub(super) to_offset: Option<u64>,
    pub(super) conditional: bool,
    pub(super) witnessed: bool,
    /// Some sectors of a held write reached media, others did not.
    pub(super) own_undone: bool,
    /// The sectors of this fault's own write that reached media late, and which of them a
    /// later write has since covered: verify sees "shorn" only while some landed sector
    /// still shows this write, and "lost" once later writes cover all of them.
    pub(super) own_landed: std::collections::BTreeSet<u64>,
    pub(super) landed_covered: std::collections::BTreeSet<u64>,
    /// Still-affected sectors (absolute sector numbers).
    pub(super) remaining: std::collections::BTreeSet<u64>,
}

/// Replays oracle events and keeps the set of faults that are real so far. The drive
/// uses it live (to know which destage events matter) and [`resolve`] uses it on a log.
#[derive(Default)]
pub struct Resolver {
    pub(super) session: u64,
    pub(super) faults: Vec<Tracked>,
    /// (session, fault id) -> index in `faults`.
    pub(super) by_id: HashMap<(u64, u64), usize>,
    /// sector -> indexes of faults with that sector remaining (cancellable faults only).
    pub(super) by_sector: BTreeMap<u64, Vec<usize>>,
    /// sector -> indexes of faults whose own write landed there late (see `own_landed`).
    pub(super) landed: BTreeMap<u64, Vec<usize>>,
}

impl Resolver {
    pub fn new() -> Resolver {
        Resolver::default()
    }

    /// Applies one event; returns whether it changed anything (a destage that undid no
    /// fault does not need to be logged).
    pub fn apply(&mut self, ev: &Event) -> bool {
        match ev {
            Event::Start { .. } => {
                self.session += 1;
                // The cache of earlier sessions is gone: held writes can no longer land.
                for f in &mut self.faults {
                    f.conditional = false;
                }
                true
            }
            Event::Cut => true,
            // Changes no fault; logged so a test can show the reordering happened.
            Event::Reordered { .. } => true,
            Event::HoleWitness { fault } => {
                if let Some(&i) = self.by_id.get(&(self.session, *fault)) {
                    self.faults[i].witnessed = true;
                }
                true
            }
            Event::Fault {
                id,
                class,
                write,
                offset,
                len,
                records,
                flips,
                to_offset,
                conditional,
            } => {
                let first = offset / SECTOR_U64;
                let n = len.div_ceil(SECTOR_U64);
                let idx = self.faults.len();
                if class.cancellable() {
                    for s in first..first + n {
                        self.by_sector.entry(s).or_default().push(idx);
                    }
                }
                self.by_id.insert((self.session, *id), idx);
                // A shorn write landed the sectors of its records before the fault range.
                // On the drive, where `at` says: `record_offset` is the record's place in
                // its target, another place when the target is a file in a file system.
                let mut own_landed = std::collections::BTreeSet::new();
                if *class == Class::Shorn {
                    for r in records {
                        let Some(start) = (r.at / SECTOR_U64).checked_sub(r.first_index as u64)
                        else {
                            continue;
                        };
                        for k in 0..r.first_index as u64 {
                            let s = start + k;
                            own_landed.insert(s);
                            self.landed.entry(s).or_default().push(idx);
                        }
                    }
                }
                self.faults.push(Tracked {
                    session: self.session,
                    class: *class,
                    write: *write,
                    offset: *offset,
                    len: *len,
                    records: records.clone(),
                    superseded: Default::default(),
                    flips: flips.clone(),
                    to_offset: *to_offset,
                    conditional: *conditional,
                    witnessed: false,
                    own_undone: false,
                    own_landed,
                    landed_covered: Default::default(),
                    remaining: (first..first + n).collect(),
                });
                true
            }
            Event::Destaged { write, offset, len } => self.undo(*write, *offset, *len, true),
            Event::Superseded { write, offset, len } => self.undo(*write, *offset, *len, false),
        }
    }

    /// A write reached (`media`) or was flushed over a range: faults of earlier writes
    /// there are undone; a held write reaching media undoes its own fault.
    fn undo(&mut self, write: u64, offset: u64, len: u64, media: bool) -> bool {
        let first = offset / SECTOR_U64;
        let end = (offset + len).div_ceil(SECTOR_U64);
        let mut changed = false;
        let key = (self.session, write);
        // A later write over sectors where an earlier held write landed late hides them.
        let landed_here: Vec<(u64, Vec<usize>)> = self
            .landed
            .range(first..end)
            .map(|(s, l)| (*s, l.clone()))
            .collect();
        for (s, list) in landed_here {
            for i in list {
                let f = &mut self.faults[i];
                if key > (f.session, f.write) && f.landed_covered.insert(s) {
                    changed = true;
                }
            }
        }
        let mut newly_landed: Vec<(u64, usize)> = Vec::new();
        let sectors: Vec<u64> = self.by_sector.range(first..end).map(|(s, _)| *s).collect();
        for s in sectors {
            let list = self.by_sector.get_mut(&s).expect("key just listed");
            list.retain(|&i| {
                let f = &mut self.faults[i];
                let fkey = (f.session, f.write);
                let later = key > fkey;
                // A flush over the range only supersedes the records there; the bytes
                // on media (a stray copy, say) are unchanged.
                let undone = (media && later) || (media && key == fkey && f.conditional);
                if undone {
                    f.remaining.remove(&s);
                    changed = true;
                }
                // A later write flushed over the sector takes it over even if it never
                // reaches media. (One that reached media undid the sector above; if it
                // reached only some sectors, the rest still count: a record is judged
                // sector by sector, not dropped whole.)
                if later && !media && f.superseded.insert(s) {
                    changed = true;
                }
                if !later && undone {
                    f.own_undone = true;
                    f.own_landed.insert(s);
                    newly_landed.push((s, i));
                }
                !undone
            });
            if list.is_empty() {
                self.by_sector.remove(&s);
            }
        }
        for (s, i) in newly_landed {
            self.landed.entry(s).or_default().push(i);
        }
        changed
    }

    /// Writes of the current session whose fault still depends on the cache (held
    /// writes), with the records the fault names: what a power-on checks against media.
    pub fn held_records(&self) -> Vec<(u64, Vec<RecordRef>)> {
        self.faults
            .iter()
            .filter(|f| f.conditional && f.session == self.session && !f.remaining.is_empty())
            .map(|f| (f.write, f.records.clone()))
            .collect()
    }

    /// True if a fault the log named (corrupt bytes, a misdirected write's home or
    /// landing place) still affects sector `s`: the only reasons media may differ from
    /// the newest data of a sector no cached write covers.
    pub fn damage_logged_at(&self, s: u64) -> bool {
        self.by_sector.get(&s).is_some_and(|list| {
            list.iter()
                .any(|&i| matches!(self.faults[i].class, Class::Corrupt | Class::Misdirected))
        })
    }

    /// True if a stray copy of a misdirected write sits in the range on media.
    pub fn stray_copy_in(&self, offset: u64, len: u64) -> bool {
        let first = offset / SECTOR_U64;
        let end = (offset + len).div_ceil(SECTOR_U64);
        self.by_sector.range(first..end).any(|(_, list)| {
            list.iter().any(|&i| {
                let f = &self.faults[i];
                f.class == Class::Misdirected && f.to_offset.is_none()
            })
        })
    }

    /// The faults that are real if the cut happens now. A record named both lost and
    /// misdirected (a foreign record sits where it should be) is reported misdirected.
    pub fn faults(&self) -> Vec<Fault> {
        let mut out = self.faults_raw();
        let misdirected: std::collections::HashSet<(String, u16, u64)> = out
            .iter()
            .filter(|f| f.class == Class::Misdirected)
            .flat_map(|f| f.records.iter().map(|r| (r.run.clone(), r.stream, r.seq)))
            .collect();
        out.retain_mut(|f| {
            if !matches!(f.class, Class::Lost | Class::Hole) || f.records.is_empty() {
                return true;
            }
            f.records
                .retain(|r| !misdirected.contains(&(r.run.clone(), r.stream, r.seq)));
            !f.records.is_empty()
        });
        out
    }

    fn faults_raw(&self) -> Vec<Fault> {
        let mut out = Vec::new();
        for f in &self.faults {
            if f.remaining.is_empty() {
                continue;
            }
            let class = self.class_now(f);
            let records = still_affected_records(f);
            if !f.records.is_empty() && records.is_empty() {
                continue;
            }
            let bits = f
                .flips
                .iter()
                .filter(|&&b| f.still_counts(f.offset + b / 8 / SECTOR_U64 * SECTOR_U64))
                .count() as u64;
            // Every flipped bit sits in sectors later writes took over: nothing is left
            // for verify to see, though other sectors of the write are still "affected".
            if class == Class::Corrupt && bits == 0 {
                continue;
            }
            out.push(Fault {
                class,
                session: f.session,
                write: f.write,
                offset: f.offset,
                len: f.len,
                sectors: f.remaining.len() as u64,
                records,
                bits,
                to_offset: f.to_offset,
            });
        }
        out
    }

    /// What verify sees of fault `f` now, which later events may have changed from the
    /// class it was logged with.
    fn class_now(&self, f: &Tracked) -> Class {
        // A misdirected record whose stray copy was overwritten is simply lost.
        let copy_gone = f.class == Class::Misdirected
            && f.to_offset.is_some_and(|d| {
                !self.faults.iter().any(|g| {
                    g.session == f.session
                        && g.write == f.write
                        && g.class == Class::Misdirected
                        && g.offset == d
                        && g.to_offset.is_none()
                        && !g.remaining.is_empty()
                })
            });
        match f.class {
            Class::Misdirected if copy_gone => Class::Lost,
            // Part of a held write reached media and part did not: new sectors next to
            // old ones is what verify calls shorn.
            Class::Lost | Class::Hole
                if f.own_undone && f.own_landed.iter().any(|s| !f.landed_covered.contains(s)) =>
            {
                Class::Shorn
            }
            // Later writes covered every sector this write did land: nothing of it is
            // visible, which verify calls lost.
            Class::Shorn
                if !f.own_landed.is_empty()
                    && f.own_landed.iter().all(|s| f.landed_covered.contains(s)) =>
            {
                Class::Lost
            }
            Class::Hole if !f.witnessed => Class::Lost,
            c => c,
        }
    }
}

impl Tracked {
    /// Whether the sector at drive offset `at` still counts against this fault: still
    /// affected, and no later write was flushed over it.
    fn still_counts(&self, at: u64) -> bool {
        let s = at / SECTOR_U64;
        self.remaining.contains(&s) && !self.superseded.contains(&s)
    }
}

/// The maximal runs of each of `f`'s records whose sectors still count against it.
fn still_affected_records(f: &Tracked) -> Vec<RecordRef> {
    let mut records = Vec::new();
    for r in &f.records {
        let mut cur: Option<RecordRef> = None;
        for k in 0..=(r.last_index - r.first_index) {
            let at = r.at + k as u64 * SECTOR_U64;
            if f.still_counts(at) {
                match &mut cur {
                    Some(c) => c.last_index = r.first_index + k,
                    None => {
                        cur = Some(RecordRef {
                            first_index: r.first_index + k,
                            last_index: r.first_index + k,
                            at,
                            ..r.clone()
                        })
                    }
                }
            } else if let Some(c) = cur.take() {
                records.push(c);
            }
        }
        records.extend(cur);
    }
    records
}

/// The faults that are real after the cut, from events in log order.
pub fn resolve_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Vec<Fault> {
    let mut r = Resolver::new();
    for ev in events {
        r.apply(ev);
    }
    r.faults()
}
