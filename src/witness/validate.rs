//! What a run descriptor and its acks must look like for a plugpull writer to have sent
//! them. The witness refuses anything else before it stores it; verify refuses to judge
//! a log that holds anything else.
//!
//! Why: an ack is a promise verify checks byte by byte. An entry no writer can produce
//! (0 sectors, 2³²−1 sectors, an unaligned offset, a stream the run does not have) was
//! made durable and then judged: a 0-sector ack counted as intact, a 2 TiB one cost
//! verify 43 s of CPU. These rules are what the writer guarantees by construction
//! (src/write/plan.rs): sector-aligned records within the region, sizes within the
//! run's record-size range, streams numbered below the run's count, and each stream's
//! sequence numbers rising in the order its acks are sent (verify's "later record"
//! rule relies on that). Every check costs a few comparisons per ack.
//!
//! Not checked, because the descriptor does not say enough: which stream's share of the
//! region a record lies in (the shares depend on the device's block size, which the
//! descriptor does not carry), and the writer's clocks.

use crate::model::{Ack, FileName, RunDescriptor, RunLog};
use crate::record::{RecordId, RunId, SECTOR};
use std::collections::HashMap;

const SECTOR_BYTES: u64 = SECTOR as u64;

/// Why a run descriptor cannot come from a plugpull writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescriptorFault {
    NoStreams,
    /// A record size that is 0 or not a whole number of sectors.
    RecordSizeNotSectors {
        bytes: u64,
    },
    MinAboveMax {
        min: u64,
        max: u64,
    },
    /// A record this large does not fit the 32-bit sector count of an ack.
    RecordTooLarge {
        bytes: u64,
    },
    RegionOffsetUnaligned {
        offset: u64,
    },
    RegionEndOverflows {
        offset: u64,
        bytes: u64,
    },
    /// Each stream's share of the region must hold the largest record.
    RegionTooSmall {
        region_bytes: u64,
        streams: u16,
        record_max: u64,
    },
}

impl std::fmt::Display for DescriptorFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DescriptorFault::NoStreams => f.write_str("it has 0 streams (at least 1)"),
            DescriptorFault::RecordSizeNotSectors { bytes } => write!(
                f,
                "its record size {bytes} is not a positive multiple of {SECTOR} bytes"
            ),
            DescriptorFault::MinAboveMax { min, max } => write!(
                f,
                "its smallest record size ({min} bytes) is above its largest ({max} bytes)"
            ),
            DescriptorFault::RecordTooLarge { bytes } => write!(
                f,
                "its largest record ({bytes} bytes) has more sectors than an ack can carry \
                 (2^32 - 1)"
            ),
            DescriptorFault::RegionOffsetUnaligned { offset } => write!(
                f,
                "its region offset {offset} is not a multiple of {SECTOR} bytes"
            ),
            DescriptorFault::RegionEndOverflows { offset, bytes } => write!(
                f,
                "its region ({bytes} bytes at offset {offset}) ends past the largest byte \
                 offset"
            ),
            DescriptorFault::RegionTooSmall {
                region_bytes,
                streams,
                record_max,
            } => write!(
                f,
                "its region ({region_bytes} bytes) cannot give each of its {streams} streams \
                 room for a {record_max}-byte record"
            ),
        }
    }
}

/// Why one ack cannot come from the writer of its run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckFault {
    StreamBeyondRun {
        streams: u16,
    },
    /// Sectors outside the run's record-size range (0 and 2³²−1 included).
    SizeOutOfRange {
        min: u32,
        max: u32,
    },
    OffsetUnaligned,
    OutsideRegion {
        start: u64,
        end: u64,
    },
    /// Not above the previous seq of the same stream.
    SeqNotRising {
        previous: u64,
    },
    /// A tree run's ack (a whole file, docs/tree.md) at an offset other than 0.
    FileNotAtZero,
    /// A file entry (FileAcks) in a run that writes no tree.
    FileEntryNotTree,
    /// A file entry whose path or temporary name no tree writer produces.
    BadFileName(NameFault),
}

