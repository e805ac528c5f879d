//! What `write` says while it runs when nobody watches a terminal: one timestamped line
//! per change of state (started, witness lost, reconnecting, witness back, writes paused
//! because too many acks wait to be durable at the witness, writes resumed, stopped).
//!
//! Why: under systemd, nohup or a pipe the status line is hidden (indicatif draws only on
//! a terminal), and a writer that stopped writing because its witness went away said
//! nothing for minutes. A log line per change, with the time, says what happened when.
//! Why polling: the ack sender's state is a snapshot (`SenderStats`); looking at it every
//! [`POLL`] costs nothing on the write path, and a change too short to see between two
//! looks still shows in the reconnect counter (`changes` reports it as lost + back).

use crate::units::thousands;
use crate::witness::client::{AckSender, SenderStats};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the watcher looks at the sender.
const POLL: Duration = Duration::from_millis(50);
/// While the witness stays away, a reminder this often (each failed attempt with the same
/// error would be a line every few seconds).
const REMINDER: Duration = Duration::from_secs(30);

/// Whether stderr is a terminal: there the status line shows the state, elsewhere the
/// timestamped lines of this module do.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Prints `plugpull write: MSG` on stderr, with the local time in front when stderr is not
/// a terminal (a log file or the journal), so each line says when it happened.
pub fn say(msg: &str) {
    if stderr_is_terminal() {
        eprintln!("plugpull write: {msg}");
    } else {
        eprintln!("{} plugpull write: {msg}", timestamp());
    }
}

/// `2026-11-30 12:00:01.123 +01:00`: local time, to the millisecond (log lines are read
/// next to each other's and the witness's), the zone named so a reader on another
/// machine can place it.
pub fn timestamp() -> String {
    chrono::Local::now()
        .format("%Y-%m-%d %H:%M:%S%.3f %:z")
        .to_string()
}

/// What the watcher last saw of the sender.
#[derive(Debug)]
pub(super) struct Seen {
    connected: bool,
    reconnects: u64,
    paused: bool,
    last_error: Option<String>,
    /// When the witness was lost, and when the last line about it was printed.
    lost_at: Option<Instant>,
    reminded_at: Option<Instant>,
}

impl Seen {
    /// The state right after the handshake: connected, nothing waiting.
    pub(super) fn start() -> Seen {
        Seen {
            connected: true,
            reconnects: 0,
            paused: false,
            last_error: None,
            lost_at: None,
            reminded_at: None,
        }
    }
}

/// The lines for the change from `seen` to `s` (and `seen` updated). Pure but for `now`,
/// so every transition is unit-tested.
pub(super) fn changes(
    seen: &mut Seen,
    s: &SenderStats,
    max_unconfirmed: u64,
    witness: &str,
    now: Instant,
) -> Vec<String> {
    let mut out = vec![];
    let waiting = thousands(s.pushed.saturating_sub(s.durable));
    let why = s.last_error.as_deref().unwrap_or("no reason given");
    let reconnected = s.reconnects > seen.reconnects;
    if seen.connected && (!s.connected || reconnected) {
        out.push(format!(
            "witness lost ({why}): reconnecting to {witness}; {waiting} acks not yet durable at the witness are kept and will be resent"
        ));
        seen.lost_at = Some(now);
        seen.reminded_at = Some(now);
        seen.last_error = s.last_error.clone();
    } else if !s.connected && s.last_error != seen.last_error {
        out.push(format!("reconnecting to the witness at {witness}: {why}"));
        seen.reminded_at = Some(now);
        seen.last_error = s.last_error.clone();
    } else if !s.connected && seen.reminded_at.is_some_and(|t| now - t >= REMINDER) {
        let away = seen.lost_at.map_or(0, |t| (now - t).as_secs());
        out.push(format!(
            "still reconnecting to the witness at {witness} ({away} s without it: {why}); {waiting} acks wait to be durable at the witness"
        ));
        seen.reminded_at = Some(now);
    }
    if s.connected && (reconnected || !seen.connected) {
        out.push(format!(
            "witness back at {witness}: resumed sending; {} acks durable at the witness, {waiting} being sent",
            thousands(s.durable)
        ));
        seen.lost_at = None;
        seen.reminded_at = None;
    }
    let paused = s.pushed.saturating_sub(s.durable) >= max_unconfirmed;
    if paused && !seen.paused {
        out.push(format!(
            "writes paused: {waiting} acks are not yet durable at the witness (the limit is {}); writing resumes when the witness confirms them",
            thousands(max_unconfirmed)
        ));
    } else if !paused && seen.paused {
        out.push(format!(
            "writes resumed: {waiting} acks wait to be durable at the witness"
        ));
    }
    seen.paused = paused;
    seen.connected = s.connected;
    seen.reconnects = s.reconnects;
    out
}

/// The watcher thread's handle: `run` until `stop`.
pub(super) struct Watcher {
    done: AtomicBool,
    max_unconfirmed: u64,
    witness: String,
}

impl Watcher {
    pub(super) fn new(max_unconfirmed: usize, witness: &str) -> Watcher {
        Watcher {
            done: AtomicBool::new(false),
            max_unconfirmed: max_unconfirmed as u64,
            witness: witness.to_string(),
        }
    }

