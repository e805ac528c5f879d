//! What the oracle guarantees, checked.
//!
//! Why: the oracle is the account every power-cut test trusts. A fault logged on a range
//! outside the drive, out of order, or a resolver whose indexes disagree with its faults
//! would make tests pass or fail for the wrong reason. The log is checked event by event
//! as it grows (only the events appended since the last check, so a check after every
//! drive operation stays cheap); the resolver's indexes are checked whole.

use super::log::LogSeen;
use super::resolver::{Resolver, Tracked};
use super::{Class, Event, OracleLog, SECTOR_U64};
use crate::sim::invariant::{InvariantViolation, Sweep, ensure};

impl OracleLog {
    /// Checks the events appended since the last check, in order:
    /// - the first Start comes before any event but reconciliation `Destaged` lines, a
    ///   Start names this drive's size, and only a Start follows a Cut;
    /// - fault ids strictly increase;
    /// - every range is whole sectors inside the drive, and a fault's records, flips and
    ///   landing place lie inside its range (a misdirected landing outside it);
    /// - only post-cut faults (unreadable, dead) hit no write, and only held-write faults
    ///   are conditional;
    /// - a HoleWitness names a hole fault of this session, once.
    pub fn check_invariants(&self, size_bytes: u64) -> Result<(), InvariantViolation> {
        let mut seen = self.seen.borrow_mut();
        let from = self.checked.get();
        for (i, ev) in self.events.iter().enumerate().skip(from) {
            check_event(ev, &mut seen, size_bytes).map_err(|v| InvariantViolation {
                detail: format!("event {i} {ev:?}: {}", v.detail),
                ..v
            })?;
            self.checked.set(i + 1);
        }
        Ok(())
    }

    /// Test hook: appends an event without writing it anywhere, as a buggy drive would.
    #[cfg(test)]
    pub(crate) fn push_unchecked(&mut self, ev: Event) {
        self.events.push(ev);
    }
}

fn sector_range(
    what: &'static str,
    offset: u64,
    len: u64,
    size_bytes: u64,
) -> Result<(), InvariantViolation> {
    ensure(
        len > 0
            && offset % SECTOR_U64 == 0
            && len % SECTOR_U64 == 0
            && offset.checked_add(len).is_some_and(|end| end <= size_bytes),
        what,
        || format!("[{offset}, +{len}) is not whole sectors inside the {size_bytes}-byte drive"),
    )
}

fn check_event(ev: &Event, seen: &mut LogSeen, size_bytes: u64) -> Result<(), InvariantViolation> {
    ensure(
        !seen.cut || matches!(ev, Event::Start { .. }),
        "oracle order",
        || "an event other than Start follows a Cut".into(),
    )?;
    ensure(
        seen.started || matches!(ev, Event::Start { .. } | Event::Destaged { .. }),
        "oracle order",
        || "only reconciliation Destaged events may precede the first Start".into(),
    )?;
    match ev {
        Event::Start {
            size_bytes: size, ..
        } => {
            ensure(*size == size_bytes, "oracle start", || {
                format!("Start names a {size}-byte drive, the drive has {size_bytes}")
            })?;
            seen.started = true;
            seen.cut = false;
            seen.open_holes.clear();
        }
        Event::Cut => seen.cut = true,
        Event::Destaged { write, offset, len } | Event::Superseded { write, offset, len } => {
            ensure(*write > 0, "oracle write", || "names write 0".into())?;
            sector_range("oracle range", *offset, *len, size_bytes)?;
        }
        Event::Reordered {
            write,
            ahead_of,
            offset,
            len,
        } => {
            ensure(*ahead_of > 0 && write > ahead_of, "oracle reorder", || {
                format!("write {write} cannot land ahead of write {ahead_of}")
            })?;
            sector_range("oracle range", *offset, *len, size_bytes)?;
        }
        Event::HoleWitness { fault } => {
            ensure(seen.open_holes.remove(fault), "oracle hole witness", || {
                format!("fault {fault} is no unwitnessed hole of this session")
            })?;
        }
        Event::Fault { id, class, .. } => {
            ensure(*id > seen.last_fault_id, "oracle fault order", || {
                format!("fault id {id} after {}", seen.last_fault_id)
            })?;
            seen.last_fault_id = *id;
            check_fault(ev, size_bytes)?;
            if *class == Class::Hole {
                seen.open_holes.insert(*id);
            }
        }
    }
    Ok(())
}

fn check_fault(ev: &Event, size_bytes: u64) -> Result<(), InvariantViolation> {
    let Event::Fault {
        class,
        write,
        offset,
        len,
        records,
        flips,
        to_offset,
        conditional,
        ..
    } = ev
    else {
        return Ok(());
    };
    sector_range("oracle range", *offset, *len, size_bytes)?;
    let post_cut = matches!(class, Class::Unreadable | Class::Dead);
    ensure((*write == 0) == post_cut, "oracle write", || {
        format!("a {class:?} fault names write {write}")
    })?;
    ensure(
        !conditional
            || matches!(
                class,
                Class::Lost | Class::Hole | Class::Shorn | Class::Misdirected
            ),
        "oracle conditional",
        || format!("a {class:?} fault is conditional"),
    )?;
    ensure(
        (*class == Class::Corrupt) != flips.is_empty()
            && flips.windows(2).all(|w| w[0] < w[1])
            && flips.iter().all(|&b| b < len * 8),
        "oracle flips",
        || format!("{class:?} with flips {flips:?} over {len} bytes"),
    )?;
    if let Some(d) = to_offset {
        sector_range("oracle range", *d, *len, size_bytes)?;
        ensure(
            *class == Class::Misdirected && (d + len <= *offset || offset + len <= *d),
            "oracle misdirected landing",
            || format!("{class:?} lands at {d}, overlapping its home {offset}+{len}"),
        )?;
    }
    for r in records {
        let sectors = u64::from(r.last_index - r.first_index) + 1;
        ensure(
            r.first_index <= r.last_index
                && r.last_index < r.record_sectors
                && r.at >= *offset
                && r.at + sectors * SECTOR_U64 <= offset + len,
            "oracle records",
            || format!("record {r:?} is not inside the fault's range {offset}+{len}"),
        )?;
    }
    Ok(())
}