/// Why a path in a file entry cannot come from a tree writer: it names a file below the
/// run's tree root, so it is relative, stays inside the root and is a name Linux takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameFault {
    Empty,
    Absolute,
    /// A `..` component (it would leave the tree root).
    ParentComponent,
    /// An empty or `.` component (`a//b`, `a/./b`, a trailing `/`).
    EmptyComponent,
    Nul,
    TooLong {
        bytes: usize,
    },
    /// The temporary name is the final path itself.
    SameAsPath,
}

impl std::fmt::Display for NameFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameFault::Empty => f.write_str("is empty"),
            NameFault::Absolute => {
                f.write_str("is absolute (it must be relative to the tree root)")
            }
            NameFault::ParentComponent => f.write_str("has a '..' component"),
            NameFault::EmptyComponent => f.write_str("has an empty or '.' component"),
            NameFault::Nul => f.write_str("holds a NUL byte"),
            NameFault::TooLong { bytes } => write!(
                f,
                "is {bytes} bytes long, more than {}",
                crate::wire::file_acks::MAX_FILE_PATH_BYTES
            ),
            NameFault::SameAsPath => f.write_str("is the final path itself"),
        }
    }
}

/// The path rule of file entries (docs/protocol.md, FileAcks).
pub fn check_file_path(p: &str) -> Result<(), NameFault> {
    if p.is_empty() {
        return Err(NameFault::Empty);
    }
    if p.len() > crate::wire::file_acks::MAX_FILE_PATH_BYTES {
        return Err(NameFault::TooLong { bytes: p.len() });
    }
    if p.contains('\0') {
        return Err(NameFault::Nul);
    }
    if p.starts_with('/') {
        return Err(NameFault::Absolute);
    }
    for c in p.split('/') {
        match c {
            ".." => return Err(NameFault::ParentComponent),
            "" | "." => return Err(NameFault::EmptyComponent),
            _ => {}
        }
    }
    Ok(())
}

/// The rules of a file entry's names: the path, and the temporary name if any.
fn check_file_name(n: &FileName) -> Result<(), NameFault> {
    check_file_path(&n.path)?;
    if let Some(t) = &n.renamed_from {
        check_file_path(t)?;
        if *t == n.path {
            return Err(NameFault::SameAsPath);
        }
    }
    Ok(())
}

/// Checks the names of a FileAcks batch numbered from `first` (one per ack): only a tree
/// run sends file entries, and each names a file below its tree root. The acks
/// themselves are checked by [`SeqTracker::check_batch`].
pub fn check_file_names(
    rules: &AckRules,
    first: u64,
    acks: &[Ack],
    names: &[FileName],
) -> Result<(), Violation> {
    for (i, (a, n)) in acks.iter().zip(names).enumerate() {
        let fault = if !rules.files {
            AckFault::FileEntryNotTree
        } else if let Err(f) = check_file_name(n) {
            AckFault::BadFileName(f)
        } else {
            continue;
        };
        return Err(Violation {
            ack: first + i as u64,
            record: a.record,
            fault,
        });
    }
    Ok(())
}

/// The first ack of a batch or log that breaks a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Its ack number in the run.
    pub ack: u64,
    pub record: RecordId,
    pub fault: AckFault,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.record;
        write!(
            f,
            "ack {} (stream {}, seq {}, {} sectors at offset {}) ",
            self.ack, r.stream, r.seq, r.sectors, r.offset
        )?;
        match &self.fault {
            AckFault::StreamBeyondRun { streams } => {
                write!(f, "names stream {} but the run has {streams}", r.stream)
            }
            AckFault::SizeOutOfRange { min, max } => write!(
                f,
                "has {} sectors but the run's records are {min} to {max} sectors",
                r.sectors
            ),
            AckFault::OffsetUnaligned => {
                write!(f, "has an offset that is not a multiple of {SECTOR} bytes")
            }
            AckFault::OutsideRegion { start, end } => write!(
                f,
                "lies outside the run's region [{start}, {end}) of the target"
            ),
            AckFault::SeqNotRising { previous } => write!(
                f,
                "does not follow seq {previous} of its stream: a stream's seqs rise with \
                 every ack"
            ),
            AckFault::FileNotAtZero => write!(
                f,
                "is a file of a tree run at offset {}: a file entry starts at offset 0",
                r.offset
            ),
            AckFault::FileEntryNotTree => f.write_str(
                "is a file entry, but the run writes no tree: only tree runs name files",
            ),
            AckFault::BadFileName(n) => write!(f, "is a file entry whose name {n}"),
        }
    }
}

