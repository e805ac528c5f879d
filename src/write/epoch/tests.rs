//! The epoch rule against a brute-force reference on seeded random completion orders,
//! and a deliberately wrong rule that the same check must catch.

use super::*;
use crate::rng::Rng;

/// One thing that happened to a stream, in the order it happened.
#[derive(Clone, Copy, Debug)]
enum Event {
    WriteSubmitted(u64),
    WriteCompleted(u64, Completion),
    /// The flush's number in submission order.
    FlushSubmitted(u64),
    FlushCompleted(u64, bool),
}

/// What the rule allows after `events[..=upto]`, straight from its wording: the number
/// of records (from seq 1) acknowledged.
fn reference_acked(events: &[Event], upto: usize) -> u64 {
    let first_failure = events.iter().position(|e| {
        matches!(
            e,
            Event::WriteCompleted(_, Completion::Failed) | Event::FlushCompleted(_, false)
        )
    });
    let upto = match first_failure {
        Some(0) => return 0,
        Some(f) if f <= upto => f - 1,
        _ => upto,
    };
    let seen = &events[..=upto];
    let durable = |seq: u64| {
        seen.iter().enumerate().any(|(c, e)| match *e {
            Event::WriteCompleted(s, Completion::Durable) => s == seq,
            Event::WriteCompleted(s, Completion::Written) if s == seq => {
                // A flush submitted after this completion that succeeded.
                seen.iter().enumerate().any(|(at, f)| match *f {
                    Event::FlushSubmitted(id) => {
                        at > c
                            && seen
                                .iter()
                                .any(|g| matches!(*g, Event::FlushCompleted(i, true) if i == id))
                    }
                    _ => false,
                })
            }
            _ => false,
        })
    };
    let mut acked = 0;
    while durable(acked + 1) {
        acked += 1;
    }
    acked
}

/// A stream's random life: up to `depth` writes and a few flushes in flight, completing
/// in random order; with `fail`, sometimes a failed write or flush.
fn random_events(rng: &mut Rng, writes: u64, depth: usize, fail: bool) -> Vec<Event> {
    let mut events = Vec::new();
    let mut next_seq = 1;
    let mut writes_in_flight: Vec<u64> = Vec::new();
    let mut flushes_in_flight: Vec<u64> = Vec::new();
    let mut flushes = 0;
    let dsync_share = rng.below(3) as f64 * 0.25;
    while next_seq <= writes || !writes_in_flight.is_empty() || !flushes_in_flight.is_empty() {
        match rng.below(4) {
            0 if next_seq <= writes && writes_in_flight.len() < depth => {
                events.push(Event::WriteSubmitted(next_seq));
                writes_in_flight.push(next_seq);
                next_seq += 1;
            }
            1 if !writes_in_flight.is_empty() => {
                let seq =
                    writes_in_flight.swap_remove(rng.below(writes_in_flight.len() as u64) as usize);
                let how = if fail && rng.chance(0.02) {
                    Completion::Failed
                } else if rng.chance(dsync_share) {
                    Completion::Durable
                } else {
                    Completion::Written
                };
                events.push(Event::WriteCompleted(seq, how));
            }
            2 if flushes_in_flight.len() < 3 && rng.chance(0.5) => {
                events.push(Event::FlushSubmitted(flushes));
                flushes_in_flight.push(flushes);
                flushes += 1;
            }
            3 if !flushes_in_flight.is_empty() => {
                let id = flushes_in_flight
                    .swap_remove(rng.below(flushes_in_flight.len() as u64) as usize);
                events.push(Event::FlushCompleted(id, !(fail && rng.chance(0.03))));
            }
            _ => {}
        }
    }
    // A last flush, as the writer does when it stops: everything completed is covered.
    events.push(Event::FlushSubmitted(flushes));
    events.push(Event::FlushCompleted(flushes, true));
    events
}

/// What a tracker is told; the real one and a wrong one.
trait Rule {
    fn write_submitted(&mut self, seq: u64);
    fn write_completed(&mut self, seq: u64, how: Completion) -> Range<u64>;
    fn flush_submitted(&mut self) -> FlushId;
    fn flush_completed(&mut self, id: FlushId, ok: bool) -> Range<u64>;
}

impl Rule for Epochs {
    fn write_submitted(&mut self, seq: u64) {
        Epochs::write_submitted(self, seq)
    }
    fn write_completed(&mut self, seq: u64, how: Completion) -> Range<u64> {
        Epochs::write_completed(self, seq, how)
    }
    fn flush_submitted(&mut self) -> FlushId {
        Epochs::flush_submitted(self)
    }
    fn flush_completed(&mut self, id: FlushId, ok: bool) -> Range<u64> {
        Epochs::flush_completed(self, id, ok)
    }
}

/// The classic mistake: a flush taken to cover every write completed by the time the
/// flush *completed* (not when it was submitted).
struct CoversUntilCompletion(Epochs);

