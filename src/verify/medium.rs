//! What the medium itself says about the runs on it: every sector plugpull writes carries
//! a stamp with its run id (src/record.rs), so a sample of sectors tells which run wrote
//! there. Verify uses it when the identity of a target does not settle which run it
//! holds: a copy of a target, a drive renamed beyond recognition.
//!
//! Only a sample is read (a few thousand sectors at most), so this is quick on any size
//! of drive; it can miss a run that left only a few records far from where it looks.
//! That is fine for its two uses: finding *a* stamp of a named run (its acked records'
//! own offsets are read), and proposing a run id when nothing else names one (the user
//! is told which run was chosen and why).

use crate::ack::RunLog;
use crate::device::{AlignedBuf, Device};
use crate::record::{RunId, SECTOR, Stamp, content_matches, decode_stamp};
use std::collections::BTreeSet;
use std::sync::{Arc, mpsc};
use std::time::Duration;

/// Points spread evenly over a range when sampling it.
const SPREAD_POINTS: u64 = 1024;
/// Acknowledged records whose home sector is read when looking for a run's stamps.
const ACK_POINTS: usize = 1024;
/// Read whole at the start of the target: most runs start at offset 0.
const HEAD_BYTES: u64 = 1 << 20;

/// What a sample of the medium found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Sectors read.
    pub sectors: u64,
    /// For [`find_run`]: whether a stamp of the run was among them.
    pub found: bool,
    /// For [`newest_stamp`]: the newest valid stamp (by its write time) among them.
    pub newest: Option<Stamp>,
}

/// Reads the sectors at `points` (sector-aligned byte offsets) and folds every sector
/// into `visit`, which returns true to stop. A read error or end of device ends the
/// sample: what was read so far stands.
fn read_points(
    dev: &dyn Device,
    points: &BTreeSet<u64>,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> u64 {
    let block = (dev.logical_block_bytes() as u64).max(SECTOR as u64);
    let size = dev.size_bytes() / block * block;
    let mut buf = AlignedBuf::new(block as usize);
    let (mut sectors, mut last_block) = (0u64, None);
    for &p in points {
        let at = p / block * block;
        if at + block > size {
            break;
        }
        if last_block == Some(at) {
            continue;
        }
        last_block = Some(at);
        if dev.read_at(&mut buf, at).is_err() {
            break;
        }
        for s in buf.chunks_exact(SECTOR) {
            sectors += 1;
            if visit(s) {
                return sectors;
            }
        }
    }
    sectors
}

/// `count` sector-aligned points spread evenly over [start, end).
fn spread(start: u64, end: u64, count: u64) -> impl Iterator<Item = u64> {
    let step = (end.saturating_sub(start) / count.max(1)).max(SECTOR as u64);
    (0..count)
        .map(move |i| start + i * step)
        .take_while(move |&p| p < end)
        .map(|p| p / SECTOR as u64 * SECTOR as u64)
}

/// Where to look for stamps of `log`'s run: the home of acknowledged records (the
/// newest ones and a spread of the rest), and a spread over the run's region.
pub fn run_points(log: &RunLog) -> BTreeSet<u64> {
    let acks = &log.acks;
    let every = (acks.len() / ACK_POINTS).max(1);
    let mut points: BTreeSet<u64> = acks
        .iter()
        .step_by(every)
        .map(|a| a.record.offset)
        .collect();
    points.extend(
        acks.iter()
            .rev()
            .take(ACK_POINTS / 4)
            .map(|a| a.record.offset),
    );
    let s = &log.descriptor.settings;
    points.extend(spread(
        s.region_offset,
        s.region_offset.saturating_add(s.region_bytes),
        SPREAD_POINTS,
    ));
    points
}

/// Looks for any stamp of `run` at `points` (from [`run_points`]).
pub fn find_run(dev: &dyn Device, run: RunId, points: &BTreeSet<u64>) -> Sample {
    let mut found = false;
    let sectors = read_points(dev, points, |sector| {
        found = decode_stamp(sector).is_ok_and(|st| st.run == run);
        found
    });
    Sample {
        sectors,
        found,
        newest: None,
    }
}

/// The newest valid stamp (checksum and content intact) in a sample of the whole of
/// `dev`: its first MiB, a spread over all of it, and every power-of-two offset.
pub fn newest_stamp(dev: &dyn Device) -> Sample {
    let size = dev.size_bytes();
    let mut points: BTreeSet<u64> = (0..HEAD_BYTES.min(size)).step_by(SECTOR).collect();
    points.extend(spread(0, size, SPREAD_POINTS));
    points.extend((20..64).map(|k| 1u64 << k).take_while(|&p| p < size));
    let mut newest: Option<Stamp> = None;
    let sectors = read_points(dev, &points, |sector| {
        if let Ok(st) = decode_stamp(sector) {
            let newer = newest.is_none_or(|n| st.record.write_time_ns > n.record.write_time_ns);
            if newer && content_matches(sector, &st) {
                newest = Some(st);
            }
        }
        false
    });
    Sample {
        sectors,
        found: newest.is_some(),
        newest,
    }
}

/// Runs `f` on `dev` in a thread and gives up after `limit` (a drive that hangs on
/// reads must not hang verify): None then. The thread is left to finish on its own.
pub fn within<T: Send + 'static>(
    dev: Arc<dyn Device>,
    limit: Duration,
    f: impl FnOnce(&dyn Device) -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f(&*dev));
    });
    rx.recv_timeout(limit).ok()
}