/// The limits a run's acks must keep, from a checked descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckRules {
    streams: u16,
    min_sectors: u32,
    max_sectors: u32,
    region_start: u64,
    region_end: u64,
    /// A tree run: every ack is a whole file, at offset 0.
    files: bool,
}

impl AckRules {
    /// Checks the descriptor and returns its acks' limits.
    pub fn for_run(d: &RunDescriptor) -> Result<AckRules, DescriptorFault> {
        let s = &d.settings;
        if s.streams == 0 {
            return Err(DescriptorFault::NoStreams);
        }
        for bytes in [s.record_bytes_min, s.record_bytes_max] {
            if bytes == 0 || bytes % SECTOR_BYTES != 0 {
                return Err(DescriptorFault::RecordSizeNotSectors { bytes });
            }
        }
        if s.record_bytes_min > s.record_bytes_max {
            return Err(DescriptorFault::MinAboveMax {
                min: s.record_bytes_min,
                max: s.record_bytes_max,
            });
        }
        let max_sectors = u32::try_from(s.record_bytes_max / SECTOR_BYTES).map_err(|_| {
            DescriptorFault::RecordTooLarge {
                bytes: s.record_bytes_max,
            }
        })?;
        if s.region_offset % SECTOR_BYTES != 0 {
            return Err(DescriptorFault::RegionOffsetUnaligned {
                offset: s.region_offset,
            });
        }
        let region_end = s.region_offset.checked_add(s.region_bytes).ok_or(
            DescriptorFault::RegionEndOverflows {
                offset: s.region_offset,
                bytes: s.region_bytes,
            },
        )?;
        // The writer's rule (Plan::validate) with the smallest block size it allows; a
        // larger block size only makes the shares smaller.
        let share = s.region_bytes / s.streams as u64 / SECTOR_BYTES * SECTOR_BYTES;
        if share < s.record_bytes_max {
            return Err(DescriptorFault::RegionTooSmall {
                region_bytes: s.region_bytes,
                streams: s.streams,
                record_max: s.record_bytes_max,
            });
        }
        Ok(AckRules {
            streams: s.streams,
            min_sectors: (s.record_bytes_min / SECTOR_BYTES) as u32,
            max_sectors,
            region_start: s.region_offset,
            region_end,
            files: d.tree.is_some(),
        })
    }

    /// The rules that need no other ack: stream, size, alignment, region.
    pub fn check(&self, r: &RecordId) -> Result<(), AckFault> {
        if r.stream >= self.streams {
            return Err(AckFault::StreamBeyondRun {
                streams: self.streams,
            });
        }
        if r.sectors < self.min_sectors || r.sectors > self.max_sectors {
            return Err(AckFault::SizeOutOfRange {
                min: self.min_sectors,
                max: self.max_sectors,
            });
        }
        if r.offset % SECTOR_BYTES != 0 {
            return Err(AckFault::OffsetUnaligned);
        }
        if self.files && r.offset != 0 {
            return Err(AckFault::FileNotAtZero);
        }
        let end = r.offset.checked_add(r.len_bytes());
        if r.offset < self.region_start || end.is_none_or(|e| e > self.region_end) {
            return Err(AckFault::OutsideRegion {
                start: self.region_start,
                end: self.region_end,
            });
        }
        Ok(())
    }
}

/// The last seq seen per stream, so each stream's seqs can be checked to rise across
/// batches. A stream not seen yet accepts any seq.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    last: HashMap<u16, u64, ByStream>,
    /// Seqs of the batch being checked; merged into `last` only when the whole batch
    /// passes, so a refused batch leaves the tracker as it was.
    batch: HashMap<u16, u64, ByStream>,
}

/// Hashes a stream number with one multiply. Why not the default SipHash: verify
/// checks every ack of a run here (millions), and SipHash per lookup was about a
/// quarter of its first pass over 512 B records (docs/performance.md "Verify read
/// speed"). Stream numbers come from the log, but a map of at most 65,536 keys has no
/// flooding to fear.
type ByStream = std::hash::BuildHasherDefault<StreamHasher>;

#[derive(Clone, Copy, Debug, Default)]
struct StreamHasher(u64);