impl Rule for CoversUntilCompletion {
    fn write_submitted(&mut self, seq: u64) {
        self.0.write_submitted(seq)
    }
    fn write_completed(&mut self, seq: u64, how: Completion) -> Range<u64> {
        self.0.write_completed(seq, how)
    }
    fn flush_submitted(&mut self) -> FlushId {
        self.0.flush_submitted()
    }
    fn flush_completed(&mut self, _: FlushId, ok: bool) -> Range<u64> {
        let late = self.0.flush_submitted();
        self.0.flush_completed(late, ok)
    }
}

/// Feeds `events` to `rule`; the first event after which it acknowledged other than the
/// reference allows, or whose acks were not contiguous in sequence order.
fn disagreement(events: &[Event], rule: &mut dyn Rule) -> Option<String> {
    let mut ids = Vec::new();
    let mut acked = 0u64;
    for (i, e) in events.iter().enumerate() {
        let got = match *e {
            Event::WriteSubmitted(seq) => {
                rule.write_submitted(seq);
                0..0
            }
            Event::WriteCompleted(seq, how) => rule.write_completed(seq, how),
            Event::FlushSubmitted(_) => {
                ids.push(rule.flush_submitted());
                0..0
            }
            Event::FlushCompleted(id, ok) => rule.flush_completed(ids[id as usize], ok),
        };
        if !got.is_empty() {
            if got.start != acked + 1 {
                return Some(format!("event {i} {e:?}: acked {got:?} after {acked}"));
            }
            acked = got.end - 1;
        }
        let want = reference_acked(events, i);
        if acked != want {
            return Some(format!(
                "event {i} {e:?}: {acked} acknowledged, the rule allows {want}"
            ));
        }
    }
    None
}

const SEEDS: u64 = 400;

/// Seed `seed`'s case: its depth and events (odd seeds with failures).
fn case(seed: u64) -> (usize, Vec<Event>) {
    let mut rng = Rng::new(seed);
    let depth = 1 + rng.below(16) as usize;
    let writes = 1 + rng.below(60);
    (depth, random_events(&mut rng, writes, depth, seed % 2 == 1))
}

#[test]
fn random_completion_orders_ack_exactly_what_the_rule_allows() {
    for seed in 0..SEEDS {
        let (depth, events) = case(seed);
        if let Some(why) = disagreement(&events, &mut Epochs::new(1)) {
            panic!("seed {seed}, depth {depth}: {why}\nevents: {events:?}");
        }
    }
}

/// The check above can fail: the wrong rule is caught on some of the same orders.
#[test]
fn covering_writes_completed_after_the_flush_was_submitted_is_caught() {
    let caught = (0..SEEDS)
        .filter(|&seed| {
            let (_, events) = case(seed);
            disagreement(&events, &mut CoversUntilCompletion(Epochs::new(1))).is_some()
        })
        .count();
    assert!(
        caught > SEEDS as usize / 4,
        "caught on only {caught} of {SEEDS} seeds"
    );
}

/// A write that completed while the flush was in flight waits for the next flush, and
/// its successor waits with it though a flush covered that one.
#[test]
fn a_write_completed_after_the_flush_was_submitted_waits_for_the_next() {
    let mut e = Epochs::new(1);
    e.write_submitted(1);
    e.write_submitted(2);
    assert_eq!(e.write_completed(2, Completion::Written), 1..1);
    let f0 = e.flush_submitted();
    assert_eq!(e.write_completed(1, Completion::Written), 1..1);
    // Record 2 is durable now, but record 1 is not: nothing may leave.
    assert_eq!(e.flush_completed(f0, true), 1..1);
    assert_eq!((e.unacked(), e.awaiting_flush(), e.in_flight()), (2, 1, 0));
    let f1 = e.flush_submitted();
    assert_eq!(e.flush_completed(f1, true), 1..3);
    assert_eq!(e.unacked(), 0);
}

/// A later flush that succeeds covers what an earlier one still in flight covers.
#[test]
fn flushes_completing_out_of_order_cover_what_each_was_submitted_after() {
    let mut e = Epochs::new(5);
    e.write_submitted(5);
    e.write_completed(5, Completion::Written);
    let f0 = e.flush_submitted();
    e.write_submitted(6);
    e.write_completed(6, Completion::Written);
    let f1 = e.flush_submitted();
    assert_eq!(e.flush_completed(f1, true), 5..7);
    assert_eq!(e.flush_completed(f0, true), 7..7);
}

/// After a failed flush, nothing is acknowledged, not even what a later successful
/// flush covers or a write durable by itself.
#[test]
fn nothing_is_acknowledged_after_a_failure() {
    let mut e = Epochs::new(1);
    e.write_submitted(1);
    e.write_completed(1, Completion::Written);
    let f0 = e.flush_submitted();
    let f1 = e.flush_submitted();
    assert_eq!(e.flush_completed(f0, false), 1..1);
    assert_eq!(e.flush_completed(f1, true), 1..1);
    e.write_submitted(2);
    assert_eq!(e.write_completed(2, Completion::Durable), 1..1);
    assert!(e.failed());
}
