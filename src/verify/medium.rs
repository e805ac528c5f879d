//! What the medium itself says about the runs on it: every sector plugpull writes carries
//! a stamp with its run id (src/record/), so a sample of sectors tells which run wrote
//! there. Verify uses it when the identity of a target does not settle which run it
//! holds: a copy of a target, a drive renamed beyond recognition.
//!
//! Only a sample is read (a few thousand sectors at most), so this is quick on any size
//! of drive; it can miss a run that left only a few records far from where it looks.
//! That is fine for its two uses: finding *a* stamp of a named run (its acked records'
//! own offsets are read), and proposing a run id when nothing else names one (the user
//! is told which run was chosen and why).

use crate::device::{AlignedBuf, Device};
use crate::record::{RunId, SECTOR, Stamp, content_matches, decode_stamp};
use std::collections::BTreeSet;
use std::io;
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
/// into `visit`, which returns true to stop; returns the sectors read. A read error or
/// end of device ends the sample: what was read so far stands. An error only when the
/// buffer for a block cannot be had: no sample was taken, which is not a sample that
/// found nothing.
pub(super) fn read_points(
    dev: &dyn Device,
    points: &BTreeSet<u64>,
    mut visit: impl FnMut(&[u8]) -> bool,
) -> io::Result<u64> {
    let block = (dev.logical_block_bytes() as u64).max(SECTOR as u64);
    let size = dev.size_bytes() / block * block;
    let mut buf = AlignedBuf::try_new(block as usize)?;
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
                return Ok(sectors);
            }
        }
    }
    Ok(sectors)
}

/// `count` sector-aligned points spread evenly over [start, end).
pub(super) fn spread(start: u64, end: u64, count: u64) -> impl Iterator<Item = u64> {
    let step = (end.saturating_sub(start) / count.max(1)).max(SECTOR as u64);
    (0..count)
        .map(move |i| start + i * step)
        .take_while(move |&p| p < end)
        .map(|p| p / SECTOR as u64 * SECTOR as u64)
}

/// Where to look for stamps of `log`'s run: the home of acknowledged records (the
/// newest ones and a spread of the rest), and a spread over the run's region.
#[cfg(test)]
pub fn run_points(log: &crate::model::RunLog) -> BTreeSet<u64> {
    let mut points = RunPoints::default();
    points.add(&log.acks);
    points.finish(&log.descriptor)
}

/// [`run_points`] gathered from the acks as they stream by, in ack order, holding at
/// most a few thousand offsets whatever the run's length: every `every`-th ack (the
/// step doubling, and the kept half thinned, each time they fill up) and the last ones.
#[derive(Debug)]
pub struct RunPoints {
    spread: Vec<u64>,
    every: u64,
    seen: u64,
    last: std::collections::VecDeque<u64>,
}

impl Default for RunPoints {
    fn default() -> RunPoints {
        RunPoints {
            spread: Vec::with_capacity(2 * ACK_POINTS),
            every: 1,
            seen: 0,
            last: std::collections::VecDeque::with_capacity(ACK_POINTS / 4),
        }
    }
}

impl RunPoints {
    pub fn add(&mut self, acks: &[crate::model::Ack]) {
        for a in acks {
            if self.seen % self.every == 0 {
                if self.spread.len() == 2 * ACK_POINTS {
                    // Keep the acks at multiples of the doubled step.
                    let kept: Vec<u64> = self.spread.iter().step_by(2).copied().collect();
                    self.spread = kept;
                    self.every *= 2;
                }
                if self.seen % self.every == 0 {
                    self.spread.push(a.record.offset);
                }
            }
            if self.last.len() == ACK_POINTS / 4 {
                self.last.pop_front();
            }
            self.last.push_back(a.record.offset);
            self.seen += 1;
        }
    }

    pub fn finish(self, d: &crate::model::RunDescriptor) -> BTreeSet<u64> {
        let mut points: BTreeSet<u64> = self.spread.into_iter().collect();
        points.extend(self.last);
        let s = &d.settings;
        points.extend(spread(
            s.region_offset,
            s.region_offset.saturating_add(s.region_bytes),
            SPREAD_POINTS,
        ));
        points
    }
}

/// Looks for any stamp of `run` at `points` (from [`run_points`]).
pub fn find_run(dev: &dyn Device, run: RunId, points: &BTreeSet<u64>) -> io::Result<Sample> {
    let mut found = false;
    let sectors = read_points(dev, points, |sector| {
        found = decode_stamp(sector).is_ok_and(|st| st.run == run);
        found
    })?;
    Ok(Sample {
        sectors,
        found,
        newest: None,
    })
}