impl std::hash::Hasher for StreamHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u16(&mut self, v: u16) {
        self.0 = (self.0 ^ v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl SeqTracker {
    /// Forgets every stream (the acks it saw are no longer the log's).
    pub fn reset(&mut self) {
        self.last.clear();
    }

    /// Checks `acks`, numbered from `first`, against `rules` and the seqs seen so far.
    /// All or nothing: on success the tracker has seen them, on failure nothing changed.
    pub fn check_batch(
        &mut self,
        rules: &AckRules,
        first: u64,
        acks: &[Ack],
    ) -> Result<(), Violation> {
        self.batch.clear();
        for (i, a) in acks.iter().enumerate() {
            let r = &a.record;
            let prev = self
                .batch
                .get(&r.stream)
                .or_else(|| self.last.get(&r.stream))
                .copied();
            let fault = rules.check(r).err().or(match prev {
                Some(p) if r.seq <= p => Some(AckFault::SeqNotRising { previous: p }),
                _ => None,
            });
            if let Some(fault) = fault {
                self.batch.clear();
                return Err(Violation {
                    ack: first + i as u64,
                    record: *r,
                    fault,
                });
            }
            self.batch.insert(r.stream, r.seq);
        }
        self.last.extend(self.batch.drain());
        Ok(())
    }
}

/// The acks of a log that break a rule: the first, and how many in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogViolations {
    pub first: Violation,
    pub count: u64,
}

/// Checks a whole run as loaded from a log or a fetch: its descriptor, then every ack
/// in order. `Ok(None)` when everything could come from a writer.
pub fn check_run(
    d: &RunDescriptor,
    acks: &[Ack],
) -> Result<Option<LogViolations>, DescriptorFault> {
    let rules = AckRules::for_run(d)?;
    let mut seqs = SeqTracker::default();
    let mut found: Option<LogViolations> = None;
    for (i, a) in acks.iter().enumerate() {
        if let Err(v) = seqs.check_batch(&rules, i as u64, std::slice::from_ref(a)) {
            match &mut found {
                Some(f) => f.count += 1,
                None => found = Some(LogViolations { first: v, count: 1 }),
            }
        }
    }
    Ok(found)
}

/// A log that holds what no plugpull writer can produce: verify gives no verdict on it
/// (the caller maps this to exit 3, INCONCLUSIVE).
#[derive(Debug, thiserror::Error)]
#[error(
    "INCONCLUSIVE: the ack log of run {run} is damaged or forged: {why}. No verdict: \
     judging the drive against it would be meaningless. Use the witness's own copy \
     of the log (verify --witness), or find where this file came from"
)]
pub struct ImpossibleRun {
    pub run: RunId,
    /// Which rule the log breaks.
    pub why: String,
}

/// For verify: an [`ImpossibleRun`] when `log` holds anything a writer cannot produce,
/// so such a log is never judged. Logs written before the witness checked acks, or
/// edited by hand, can hold them.
pub fn refuse_impossible_run(log: &RunLog) -> Result<(), ImpossibleRun> {
    let run = log.descriptor.run_id;
    let why = match check_run(&log.descriptor, &log.acks) {
        Ok(None) => match check_log_names(log) {
            Some(why) => why,
            None => return Ok(()),
        },
        Ok(Some(v)) => format!(
            "{} of its {} acks cannot come from a plugpull writer; the first: {}",
            v.count,
            log.acks.len(),
            v.first
        ),
        Err(f) => format!("its run descriptor cannot come from a plugpull writer: {f}"),
    };
    Err(ImpossibleRun { run, why })
}

/// Why the file names of `log` cannot come from a writer, if they cannot: a name for no
/// ack, a name in a run that writes no tree, or a name no tree writer produces.
fn check_log_names(log: &RunLog) -> Option<String> {
    let rules = AckRules::for_run(&log.descriptor).ok()?;
    for (&i, n) in &log.files {
        let Some(a) = log.acks.get(i) else {
            return Some(format!(
                "it names file {:?} for ack {i}, but holds {} acks",
                n.path,
                log.acks.len()
            ));
        };
        let first = i as u64;
        if let Err(v) = check_file_names(
            &rules,
            first,
            std::slice::from_ref(a),
            std::slice::from_ref(n),
        ) {
            return Some(format!(
                "a file entry cannot come from a plugpull writer: {v}"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
