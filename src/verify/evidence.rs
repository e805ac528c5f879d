//! How the writer stopped, from the witness's own events, and what that lets a verdict
//! say: a PASS is a claim about a power cut, so it needs evidence that the power went
//! while the writer was writing.
//!
//! Why from the witness: the writer's host is the one that lost power; only the witness
//! saw the end of the run. A writer that ends by itself says so in its Bye
//! (`model::bye`: finished, stopped by a signal, or its target failed); a writer whose
//! host lost power just falls silent (a disconnect without a Bye). A fetch served while
//! the writer was still connected carries a `writer-connected` event: the acks fetched
//! then cannot be all of them unless the writer had already gone silent.

use crate::model::{LATER_RUN_EVENT, WRITER_CONNECTED_EVENT, WitnessEvent, bye, disconnect};
use crate::record::RunId;

/// A writer silent this long when its acks were fetched may be gone (its host lost
/// power) and the witness not yet have noticed (it waits `--idle-timeout`): `verify
/// --witness` then waits for the witness to decide rather than judge a log that may
/// still grow. Writers send a heartbeat every second when idle.
pub const WRITER_SILENT_MS: u64 = 3_000;

/// How the run's writer stopped, as far as the witness saw.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "how", content = "detail")]
pub enum WriterEnd {
    /// Its write or flush failed (a drive losing power looks like this): cut evidence.
    TargetFailed(String),
    /// It fell silent without a Bye (its host lost power, or the network went): cut
    /// evidence.
    Vanished(String),
    /// Its connection was closed or reset by its own host without a Bye: that host was
    /// running, so the writer process ended (killed, crashed); no cut evidence.
    Closed(String),
    /// It wrote what it was asked to and said goodbye: no cut during writing.
    Finished(String),
    /// A signal stopped it (Ctrl-C, SIGTERM): no cut during writing.
    Stopped(String),
    /// It was still connected, and not silent, when the acks were fetched: they cannot
    /// be all of them.
    StillConnected(String),
    /// The log does not say (no event, or the witness stopped before the writer did).
    Unknown(String),
}

impl WriterEnd {
    /// Whether the end is evidence that the power went while the writer was writing.
    pub fn is_cut_evidence(&self) -> bool {
        matches!(self, WriterEnd::TargetFailed(_) | WriterEnd::Vanished(_))
    }

    /// The words after "the writer ...".
    pub fn describe(&self) -> String {
        match self {
            WriterEnd::TargetFailed(d) => format!("saw its target fail ({d})"),
            WriterEnd::Vanished(d) => format!("vanished mid-write ({d})"),
            WriterEnd::Closed(d) => format!(
                "ended without a goodbye while its host was running ({d}): a killed or \
                 crashed writer, not a power cut"
            ),
            WriterEnd::Finished(d) => format!("finished by itself ({d})"),
            WriterEnd::Stopped(d) => format!("was stopped ({d})"),
            WriterEnd::StillConnected(d) => format!("was still connected ({d})"),
            WriterEnd::Unknown(d) => format!("ended in a way the log does not show ({d})"),
        }
    }
}

/// How the writer of the run with `events` (its log's and the fetch's, in order)
/// stopped: the end of its last connection decides.
pub fn writer_end(events: &[WitnessEvent]) -> WriterEnd {
    let connections = ["connect", "bye", "disconnect", "error"];
    let last = events
        .iter()
        .rev()
        .find(|e| connections.contains(&e.kind.as_str()));
    let connected_at_fetch = events
        .iter()
        .rev()
        .find(|e| e.kind == WRITER_CONNECTED_EVENT);
    match last {
        None => WriterEnd::Unknown("the log holds no connection events".into()),
        Some(e) if e.kind == "connect" => match connected_at_fetch {
            Some(f) => {
                let heard = f.last_frame_at_ns.or(f.last_ack_at_ns).unwrap_or(0);
                let silent_s = f.at_ns.saturating_sub(heard) as f64 / 1e9;
                WriterEnd::StillConnected(format!(
                    "the witness still held its connection when the acks were fetched, its \
                     last frame {} before",
                    crate::units::fmt_duration_s(silent_s)
                ))
            }
            None => WriterEnd::Unknown(
                "the log ends while the writer was connected, and the witness did not say \
                 whether it still was"
                    .into(),
            ),
        },
        Some(e) if e.kind == "bye" => {
            let reason = e.detail.strip_prefix("bye: ").unwrap_or(&e.detail);
            let reason = reason.split("; writer last heard").next().unwrap_or(reason);
            if reason.starts_with(bye::TARGET_FAILED) {
                WriterEnd::TargetFailed(reason.to_string())
            } else if reason.starts_with(bye::STOPPED) || reason.starts_with(bye::WRITE_FAILED) {
                WriterEnd::Stopped(reason.to_string())
            } else {
                // "writer finished", and any reason this build does not know: a Bye is
                // said only by a writer that was still running, so no cut stopped it.
                WriterEnd::Finished(reason.to_string())
            }
        }
        Some(e) if e.kind == "disconnect" && e.detail.starts_with(disconnect::CLOSED) => {
            WriterEnd::Closed(detail(e))
        }
        Some(e)
            if e.kind == "disconnect" && !e.detail.starts_with(disconnect::WITNESS_RESTARTED) =>
        {
            WriterEnd::Vanished(detail(e))
        }
        // The witness restarted, or ended the connection for an error of its own: it
        // cannot say how the writer stopped.
        Some(e) => WriterEnd::Unknown(detail(e)),
    }
}