impl Resolver {
    /// Checks the resolver's indexes against its faults:
    /// - faults are in session order, none from a session after the current one, and
    ///   only the current session's faults are still conditional;
    /// - `by_id` points at the fault of that session;
    /// - `by_sector` lists exactly the still-affected sectors of cancellable faults;
    /// - `landed` points at faults whose own write landed there; a covered landing is a
    ///   landing; only holes are witnessed;
    /// - a fault's affected and superseded sectors lie inside its range.
    ///
    /// A windowed sweep reads some faults and some sector lists; the cross-index counts,
    /// `by_id` and `landed` are read by full sweeps only.
    pub fn check_invariants(&self, sweep: Sweep) -> Result<(), InvariantViolation> {
        let mut indexed = 0usize;
        for (i, f) in sweep.over(self.faults.iter().enumerate()) {
            indexed += self.check_fault(i, f)?;
        }
        self.check_indexes(sweep, indexed)
    }

    /// One tracked fault's own invariants; returns how many sector entries it must have
    /// in `by_sector`.
    fn check_fault(&self, i: usize, f: &Tracked) -> Result<usize, InvariantViolation> {
        let mut indexed = 0usize;
        let earlier = i.checked_sub(1).map_or(0, |j| self.faults[j].session);
        ensure(
            earlier <= f.session && f.session <= self.session,
            "resolver sessions",
            || format!("fault {i} of session {} after {earlier}", f.session),
        )?;
        ensure(
            !f.conditional || f.session == self.session,
            "resolver conditional",
            || format!("fault {i} of session {} is still conditional", f.session),
        )?;
        ensure(
            !f.witnessed || f.class == Class::Hole,
            "resolver witness",
            || format!("fault {i} ({:?}) is witnessed", f.class),
        )?;
        let first = f.offset / SECTOR_U64;
        let end = (f.offset + f.len).div_ceil(SECTOR_U64);
        // Sets are sorted: their ends bound them.
        let inside = |set: &std::collections::BTreeSet<u64>| {
            set.first().is_none_or(|s| *s >= first) && set.last().is_none_or(|s| *s < end)
        };
        ensure(
            inside(&f.remaining) && inside(&f.superseded),
            "resolver sectors",
            || format!("fault {i} has sectors outside [{first}, {end})"),
        )?;
        ensure(
            f.landed_covered.is_subset(&f.own_landed),
            "resolver landed",
            || format!("fault {i} has covered sectors it never landed"),
        )?;
        if f.class.cancellable() {
            for s in &f.remaining {
                indexed += 1;
                ensure(
                    self.by_sector.get(s).is_some_and(|l| l.contains(&i)),
                    "resolver by_sector",
                    || format!("fault {i}'s affected sector {s} is not indexed"),
                )?;
            }
        }
        Ok(indexed)
    }

    /// The indexes against the faults: windowed for `by_sector`, whole (and the count
    /// of sector entries) in a full sweep only.
    fn check_indexes(&self, sweep: Sweep, indexed: usize) -> Result<(), InvariantViolation> {
        let mut listed = 0usize;
        for (s, list) in sweep.over(self.by_sector.iter()) {
            listed += list.len();
            ensure(
                !list.is_empty()
                    && list.iter().all(|&i| {
                        self.faults
                            .get(i)
                            .is_some_and(|f| f.class.cancellable() && f.remaining.contains(s))
                    }),
                "resolver by_sector",
                || format!("sector {s} lists {list:?}, not all still affected there"),
            )?;
        }
        if !sweep.is_full() {
            return Ok(());
        }
        ensure(indexed == listed, "resolver by_sector", || {
            format!("{listed} sector entries for {indexed} affected sectors")
        })?;
        for (&(session, id), &i) in &self.by_id {
            ensure(
                self.faults.get(i).is_some_and(|f| f.session == session),
                "resolver by_id",
                || format!("({session}, {id}) -> {i}, not a fault of that session"),
            )?;
        }
        for (s, list) in &self.landed {
            ensure(
                list.iter()
                    .all(|&i| self.faults.get(i).is_some_and(|f| f.own_landed.contains(s))),
                "resolver landed",
                || format!("sector {s} lists {list:?}, whose writes did not land there"),
            )?;
        }
        Ok(())
    }

    /// Test hook: forgets which faults still affect sector `s`, as a buggy index would.
    #[cfg(test)]
    pub(crate) fn unindex_for_test(&mut self, s: u64) {
        self.by_sector.remove(&s);
    }
}
