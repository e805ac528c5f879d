//! Which bytes of each acknowledged record are still its own (no later record covers
//! them), in the flat form the scan takes: see [`Visible`].

/// Each ack's visible ranges, as [`super::visible_ranges`] gives them, in two flat vectors.
/// Why not a vector per ack: verify at scale passes millions of live acks, nearly all
/// with one range, and an allocation each (with its header and the allocator's) cost
/// more than the ranges, in memory and in page-clearing CPU.
#[derive(Debug, Default, PartialEq)]
pub struct Visible {
    /// Ack i's ranges are `ranges[ends[i - 1]..ends[i]]` (from 0 for ack 0).
    ends: Vec<usize>,
    ranges: Vec<(u64, u64)>,
    /// Some(n): n acks, each visible over its whole record, and nothing in `ends` or
    /// `ranges`. Why: the live acks of `verify::slots` are whole slots, and 2.6 M of
    /// them (1.25 GiB of 512 B records) would cost 63 MB of ranges saying so.
    whole: Option<usize>,
}

impl Visible {
    pub fn with_capacity(acks: usize) -> Visible {
        Visible {
            ends: Vec::with_capacity(acks),
            ranges: Vec::with_capacity(acks),
            whole: None,
        }
    }

    /// `acks` acks, each visible over its whole record.
    pub fn whole_records(acks: usize) -> Visible {
        Visible {
            whole: Some(acks),
            ..Default::default()
        }
    }

    /// Whether byte `p` of ack `i`'s record is still its own. `p` must lie in the
    /// record.
    #[inline]
    pub fn covers(&self, i: usize, p: u64) -> bool {
        self.whole.is_some() || self.of(i).iter().any(|&(s, e)| s <= p && p < e)
    }

    /// Ack `i`'s visible ranges, given its record's range `rec`.
    pub fn ranges_of(&self, i: usize, rec: (u64, u64)) -> Vec<(u64, u64)> {
        match self.whole {
            Some(_) => vec![rec],
            None => self.of(i).to_vec(),
        }
    }

    /// Starts the next ack, with no range yet.
    pub fn push_ack(&mut self) {
        self.ends.push(self.ranges.len());
    }

    /// Adds [s, e) to the last ack's ranges (not for `whole_records`), joined to its last
    /// range if that ends at `s`. Ranges must come in order and be disjoint: `covers`
    /// and the scan's reading of them assume it, and two ranges of one ack that overlap
    /// mean the painting gave a byte twice. Checked in every build, one comparison a
    /// range.
    pub fn push_range(&mut self, s: u64, e: u64) {
        assert!(s < e, "visible range [{s}, {e}) is empty or reversed");
        let n = self.ends.len();
        let from = if n >= 2 { self.ends[n - 2] } else { 0 };
        let last = self.ends.last_mut().expect("push_ack first");
        match self.ranges.last_mut() {
            Some(&mut (ps, pe)) if *last > from && s < pe => {
                panic!("visible range [{s}, {e}) overlaps or precedes [{ps}, {pe}) of its ack")
            }
            Some((_, pe)) if *last > from && *pe == s => *pe = e,
            _ => {
                self.ranges.push((s, e));
                *last += 1;
            }
        }
    }

    /// The visible ranges of ack `i` (none for `whole_records`: see `covers`).
    fn of(&self, i: usize) -> &[(u64, u64)] {
        let from = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.ranges[from..self.ends[i]]
    }

    pub fn len(&self) -> usize {
        self.whole.unwrap_or(self.ends.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<Vec<(u64, u64)>>> for Visible {
    fn from(v: Vec<Vec<(u64, u64)>>) -> Visible {
        let mut out = Visible::with_capacity(v.len());
        for ranges in v {
            out.ends.push(out.ranges.len() + ranges.len());
            out.ranges.extend(ranges);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built range by range (joining touching ones) or from a vector per ack, the flat
    /// form gives back each ack's ranges, empty ones included.
    #[test]
    fn visible_ranges_flat_give_back_each_ack_s_ranges() {
        let per_ack: Vec<Vec<(u64, u64)>> = vec![
            vec![],
            vec![(0, 512)],
            vec![],
            vec![(512, 1024), (2048, 4096)],
            vec![(4096, 5120)],
            vec![],
        ];
        let mut built = Visible::default();
        for ranges in &per_ack {
            built.push_ack();
            for &(s, e) in ranges {
                // Split in two touching halves, which must be joined again.
                let mid = s + (e - s) / 2;
                built.push_range(s, mid);
                built.push_range(mid, e);
            }
        }
        let from: Visible = per_ack.clone().into();
        assert_eq!(built, from);
        assert_eq!(from.len(), per_ack.len());
        for (i, ranges) in per_ack.iter().enumerate() {
            assert_eq!(from.of(i), &ranges[..], "ack {i}");
        }
    }

    /// A range of an ack that starts before its previous range ends is refused, in
    /// every build.
    #[test]
    #[should_panic(
        expected = "visible range [512, 2048) overlaps or precedes [0, 1024) of its ack"
    )]
    fn an_overlapping_range_of_one_ack_is_refused() {
        let mut v = Visible::default();
        v.push_ack();
        v.push_range(0, 1024);
        v.push_range(512, 2048);
    }

    /// Ranges of different acks may lie anywhere: only one ack's own must be in order.
    #[test]
    fn ranges_of_different_acks_need_no_order() {
        let mut v = Visible::default();
        v.push_ack();
        v.push_range(4096, 8192);
        v.push_ack();
        v.push_range(0, 512);
        assert_eq!(v.of(1), &[(0, 512)]);
    }
}
