//! Whether the medium shows the ack log cannot be complete: a record of the run, far
//! past its stream's last acknowledged one, that no cut could have left unacknowledged.
//!
//! Why: a log fetched (or copied) while the writer still ran holds a prefix of the acks;
//! judged later, each of its records reads "superseded" by the newer ones and the run
//! passes, although the acks that matter are missing. After an honest cut a stream can
//! have on the medium at most `max_records_unacked` records past the last ack the
//! witness holds (those in flight plus those the witness had not yet confirmed; the
//! writer states the bound in its settings). A record further ahead proves acks are
//! missing. Only a sample of the medium is read (the places the next records of each
//! stream would take, and a spread over the region), so the check costs milliseconds;
//! a miss only loses this second line of evidence, never causes a false alarm.

use super::medium::{read_points, spread};
use crate::device::Device;
use crate::model::{Ack, RunDescriptor};
use crate::record::{content_matches, decode_stamp};
use std::collections::BTreeSet;

/// Points spread over the region.
const SPREAD_POINTS: u64 = 1024;
/// Records ahead of the bound looked at in each stream's ring (sequential placement).
const AHEAD_RECORDS: u64 = 4;

/// The last acknowledged record of each stream, fed ack by ack in ack order.
#[derive(Default)]
pub struct LastPerStream(Vec<Option<Ack>>);

impl LastPerStream {
    pub fn add(&mut self, acks: &[Ack]) {
        for a in acks {
            let s = a.record.stream as usize;
            if s >= self.0.len() {
                self.0.resize(s + 1, None);
            }
            self.0[s] = Some(*a);
        }
    }

    /// The last acknowledged record of `stream`, if it has one.
    pub fn of(&self, stream: u16) -> Option<&Ack> {
        self.0.get(stream as usize).and_then(Option::as_ref)
    }
}

/// Why the medium proves the log of `d`'s run cannot hold every ack (None when it does
/// not, or the writer stated no bound). An error when the sample could not be taken at
/// all (no memory for its buffer): a check not made is not a check passed.
pub fn log_cannot_be_complete(
    dev: &dyn Device,
    d: &RunDescriptor,
    last: &LastPerStream,
) -> std::io::Result<Option<String>> {
    let Some(bound) = d.settings.max_records_unacked else {
        return Ok(None);
    };
    let s = &d.settings;
    let mut points: BTreeSet<u64> = spread(
        s.region_offset,
        s.region_offset + s.region_bytes,
        SPREAD_POINTS,
    )
    .collect();
    let fixed = s.record_bytes_min == s.record_bytes_max && s.placement == "sequential";
    let share = s.region_bytes / s.streams.max(1) as u64;
    if fixed && share >= s.record_bytes_min && s.record_bytes_min > 0 {
        let len = s.record_bytes_min;
        let slots = share / len;
        for a in last.0.iter().flatten() {
            let start = s.region_offset + a.record.stream as u64 * share;
            let slot = (a.record.offset - start) / len;
            for k in 1..=AHEAD_RECORDS {
                let ahead = (slot + bound + k) % slots;
                points.insert(start + ahead * len);
            }
        }
    }
    let mut found: Option<(u16, u64, u64)> = None;
    read_points(dev, &points, |sector| {
        let Ok(st) = decode_stamp(sector) else {
            return false;
        };
        if st.run != d.run_id || !content_matches(sector, &st) {
            return false;
        }
        let stream = st.record.stream;
        let acked = last.0.get(stream as usize).copied().flatten();
        let beyond = match acked {
            Some(a) => st.record.seq.saturating_sub(a.record.seq),
            None => st.record.seq.saturating_add(1),
        };
        if beyond > bound {
            found = Some((stream, st.record.seq, beyond));
            return true;
        }
        false
    })?;
    let Some((stream, seq, beyond)) = found else {
        return Ok(None);
    };
    Ok(Some(format!(
        "the medium holds record {seq} of stream {stream}, {beyond} past the stream's last \
         acknowledged record in the log, and at most {bound} can be written and not yet \
         acknowledged (the writer's max_records_unacked): the log was taken before the \
         writer stopped"
    )))
}