const LAST_HEARD: &str = "; writer last heard at ";

/// An end event's detail with the time the writer was last heard as every text time
/// reads (UTC, to the second, the zone named): the witness writes it in its own local
/// time, to the millisecond and with no zone, which a reader of the report on another
/// machine cannot place. The event's `last_frame_at_ns` is that same instant.
fn detail(e: &WitnessEvent) -> String {
    match (e.detail.split_once(LAST_HEARD), e.last_frame_at_ns) {
        // "at the latest when its log was last written": a bound in words, kept.
        (Some((head, when)), Some(ns)) if !when.starts_with("the latest") => {
            format!("{head}{LAST_HEARD}{}", crate::units::fmt_utc_ns(ns))
        }
        _ => e.detail.clone(),
    }
}

/// The runs of the same drive that the witness first heard of after the judged run's
/// writer had stopped (`later-run` events of a fetch): their stamps on the medium
/// superseded the judged run's records; they are not stale data. Empty when the judged
/// run's writer had not stopped, or nothing says when.
pub fn runs_after_the_end(events: &[WitnessEvent]) -> Vec<RunId> {
    let ends = ["bye", "disconnect", "error"];
    let Some(end_ns) = ended_at_ns(events, &ends) else {
        return vec![];
    };
    events
        .iter()
        .filter(|e| e.kind == LATER_RUN_EVENT && e.at_ns > end_ns)
        .filter_map(|e| RunId::parse(&e.detail))
        .collect()
}

/// When the writer's last connection ended (witness clock), if it ended: when the writer
/// was last heard, not when the witness noticed (a silent writer is noticed only after
/// `--idle-timeout`, and a run begun in between came after it).
fn ended_at_ns(events: &[WitnessEvent], ends: &[&str]) -> Option<u64> {
    let last = events
        .iter()
        .rev()
        .find(|e| e.kind == "connect" || ends.contains(&e.kind.as_str()))?;
    ends.contains(&last.kind.as_str())
        .then_some(last.last_frame_at_ns.unwrap_or(last.at_ns).min(last.at_ns))
}

