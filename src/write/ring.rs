//! Each stream's ring of record buffers: how many (and why that many), and their
//! allocation. Every stream's ring is allocated before any stream starts: a machine
//! without the memory (large records, a deep batch, many streams) refuses the run
//! before anything is written, with the sizes that needed it, instead of the writer
//! dying in the middle of a run whose acks the witness already holds.

use super::plan::Plan;
use crate::device::AlignedBuf;
use crate::record::RecordId;

/// A record whose content is ready; only its write time remains to be stamped.
pub(super) struct Prepared {
    pub buf: AlignedBuf,
    pub rec: RecordId,
}

/// Record buffers per stream (at least twice the batch): the generator refills half of
/// them at a time, so it sleeps and is woken once per half ring. Small records get more
/// buffers, up to [`RING_BYTES`]: with 32 buffers of 4 KiB the generator, faster than the
/// I/O thread, slept and was woken every 16 records, most of the futex calls left.
pub(super) const BUFFERS_PER_STREAM: usize = 32;
/// The ring's size in bytes when its records are small enough to fill more than
/// [`BUFFERS_PER_STREAM`] buffers. Why this large (perf per thread on
/// /dev/shm, 4 KiB records): with 256 KiB the generator rewrote buffers whose lines the
/// I/O thread's copy had just pulled to the other core, and its content fill took
/// 1.4-2.2 µs a record instead of 0.4 (it set the pace some runs); and every wake-up of
/// the generator, once per 32 records, cost the I/O thread an inter-processor interrupt
/// (`_raw_spin_unlock_irqrestore`, 0.14 µs a record). With 4 MiB the generator's fill
/// took 0.39 µs, the wake-ups vanished from the profile, and the I/O thread went from
/// 1.85-2.2 to 1.66-1.71 µs a record.
pub(super) const RING_BYTES: u64 = 4 << 20;
/// At most this many buffers: each takes a 4 KiB-aligned allocation, so records smaller
/// than 4 KiB would otherwise take far more memory than [`RING_BYTES`].
const MAX_BUFFERS: usize = 1024;

/// Buffers in a stream's ring for records up to `record_max` bytes.
pub(super) fn ring_buffers(record_max: u64) -> usize {
    let fit = (RING_BYTES / record_max.max(1)).min(MAX_BUFFERS as u64) as usize;
    BUFFERS_PER_STREAM.max(fit)
}

/// Every stream's ring, allocated: what [`super::engine::run_streams_with`] writes from.
pub struct RecordBuffers {
    pub(super) batch: usize,
    pub(super) rings: Vec<Vec<Prepared>>,
}

impl RecordBuffers {
    /// The rings of `plan`'s streams writing `batch` records per flush (at least 1), or
    /// why the memory could not be had.
    pub fn allocate(plan: &Plan, batch: usize) -> Result<RecordBuffers, NoBufferMemory> {
        let batch = batch.max(1);
        let per_stream = ring_buffers(plan.record_max).max(2 * batch);
        let blank = |stream| RecordId {
            stream,
            seq: 0,
            offset: 0,
            sectors: 0,
            write_time_ns: 0,
        };
        let no_memory = |source| NoBufferMemory {
            streams: plan.streams,
            per_stream,
            record_bytes: plan.record_max,
            source,
        };
        let rings = (0..plan.streams)
            .map(|stream| {
                (0..per_stream)
                    .map(|_| {
                        Ok(Prepared {
                            buf: AlignedBuf::try_new(plan.record_max as usize)?,
                            rec: blank(stream),
                        })
                    })
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(no_memory)?;
        Ok(RecordBuffers { batch, rings })
    }
}

/// The writer's record buffers could not be allocated: nothing was written.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot allocate the writer's record buffers ({}), so nothing was written: give smaller records, a smaller batch or fewer streams",
    self.sizes()
)]
pub struct NoBufferMemory {
    pub streams: u16,
    pub per_stream: usize,
    pub record_bytes: u64,
    #[source]
    pub source: std::io::Error,
}

impl NoBufferMemory {
    /// "2 streams of 32 buffers of 64.0 MiB".
    fn sizes(&self) -> String {
        format!(
            "{} stream{} of {} buffers of {}",
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            self.per_stream,
            crate::units::fmt_bytes(self.record_bytes)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring is large enough that the generator is woken rarely (every half ring)
    /// and rewrites buffers the I/O thread's core has moved on from, yet bounded in
    /// memory whatever the record size (each buffer takes at least 4 KiB).
    #[test]
    fn a_stream_ring_is_large_for_small_records_and_bounded_for_all() {
        for record in [512u64, 4096, 8192, 65536, 1 << 20, 8 << 20] {
            let n = ring_buffers(record);
            let footprint = n as u64 * record.max(4096);
            assert!(n >= BUFFERS_PER_STREAM, "{record}: {n} buffers");
            assert!(
                footprint <= (RING_BYTES).max(BUFFERS_PER_STREAM as u64 * record),
                "{record}: {footprint} bytes"
            );
            if record <= 4096 {
                assert!(n >= 1024, "{record}: woken every {} records", n / 2);
            }
        }
    }
}
