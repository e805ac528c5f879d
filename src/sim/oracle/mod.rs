//! The oracle: the simulated drive's own account of every fault it injected, so tests can
//! assert that verify found exactly those faults and nothing else.
//!
//! Why a log of events rather than a final list: the drive may be SIGKILLed at any
//! instant (that is the power cut), so it cannot write a summary at the end. Instead every
//! decision is appended as one JSON line with one write(2) the moment it is made (the host
//! keeps power, so a written line survives the daemon). Some faults only become real if
//! the cut comes before the drive changes its mind: a held write that is destaged later is
//! not lost, and a damaged record that a later write overwrote is superseded, not
//! damaged. [`resolve`] replays the log and returns the faults that are real after the
//! cut. The format is documented in docs/fault-model.md.

use crate::record::{SECTOR, decode_stamp};
use serde::{Deserialize, Serialize};

const SECTOR_U64: u64 = SECTOR as u64;

/// What verify should report for an acknowledged record hit by a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The record's bytes never reached media: its place holds older content.
    Lost,
    /// Only a sector prefix of the record reached media.
    Shorn,
    /// The record reached media with flipped bits (see [`Fault::bits`]).
    Corrupt,
    /// The record landed elsewhere (at `to_offset`), or a foreign record landed here.
    Misdirected,
    /// Lost while a write that was submitted after this one's flush completed survived:
    /// an ordering hole (verify: lost plus a run-level hole finding).
    Hole,
    /// Reads of this range fail (EIO) or hang after the cut.
    Unreadable,
    /// The drive cannot be opened after the cut.
    Dead,
}

impl Class {
    /// Whether a later write reaching the range undoes the fault. Post-cut faults
    /// (unreadable, dead) name a range of the drive, not the bytes of a write.
    pub(crate) fn cancellable(self) -> bool {
        !matches!(self, Class::Unreadable | Class::Dead)
    }
}

/// The sectors of one plugpull record that a fault touches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordRef {
    /// Run id, hex.
    pub run: String,
    pub stream: u16,
    pub seq: u64,
    /// The record's own offset and length in sectors, from its stamp.
    pub record_offset: u64,
    pub record_sectors: u32,
    /// The touched sector indexes within the record, inclusive.
    pub first_index: u32,
    pub last_index: u32,
    /// Drive offset where sector `first_index` of this fault's bytes sits.
    pub at: u64,
}

/// One line of the oracle log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A drive session began (first start or power on). Faults of earlier sessions can no
    /// longer be undone by their own writes: the cache they lived in is gone.
    Start {
        seed: u64,
        profile: String,
        size_bytes: u64,
    },
    /// A fault. `conditional` faults (held writes) are undone if their own write is
    /// destaged later; every fault's sectors are undone by a later write reaching them.
    Fault {
        id: u64,
        class: Class,
        /// The drive's sequence number of the write the fault hit (0: not a write).
        write: u64,
        offset: u64,
        len: u64,
        #[serde(default)]
        records: Vec<RecordRef>,
        /// Corrupt: flipped bit positions, counted from `offset`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flips: Vec<u64>,
        /// Misdirected: where the write's bytes landed instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_offset: Option<u64>,
        #[serde(default)]
        conditional: bool,
    },
    /// Write `write`'s bytes (damaged, if a fault event says so) reached media at
    /// [offset, offset+len). Logged only when it undoes a fault.
    Destaged { write: u64, offset: u64, len: u64 },
    /// Write `write` was flushed over [offset, offset+len): from now on verify judges
    /// that later record there, so earlier records' faults in the range stop counting
    /// even if this write never reaches media. Logged only when it undoes a fault.
    Superseded { write: u64, offset: u64, len: u64 },
    /// Held fault `fault` became a real ordering hole: a write submitted after its flush
    /// completed reached media.
    HoleWitness { fault: u64 },
    /// Unflushed write `write` reached media over [offset, offset+len) while the older
    /// unflushed write `ahead_of` was still in cache only: writes in flight together
    /// landed out of order (profile option `batch_reorder_p`). Not a fault: neither
    /// write was flushed, so neither can have been acknowledged; a cut now may leave the
    /// newer one without the older.
    Reordered {
        write: u64,
        ahead_of: u64,
        offset: u64,
        len: u64,
    },
    /// A deterministic cut (SIGKILL leaves no such line; resolve does not need it).
    Cut,
}

/// A fault that is real after the cut.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub class: Class,
    /// Drive session (1 = first start) and write sequence number that suffered it.
    pub session: u64,
    pub write: u64,
    /// The range the fault was injected on; `sectors` of it are still affected.
    pub offset: u64,
    pub len: u64,
    pub sectors: u64,
    /// The plugpull records in the still-affected sectors (empty for non-plugpull data).
    pub records: Vec<RecordRef>,
    /// Corrupt: flipped bits still on media.
    pub bits: u64,
    pub to_offset: Option<u64>,
}

/// Names the plugpull records whose sectors make up `data`, found at drive offset `at`.
pub fn records_in(data: &[u8], at: u64) -> Vec<RecordRef> {
    let mut out: Vec<RecordRef> = Vec::new();
    for (i, sector) in data.chunks_exact(SECTOR).enumerate() {
        let Ok(st) = decode_stamp(sector) else {
            continue;
        };
        let here = at + i as u64 * SECTOR_U64;
        if let Some(last) = out.last_mut() {
            let next_at = last.at + (last.last_index - last.first_index + 1) as u64 * SECTOR_U64;
            if last.run == st.run.hex()
                && last.stream == st.record.stream
                && last.seq == st.record.seq
                && last.record_offset == st.record.offset
                && st.index == last.last_index + 1
                && next_at == here
            {
                last.last_index = st.index;
                continue;
            }
        }
        out.push(RecordRef {
            run: st.run.hex(),
            stream: st.record.stream,
            seq: st.record.seq,
            record_offset: st.record.offset,
            record_sectors: st.record.sectors,
            first_index: st.index,
            last_index: st.index,
            at: here,
        });
    }
    out
}

mod invariants;
mod log;
mod resolver;
#[cfg(test)]
mod tests;

pub use log::{OracleLog, read_events, resolve};
pub use resolver::{Resolver, resolve_events};