/// Whether acks fetched with `events` should be fetched again after a wait: the witness
/// still held the writer's connection, but had not heard from it for
/// [`WRITER_SILENT_MS`] (a host that lost power, not yet noticed). A writer heard just
/// before the fetch is writing: waiting would not help.
pub fn worth_waiting_for_the_witness(events: &[WitnessEvent]) -> bool {
    if !matches!(writer_end(events), WriterEnd::StillConnected(_)) {
        return false;
    }
    events
        .iter()
        .rev()
        .find(|e| e.kind == WRITER_CONNECTED_EVENT)
        .and_then(|f| Some(f.at_ns.saturating_sub(f.last_frame_at_ns?) / 1_000_000))
        .is_some_and(|silent_ms| silent_ms >= WRITER_SILENT_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, at_ns: u64, detail: &str) -> WitnessEvent {
        WitnessEvent {
            at_ns,
            kind: kind.into(),
            peer: String::new(),
            durable_acks: 0,
            last_ack_at_ns: None,
            last_frame_at_ns: None,
            detail: detail.into(),
        }
    }

    fn fetched(at_ns: u64, heard_ns: u64) -> WitnessEvent {
        WitnessEvent {
            last_frame_at_ns: Some(heard_ns),
            ..ev(WRITER_CONNECTED_EVENT, at_ns, "")
        }
    }

    const S: u64 = 1_000_000_000;

    /// Every way a run's events can end lands in exactly one class, and only the two
    /// that show the writer was writing when it stopped count as cut evidence.
    #[test]
    fn the_writer_end_decision_table() {
        let connect = ev("connect", S, "resume=false");
        let cases: Vec<(Vec<WitnessEvent>, &str, bool)> = vec![
            (vec![], "unknown", false),
            (vec![connect.clone()], "unknown", false),
            (
                vec![
                    connect.clone(),
                    ev(
                        "bye",
                        2 * S,
                        "bye: writer finished: done; writer last heard at x",
                    ),
                ],
                "finished",
                false,
            ),
            (
                vec![connect.clone(), ev("bye", 2 * S, "bye: writer finished")],
                "finished",
                false,
            ),
            (
                vec![
                    connect.clone(),
                    ev("bye", 2 * S, "bye: writer stopped: SIGTERM"),
                ],
                "stopped",
                false,
            ),
            (
                vec![
                    connect.clone(),
                    ev(
                        "bye",
                        2 * S,
                        "bye: writer failed: No space left on device (os error 28)",
                    ),
                ],
                "stopped",
                false,
            ),
            (
                vec![
                    connect.clone(),
                    ev(
                        "bye",
                        2 * S,
                        "bye: target failed: flush of stream 0 seq 9 failed: EIO",
                    ),
                ],
                "target-failed",
                true,
            ),
            (
                vec![
                    connect.clone(),
                    ev(
                        "disconnect",
                        2 * S,
                        "no complete frame for 60s (idle timeout)",
                    ),
                ],
                "vanished",
                true,
            ),
            (
                vec![
                    connect.clone(),
                    ev("disconnect", 2 * S, "connection error: timed out"),
                ],
                "vanished",
                true,
            ),
            (
                vec![
                    connect.clone(),
                    ev("disconnect", 2 * S, "connection closed by the writer"),
                ],
                "closed",
                false,
            ),
            (
                vec![
                    connect.clone(),
                    ev(
                        "disconnect",
                        2 * S,
                        "connection closed by the writer (Connection reset by peer)",
                    ),
                ],
                "closed",
                false,
            ),
            (
                vec![
                    connect.clone(),
                    ev(
                        "disconnect",
                        2 * S,
                        "the witness restarted while the writer was connected; x",
                    ),
                ],
                "unknown",
                false,
            ),
            (
                vec![connect.clone(), ev("error", 2 * S, "a protocol error")],
                "unknown",
                false,
            ),
            // Connected at the fetch: never judged as gone, however long it was silent.
            (
                vec![connect.clone(), fetched(10 * S, 9 * S)],
                "still-connected",
                false,
            ),
            (
                vec![connect.clone(), fetched(100 * S, 6 * S)],
                "still-connected",
                false,
            ),
            // A reconnect after a Bye: the last connection decides.
            (
                vec![
                    connect.clone(),
                    ev("bye", 2 * S, "bye: writer finished"),
                    ev("connect", 3 * S, "resume=true"),
                    ev(
                        "disconnect",
                        4 * S,
                        "no complete frame for 60s (idle timeout)",
                    ),
                ],
                "vanished",
                true,
            ),
        ];
        for (events, want, evidence) in cases {
            let end = writer_end(&events);
            let got = serde_json::to_value(&end).unwrap()["how"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(got, want, "{events:?}");
            assert_eq!(end.is_cut_evidence(), evidence, "{events:?}");
        }
    }

    #[test]
    fn only_runs_heard_of_after_the_writer_stopped_supersede() {
        let before = RunId::random();
        let after = RunId::random();
        let events = vec![
            ev("connect", S, ""),
            ev(LATER_RUN_EVENT, 2 * S, &before.hex()),
            ev("bye", 3 * S, "bye: writer finished"),
            ev(LATER_RUN_EVENT, 4 * S, &after.hex()),
        ];
        assert_eq!(runs_after_the_end(&events), vec![after]);
        // A writer still connected has not stopped: no run came after it.
        let live = vec![
            ev("connect", S, ""),
            ev(LATER_RUN_EVENT, 4 * S, &after.hex()),
        ];
        assert!(runs_after_the_end(&live).is_empty());
        // A writer that fell silent stopped when it was last heard, not when the witness
        // noticed: a run heard of in between came after it.
        let silent = WitnessEvent {
            last_frame_at_ns: Some(2 * S),
            ..ev(
                "disconnect",
                62 * S,
                "no complete frame for 60s (idle timeout)",
            )
        };
        let fast_reboot = vec![
            ev("connect", S, ""),
            ev(LATER_RUN_EVENT, 3 * S, &after.hex()),
            silent,
        ];
        assert_eq!(runs_after_the_end(&fast_reboot), vec![after]);
    }

    /// The time the writer was last heard reads in UTC to the second with its zone,
    /// from the event's own instant, whatever local time the witness wrote in words.
    #[test]
    fn the_last_heard_time_reads_in_utc_seconds() {
        // 2026-12-02 13:54:04.873 UTC.
        let heard = 1_796_219_644_873_000_000;
        let gone = WitnessEvent {
            last_frame_at_ns: Some(heard),
            ..ev(
                "disconnect",
                heard + 60 * S,
                "no complete frame for 60s (idle timeout); writer last heard at 2026-12-02 14:54:04.873",
            )
        };
        let connect = ev("connect", S, "resume=false");
        assert_eq!(
            writer_end(&[connect.clone(), gone]),
            WriterEnd::Vanished(
                "no complete frame for 60s (idle timeout); writer last heard at 2026-12-02 13:54:04 UTC"
                    .into()
            )
        );
        // A bound in words stays as the witness wrote it.
        let restarted = WitnessEvent {
            last_frame_at_ns: Some(heard),
            ..ev(
                "disconnect",
                heard + S,
                "the witness restarted while the writer was connected; writer last heard at the latest when its log was last written",
            )
        };
        assert_eq!(
            writer_end(&[connect.clone(), restarted.clone()]),
            WriterEnd::Unknown(restarted.detail.clone())
        );
        // Still connected: the silence as a span.
        assert_eq!(
            writer_end(&[connect, fetched(heard + 2_500_000_000, heard)]),
            WriterEnd::StillConnected(
                "the witness still held its connection when the acks were fetched, its last frame 2.5 s before"
                    .into()
            )
        );
    }
}