/// The newest valid stamp (checksum and content intact) in a sample of the whole of
/// `dev`: its first MiB, a spread over all of it, and every power-of-two offset.
pub fn newest_stamp(dev: &dyn Device) -> io::Result<Sample> {
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
    })?;
    Ok(Sample {
        sectors,
        found: newest.is_some(),
        newest,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::mem::MemDevice;
    use crate::model::Ack;
    use crate::model::RunLog;
    use crate::record::RunKey;
    use crate::record::{RecordId, fill_record};

    /// Writes one 4 KiB record of `run` at `offset`, stamped `time`; returns its ack.
    fn put(dev: &MemDevice, run: RunId, offset: u64, time: u64) -> Ack {
        let record = RecordId {
            stream: 0,
            seq: time,
            offset,
            sectors: 8,
            write_time_ns: time,
        };
        let mut buf = vec![0u8; 4096];
        fill_record(&mut buf, &RunKey::new(run), run, &record);
        dev.write_at(&buf, offset).unwrap();
        Ack {
            record,
            flushed_ns: time,
        }
    }

    fn log(run: RunId, region: (u64, u64), acks: Vec<Ack>) -> RunLog {
        crate::verify::tests::log_in(run, region, acks)
    }

    #[test]
    fn find_run_sees_the_runs_stamp_and_no_other() {
        let (r1, r2) = (RunId([1; 16]), RunId([2; 16]));
        let dev = MemDevice::new(8 << 20);
        // One record of r1 deep in a 4 MiB region: found at its acked home.
        let a = put(&dev, r1, 3 << 20, 10);
        let l1 = log(r1, (1 << 20, 4 << 20), vec![a]);
        let s = find_run(&dev, r1, &run_points(&l1)).unwrap();
        assert!(s.found && s.sectors > 0, "{s:?}");
        // Another run's log over the same region: its stamps are not there.
        let l2 = log(r2, (1 << 20, 4 << 20), vec![]);
        let s = find_run(&dev, r2, &run_points(&l2)).unwrap();
        assert!(!s.found, "{s:?}");
        assert!(s.sectors >= SPREAD_POINTS, "sampled the region: {s:?}");
    }

    #[test]
    fn newest_stamp_is_the_newest_intact_one() {
        let (r1, r2) = (RunId([1; 16]), RunId([2; 16]));
        let dev = MemDevice::new(64 << 20);
        assert_eq!(
            newest_stamp(&dev).unwrap().newest,
            None,
            "a blank device has none"
        );
        put(&dev, r1, 0, 100);
        // Beyond the first MiB, at a power of two.
        put(&dev, r2, 16 << 20, 200);
        let s = newest_stamp(&dev).unwrap();
        assert_eq!(s.newest.map(|st| st.run), Some(r2), "{s:?}");
        // A damaged newer record does not count: its content fails its CRC.
        dev.edit(|b| b[(16 << 20) + 100] ^= 1);
        dev.edit(|b| {
            for i in 1..8 {
                b[(16 << 20) + i * 512 + 100] ^= 1;
            }
        });
        let s = newest_stamp(&dev).unwrap();
        assert_eq!(s.newest.map(|st| st.run), Some(r1), "{s:?}");
    }

    #[test]
    fn within_gives_up_on_a_hung_read() {
        /// A drive whose reads hang until the test lets them go, or `until` passes.
        struct Hung {
            reading: mpsc::Sender<()>,
            release: std::sync::Mutex<mpsc::Receiver<()>>,
            until: std::time::Instant,
        }
        impl Device for Hung {
            fn size_bytes(&self) -> u64 {
                1 << 20
            }
            fn logical_block_bytes(&self) -> u32 {
                512
            }
            fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
                Ok(())
            }
            fn flush(&self) -> std::io::Result<()> {
                Ok(())
            }
            fn read_at(&self, _: &mut [u8], _: u64) -> std::io::Result<()> {
                let _ = self.reading.send(());
                let release = self.release.lock().unwrap();
                let left = self
                    .until
                    .saturating_duration_since(std::time::Instant::now());
                let _ = release.recv_timeout(left);
                Ok(())
            }
        }
        let (reading, read_started) = mpsc::channel();
        let (release, released) = mpsc::channel();
        let t0 = std::time::Instant::now();
        let dev = Hung {
            reading,
            release: std::sync::Mutex::new(released),
            until: t0 + Duration::from_secs(60),
        };
        let limit = Duration::from_millis(100);
        let r = within(Arc::new(dev), limit, newest_stamp);
        let waited = t0.elapsed();
        assert!(r.is_none(), "a result from a drive whose reads hang");
        // Never before the limit; the upper bound only tells giving up from waiting for
        // the read, which hangs for a minute (then the result would not be None either).
        assert!(
            waited >= limit && waited < Duration::from_secs(30),
            "gave up after {waited:?} with a limit of {limit:?}"
        );
        assert!(
            read_started.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the read it gave up on was never made"
        );
        // Every read, this one and the rest, returns now.
        drop(release);
    }
}
