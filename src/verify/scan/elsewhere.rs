//! Records of the run found away from their home, and the first place each was found:
//! what tells a misdirected record from a lost one.
//!
//! Why bounded: an honest drive keeps every record at home, so the list is empty; a
//! drive that misplaces writes wholesale (a firmware that remaps the wrong blocks) could
//! fill it with one entry per sector of a large drive, past any memory budget. Past
//! [`MAX_NAMED`] records, none is named: the records that would have been misdirected
//! count as lost or stale (failures all the same, so the verdict does not move) and the
//! report says so. Dropping all of them rather than keeping the first ones makes a run
//! judged in parts (each part's list added to the others') give the whole run's answer
//! whatever order the parts come in.

use std::collections::HashMap;

/// The most records named as found elsewhere (about 3.5 MiB at the most).
pub const MAX_NAMED: usize = 65_536;

/// Records of the run found away from their home: (stream, seq) → the first offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FoundElsewhere {
    places: HashMap<(u16, u64), u64>,
    too_many: bool,
}

impl FoundElsewhere {
    pub fn new() -> FoundElsewhere {
        FoundElsewhere::default()
    }

    /// Notes record `key` found at `at`, unless it was found before (offsets come in
    /// order, so the first is the lowest) or there are too many to name.
    pub fn note(&mut self, key: (u16, u64), at: u64) {
        if self.too_many {
            return;
        }
        self.places.entry(key).or_insert(at);
        self.check_size();
    }

    /// Adds what `other` found (places found later in the region come after).
    pub fn add(&mut self, other: &FoundElsewhere) {
        if other.too_many {
            self.drop_all();
        }
        if self.too_many {
            return;
        }
        for (&k, &at) in &other.places {
            self.places.entry(k).or_insert(at);
        }
        self.check_size();
    }

    /// Whether record `key` was found away from home (never, past [`MAX_NAMED`]).
    pub fn contains_key(&self, key: &(u16, u64)) -> bool {
        self.places.contains_key(key)
    }

    /// Where record `key` was first found away from home.
    pub fn get(&self, key: &(u16, u64)) -> Option<&u64> {
        self.places.get(key)
    }

    /// Whether more than [`MAX_NAMED`] records were found away from home, so none is.
    pub fn too_many(&self) -> bool {
        self.too_many
    }

    fn check_size(&mut self) {
        if self.places.len() > MAX_NAMED {
            self.drop_all();
        }
    }

    fn drop_all(&mut self) {
        self.too_many = true;
        self.places = HashMap::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the bound nothing is named, whether the places came one by one or as parts
    /// added together, in any order.
    #[test]
    fn past_the_bound_none_is_named_however_the_places_came() {
        let mut whole = FoundElsewhere::new();
        let (mut a, mut b) = (FoundElsewhere::new(), FoundElsewhere::new());
        for k in 0..=MAX_NAMED as u64 {
            whole.note((0, k), k * 512);
            if k % 2 == 0 { &mut a } else { &mut b }.note((0, k), k * 512);
        }
        assert!(whole.too_many() && !whole.contains_key(&(0, 1)));
        assert!(!a.too_many() && !b.too_many());
        let mut ab = a.clone();
        ab.add(&b);
        let mut ba = b;
        ba.add(&a);
        assert_eq!(ab, whole);
        assert_eq!(ba, whole);
        // At the bound, every one is named, at its first place.
        let mut at_bound = FoundElsewhere::new();
        for k in 0..MAX_NAMED as u64 {
            at_bound.note((1, k), k);
            at_bound.note((1, k), k + 7);
        }
        assert!(!at_bound.too_many());
        assert_eq!(at_bound.get(&(1, 5)), Some(&5));
    }
}
