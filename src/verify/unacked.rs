//! Records of the run found on the target past each stream's last acknowledged record:
//! written, never acknowledged to the witness. After a cut these are the writes that
//! were in flight (not yet covered by a completed flush) and the flushed ones whose ack
//! had not reached the witness; the medium cannot tell the two apart, so they are
//! counted together, apart from the acknowledged records, and are never a failure.
//!
//! Where to look: the writer places every record from the run's seed
//! (`crate::placer`), so the places of a stream's records of seq `last + 1`, `last + 2`,
//! ... are known without their acks. The one thing the descriptor lacks is the
//! alignment the writer placed them with (512, or the device's block size under
//! O_DIRECT): each candidate is tried and the one that puts every stream's last
//! acknowledged record exactly where its ack says is kept. No candidate fits (a log
//! whose acks do not follow the run's placement, as a library caller may build): then
//! nothing is counted, never a guess.
//!
//! How far: up to the writer's `max_records_unacked` records past the last ack (at most
//! [`MAX_LOOKED_FOR`]), stopping once [`gap`] records in a row are not found. A record
//! not found may have been in flight and lost, or never written: the count says only
//! what was found.

use super::beyond::LastPerStream;
use crate::device::{AlignedBuf, Device};
use crate::model::{Placement, RunDescriptor};
use crate::placer::{Layout, Placer};
use crate::record::{SECTOR, content_matches, decode_stamp};
use serde::Serialize;

/// The most records looked for past one stream's last ack.
pub const MAX_LOOKED_FOR: u64 = 1 << 16;
/// The most records replayed to find where a stream's next record goes when its places
/// must be drawn one by one (random placement, or sizes that vary): past it nothing is
/// counted. Why: a last ack of seq 2^40 (a forged or damaged log) would otherwise hold
/// verify forever; at about 10 ns a draw this is seconds, for a count never judged.
pub const MAX_REPLAYED: u64 = 1 << 27;
/// Records in a row not found after which a stream is looked at no further, at least.
pub const MIN_GAP: u64 = 64;

/// What was found of the run past the acks (docs/report.md, `unacked_found`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UnackedFound {
    /// Records of the run with at least one sector found intact at its place (its own
    /// stamp, content matching the stamp), seq past its stream's last acknowledged one.
    pub records: u64,
    /// Of those, the ones found with every sector intact...
    pub whole: u64,
    /// ...and the ones found in part (a write the cut tore, or one partly overwritten).
    pub partial: u64,
    /// Places looked at: records past the last ack whose place was read.
    pub looked_for: u64,
    /// The highest seq found past the last ack, per stream (streams with none left out).
    pub newest: Vec<(u16, u64)>,
}

/// Records in a row not found after which a stream is looked at no further: the most a
/// stream can have in flight (the depth, plus the writes the next flush would cover),
/// and never fewer than [`MIN_GAP`] (a sync writer's `--batch` is not recorded).
pub fn gap(d: &RunDescriptor) -> u64 {
    let io = &d.settings.io;
    let window = io.iodepth.unwrap_or(1) as u64 + io.flush_every.unwrap_or(0) as u64;
    window.max(MIN_GAP)
}

/// Counts the records of `d`'s run found on `dev` past the last acks in `last`. None
/// when the run's records cannot be placed (a tree run, an unknown placement, acks that
/// do not follow the placement). An error only when no read buffer could be had.
pub fn count_unacked(
    dev: &dyn Device,
    d: &RunDescriptor,
    last: &LastPerStream,
) -> std::io::Result<Option<UnackedFound>> {
    if d.tree.is_some() {
        return Ok(None);
    }
    let Some(layout) = layout_of(d, last) else {
        return Ok(None);
    };
    let block = (dev.logical_block_bytes() as u64).max(SECTOR as u64);
    let mut buf = AlignedBuf::try_new((layout.record_max + 2 * block) as usize)?;
    let looking = d
        .settings
        .max_records_unacked
        .unwrap_or(MAX_LOOKED_FOR)
        .min(MAX_LOOKED_FOR);
    let gap = gap(d);
    let mut found = UnackedFound::default();
    for stream in 0..layout.streams {
        let acked = last.of(stream).map_or(0, |a| a.record.seq);
        let Some(mut placer) = placer_after(&layout, stream, acked) else {
            return Ok(None);
        };
        let (mut misses, mut newest) = (0, None);
        for seq in acked + 1..=acked.saturating_add(looking) {
            let (offset, len) = placer.next_record();
            let Some(intact) = intact_sectors(dev, &mut buf, block, d, stream, seq, offset, len)
            else {
                break;
            };
            found.looked_for += 1;
            if intact == 0 {
                misses += 1;
                if misses >= gap {
                    break;
                }
                continue;
            }
            misses = 0;
            newest = Some(seq);
            found.records += 1;
            if intact == len / SECTOR as u64 {
                found.whole += 1;
            } else {
                found.partial += 1;
            }
        }
        if let Some(seq) = newest {
            found.newest.push((stream, seq));
        }
    }
    Ok(Some(found))
}