    /// Prints a line for every change of the sender's state until [`Watcher::stop`].
    pub(super) fn run(&self, sender: &AckSender) {
        let mut seen = Seen::start();
        loop {
            let stopping = self.done.load(Ordering::Relaxed);
            let s = sender.stats();
            for line in changes(
                &mut seen,
                &s,
                self.max_unconfirmed,
                &self.witness,
                Instant::now(),
            ) {
                say(&line);
            }
            if stopping {
                return;
            }
            std::thread::sleep(POLL);
        }
    }

    pub(super) fn stop(&self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(
        connected: bool,
        reconnects: u64,
        pushed: u64,
        durable: u64,
        err: &str,
    ) -> SenderStats {
        SenderStats {
            pushed,
            durable,
            connected,
            reconnects,
            last_error: (!err.is_empty()).then(|| err.to_string()),
        }
    }

    #[test]
    fn nothing_while_nothing_changes() {
        let mut seen = Seen::start();
        let t = Instant::now();
        assert!(changes(&mut seen, &stats(true, 0, 10, 5, ""), 100, "w:1", t).is_empty());
        assert!(changes(&mut seen, &stats(true, 0, 20, 20, ""), 100, "w:1", t).is_empty());
    }

    #[test]
    fn lost_reconnecting_reminder_back_in_order() {
        let mut seen = Seen::start();
        let t = Instant::now();
        let l = changes(&mut seen, &stats(false, 0, 10, 5, "closed"), 100, "w:1", t);
        assert_eq!(l.len(), 1);
        assert!(
            l[0].starts_with("witness lost (closed): reconnecting to w:1; 5 acks"),
            "{l:?}"
        );
        let l = changes(&mut seen, &stats(false, 0, 10, 5, "refused"), 100, "w:1", t);
        assert_eq!(l, ["reconnecting to the witness at w:1: refused"]);
        // The same error again says nothing until the reminder is due.
        let l = changes(
            &mut seen,
            &stats(false, 0, 10, 5, "refused"),
            100,
            "w:1",
            t + POLL,
        );
        assert!(l.is_empty(), "{l:?}");
        let l = changes(
            &mut seen,
            &stats(false, 0, 10, 5, "refused"),
            100,
            "w:1",
            t + REMINDER,
        );
        assert_eq!(l.len(), 1);
        assert!(
            l[0].starts_with("still reconnecting to the witness at w:1 (30 s"),
            "{l:?}"
        );
        let l = changes(
            &mut seen,
            &stats(true, 1, 10, 5, "refused"),
            100,
            "w:1",
            t + REMINDER,
        );
        assert_eq!(l.len(), 1);
        assert!(
            l[0].starts_with("witness back at w:1: resumed sending; 5 acks durable"),
            "{l:?}"
        );
        assert!(changes(&mut seen, &stats(true, 1, 10, 10, "refused"), 100, "w:1", t).is_empty());
    }

    #[test]
    fn a_reconnect_between_two_looks_is_reported_as_lost_and_back() {
        let mut seen = Seen::start();
        let l = changes(
            &mut seen,
            &stats(true, 1, 10, 10, "closed"),
            100,
            "w:1",
            Instant::now(),
        );
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].starts_with("witness lost (closed)"));
        assert!(l[1].starts_with("witness back"));
    }

    #[test]
    fn paused_when_the_limit_is_reached_and_resumed_below_it() {
        let mut seen = Seen::start();
        let t = Instant::now();
        assert!(changes(&mut seen, &stats(true, 0, 99, 0, ""), 100, "w:1", t).is_empty());
        let l = changes(&mut seen, &stats(true, 0, 100, 0, ""), 100, "w:1", t);
        assert_eq!(l.len(), 1);
        assert!(l[0].starts_with(
            "writes paused: 100 acks are not yet durable at the witness (the limit is 100)"
        ));
        assert!(changes(&mut seen, &stats(true, 0, 100, 0, ""), 100, "w:1", t).is_empty());
        let l = changes(&mut seen, &stats(true, 0, 100, 50, ""), 100, "w:1", t);
        assert_eq!(
            l,
            ["writes resumed: 50 acks wait to be durable at the witness"]
        );
    }

    /// Counts of acks read at a glance: grouped by thousands, the limit too.
    #[test]
    fn counts_in_the_witness_lines_have_thousands_separators() {
        let mut seen = Seen::start();
        let t = Instant::now();
        let l = changes(
            &mut seen,
            &stats(true, 0, 1_048_576, 0, ""),
            1_048_576,
            "w:1",
            t,
        );
        assert_eq!(
            l,
            [
                "writes paused: 1,048,576 acks are not yet durable at the witness (the limit is 1,048,576); writing resumes when the witness confirms them"
            ]
        );
        let l = changes(
            &mut seen,
            &stats(false, 0, 1_048_576, 9_262, "closed"),
            1_048_576,
            "w:1",
            t,
        );
        assert_eq!(
            l,
            [
                "witness lost (closed): reconnecting to w:1; 1,039,314 acks not yet durable at the witness are kept and will be resent",
                "writes resumed: 1,039,314 acks wait to be durable at the witness",
            ]
        );
    }
}
