//! What a run writes where: the plan, checked before anything is written. Where each
//! record goes is `crate::placer` (the region split into one equal, disjoint share per
//! stream, so streams never overwrite each other and verify can reason about each
//! location's history within one stream's sequence numbers).

use crate::model::Placement;
pub use crate::placer::{Layout, Placer};
use crate::record::RunId;
use std::time::Duration;

/// A plan that cannot be written, and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--streams must be at least 1")]
    NoStreams,
    #[error("block size {0} is not a power of two >= 512")]
    BadBlockSize(u64),
    #[error("record sizes must be multiples of the device's block size ({0} bytes) for direct I/O")]
    RecordsNotAligned(u64),
    #[error("--offset must be a multiple of {0} bytes")]
    OffsetNotAligned(u64),
    #[error(
        "the region ({region_bytes} bytes) is too small for {streams} stream(s) of records up to {record_max} bytes: use a larger --size, fewer --streams or smaller --record-size"
    )]
    RegionTooSmall {
        region_bytes: u64,
        streams: u16,
        record_max: u64,
    },
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub run: RunId,
    pub region_offset: u64,
    pub region_bytes: u64,
    pub record_min: u64,
    pub record_max: u64,
    pub placement: Placement,
    pub streams: u16,
    pub seed: u64,
    /// Every offset and size is a multiple of this (>= 512, the device's block size).
    pub align: u64,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

impl Plan {
    /// What places the plan's records (`placer`).
    pub fn layout(&self) -> Layout {
        Layout {
            region_offset: self.region_offset,
            region_bytes: self.region_bytes,
            record_min: self.record_min,
            record_max: self.record_max,
            placement: self.placement,
            streams: self.streams,
            seed: self.seed,
            align: self.align,
        }
    }

    /// Bytes of the region each stream owns.
    pub fn share_bytes(&self) -> u64 {
        self.layout().share_bytes()
    }

    /// Where stream `stream`'s records go, seq 1 first.
    pub fn placer(&self, stream: u16) -> Placer {
        Placer::new(&self.layout(), stream)
    }

    /// Checks the plan makes sense, with messages that say what to change.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.streams == 0 {
            return Err(PlanError::NoStreams);
        }
        if self.align < 512 || !self.align.is_power_of_two() {
            return Err(PlanError::BadBlockSize(self.align));
        }
        if self.record_min % self.align != 0 || self.record_max % self.align != 0 {
            return Err(PlanError::RecordsNotAligned(self.align));
        }
        if self.region_offset % self.align != 0 {
            return Err(PlanError::OffsetNotAligned(self.align));
        }
        if self.share_bytes() < self.record_max {
            return Err(PlanError::RegionTooSmall {
                region_bytes: self.region_bytes,
                streams: self.streams,
                record_max: self.record_max,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(placement: Placement, streams: u16, min: u64, max: u64) -> Plan {
        Plan {
            run: RunId([1; 16]),
            region_offset: 4096,
            region_bytes: 1 << 20,
            record_min: min,
            record_max: max,
            placement,
            streams,
            seed: 5,
            align: 512,
            count: None,
            duration: None,
        }
    }

    #[test]
    fn records_stay_in_their_stream_share() {
        for placement in [Placement::Sequential, Placement::Random] {
            let p = plan(placement, 3, 512, 64 * 1024);
            p.validate().unwrap();
            let share = p.share_bytes();
            for s in 0..3u16 {
                let mut pl = p.placer(s);
                let lo = p.region_offset + s as u64 * share;
                for _ in 0..2000 {
                    let (o, l) = pl.next_record();
                    assert!(
                        o >= lo && o + l <= lo + share,
                        "{placement:?} stream {s}: {o}+{l}"
                    );
                    assert_eq!(o % 512, 0);
                    assert!((512..=65536).contains(&l) && l % 512 == 0);
                }
            }
        }
    }

    #[test]
    fn sequential_starts_at_region_start_and_wraps() {
        let p = plan(Placement::Sequential, 1, 4096, 4096);
        let mut pl = p.placer(0);
        assert_eq!(pl.next_record(), (4096, 4096));
        assert_eq!(pl.next_record(), (8192, 4096));
        let per_lap = p.share_bytes() / 4096;
        for _ in 2..per_lap {
            pl.next_record();
        }
        assert_eq!(pl.next_record(), (4096, 4096), "wraps to the start");
    }

    #[test]
    fn same_seed_same_placement() {
        let p = plan(Placement::Random, 2, 512, 8192);
        let a: Vec<_> = (0..50)
            .scan(p.placer(1), |pl, _| Some(pl.next_record()))
            .collect();
        let b: Vec<_> = (0..50)
            .scan(p.placer(1), |pl, _| Some(pl.next_record()))
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn too_small_region_is_explained() {
        let mut p = plan(Placement::Sequential, 4, 4096, 4096);
        p.region_bytes = 8192;
        assert!(p.validate().unwrap_err().to_string().contains("too small"));
    }
}