/// The sectors of record `seq` of `stream` found intact at `[offset, offset + len)`;
/// None when they cannot be read (past the device's end, a failed read).
#[allow(clippy::too_many_arguments)]
fn intact_sectors(
    dev: &dyn Device,
    buf: &mut AlignedBuf,
    block: u64,
    d: &RunDescriptor,
    stream: u16,
    seq: u64,
    offset: u64,
    len: u64,
) -> Option<u64> {
    let at = offset / block * block;
    let end = (offset + len).div_ceil(block) * block;
    if end > dev.size_bytes() / block * block {
        return None;
    }
    let read = &mut buf[..(end - at) as usize];
    dev.read_at(read, at).ok()?;
    let skip = (offset - at) as usize;
    let sectors = read[skip..skip + len as usize].chunks_exact(SECTOR);
    let intact = sectors.enumerate().filter(|(i, sector)| {
        decode_stamp(sector).is_ok_and(|st| {
            st.run == d.run_id
                && st.record.stream == stream
                && st.record.seq == seq
                && st.home() == offset + *i as u64 * SECTOR as u64
                && content_matches(sector, &st)
        })
    });
    Some(intact.count() as u64)
}

/// The layout the writer placed `d`'s records with: the alignment that puts each
/// stream's last acknowledged record where its ack says (module docs).
fn layout_of(d: &RunDescriptor, last: &LastPerStream) -> Option<Layout> {
    let s = &d.settings;
    let placement: Placement = s.placement.parse().ok()?;
    let mut aligns = vec![512u64];
    if s.direct {
        let at_write = d.device.logical_sector_bytes.map(u64::from);
        aligns = at_write
            .into_iter()
            .chain((9..=16).map(|b| 1u64 << b))
            .collect();
    }
    aligns.into_iter().find_map(|align| {
        let layout = Layout {
            region_offset: s.region_offset,
            region_bytes: s.region_bytes,
            record_min: s.record_bytes_min,
            record_max: s.record_bytes_max,
            placement,
            streams: s.streams,
            seed: s.seed,
            align,
        };
        let fits = align >= SECTOR as u64
            && align.is_power_of_two()
            && s.streams > 0
            && s.record_bytes_min >= align
            && s.record_bytes_min <= s.record_bytes_max
            && s.record_bytes_min % align == 0
            && s.record_bytes_max % align == 0
            && s.region_offset % align == 0
            && layout.share_bytes() >= s.record_bytes_max;
        (fits && places_last_acks(&layout, last)).then_some(layout)
    })
}

/// Whether `layout` puts every stream's last acknowledged record where its ack says.
fn places_last_acks(layout: &Layout, last: &LastPerStream) -> bool {
    (0..layout.streams).all(|stream| {
        let Some(a) = last.of(stream) else {
            return true;
        };
        let Some(before) = a.record.seq.checked_sub(1) else {
            return false;
        };
        placer_after(layout, stream, before)
            .is_some_and(|mut p| p.next_record() == (a.record.offset, a.record.len_bytes()))
    })
}

/// A placer of `stream` past its first `n` records; None when getting there would
/// replay more than [`MAX_REPLAYED`] draws.
fn placer_after(layout: &Layout, stream: u16, n: u64) -> Option<Placer> {
    let mut placer = Placer::new(layout, stream);
    if !placer.skip_arithmetic(n) {
        if n > MAX_REPLAYED {
            return None;
        }
        for _ in 0..n {
            placer.next_record();
        }
    }
    Some(placer)
}
