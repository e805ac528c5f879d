//! `plugpull runs`: asks the witness for a summary of every run it holds (a Fetch with
//! the list selector; docs/protocol.md) and sorts them newest first.
//!
//! Why the client sorts: the witness sends runs in file order; "newest first" is a
//! matter of presentation, decided where the list is shown.

use crate::model::peer_text::shown;
use crate::wire::auth::Key;
use crate::wire::msg::{Msg, RunInfo, VerdictMark};
use crate::witness::client::connect::{FrameReader, authenticate, connect_stream, encode_sealed};
use crate::witness::client::error::{ClientResult, Context, refuse};
use std::io::Write;
use std::time::Duration;

/// Listing reads every log at the witness: allow it time.
const LIST_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Every run the witness at `addr` holds, the one it heard of last first.
pub fn list_runs(addr: &str, key: Option<&Key>) -> ClientResult<Vec<RunInfo>> {
    let mut s = connect_stream(addr)?;
    s.set_read_timeout(Some(LIST_READ_TIMEOUT))?;
    let mut r = FrameReader::default();
    let mut session = authenticate(&mut s, &mut r, addr, key)?;
    s.write_all(&encode_sealed(&Msg::ListRuns, session.as_mut()))
        .with_context(|| format!("asking the witness at {addr} for its runs"))?;
    let mut opener = session.map(|x| x.opener);
    let mut runs = vec![];
    loop {
        let m = r
            .next(&mut s, opener.as_mut())
            .with_context(|| format!("listing the runs of the witness at {addr}"))?;
        match m {
            Some(Msg::RunInfo(i)) => runs.push(*i),
            Some(Msg::FetchEnd { acks: n }) => {
                if n != runs.len() as u64 {
                    refuse!("the witness announced {n} runs but sent {}", runs.len());
                }
                break;
            }
            Some(Msg::Error { message }) if message.contains("unknown selector") => refuse!(
                "the witness at {addr} cannot list runs (it runs an older plugpull): \
                 upgrade it, or fetch a run by --run or --target"
            ),
            Some(Msg::Error { message }) => {
                refuse!("the witness at {addr}: {}", shown(&message))
            }
            Some(m) => refuse!("unexpected {:?} frame in the run list", m.frame_type()),
            None => refuse!("the witness at {addr} closed the connection before the list ended"),
        }
    }
    sort_newest_first(&mut runs);
    Ok(runs)
}

/// Tells the witness at `addr` the verdict a verify reached on a run, so `plugpull runs`
/// shows it. Returns how many verdicts the witness now holds for the run.
pub fn record_verdict(addr: &str, key: Option<&Key>, mark: &VerdictMark) -> ClientResult<u64> {
    let mut s = connect_stream(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut r = FrameReader::default();
    let mut session = authenticate(&mut s, &mut r, addr, key)?;
    let msg = Msg::RecordVerdict(Box::new(mark.clone()));
    s.write_all(&encode_sealed(&msg, session.as_mut()))
        .with_context(|| format!("telling the witness at {addr} the verdict"))?;
    let mut opener = session.map(|x| x.opener);
    let m = r
        .next(&mut s, opener.as_mut())
        .with_context(|| format!("telling the witness at {addr} the verdict"))?;
    match m {
        Some(Msg::FetchEnd { acks: notes }) => Ok(notes),
        Some(Msg::Error { message }) if message.contains("unknown selector") => {
            refuse!("the witness at {addr} runs an older plugpull that cannot store verdicts")
        }
        Some(Msg::Error { message }) => {
            refuse!("the witness at {addr}: {}", shown(&message))
        }
        Some(m) => refuse!("unexpected {:?} frame after a verdict", m.frame_type()),
        None => refuse!("the witness at {addr} closed the connection without an answer"),
    }
}

/// The run the witness heard of last first, by the witness's clock (`first_heard_ns`):
/// the writers' clocks may be wrong (a host without a working RTC after a power cut).
/// Only a witness too old to send that time is sorted by `started_at`.
pub fn sort_newest_first(runs: &mut [RunInfo]) {
    let writer_clock = |i: &RunInfo| {
        chrono::DateTime::parse_from_rfc3339(&i.descriptor.started_at)
            .map(|d| d.timestamp_nanos_opt().unwrap_or(i64::MIN))
            .unwrap_or(i64::MIN)
    };
    if runs.iter().all(|i| i.first_heard_ns.is_some()) {
        runs.sort_by_key(|i| std::cmp::Reverse((i.first_heard_ns, i.descriptor.run_id.hex())));
    } else {
        runs.sort_by_key(|i| std::cmp::Reverse(writer_clock(i)));
    }
}

/// The drive of a run in words: model and serial when known, else the path written to.
/// Raw, as the writer sent it: JSON output takes it so; text output escapes it.
fn drive(i: &RunInfo) -> String {
    let d = &i.descriptor.device;
    if d.kind == "file" {
        return d.target.clone();
    }
    match (&d.model, &d.serial) {
        (Some(m), Some(s)) => format!("{m} serial {s} ({})", d.target),
        (Some(m), None) => format!("{m} ({})", d.target),
        (None, Some(s)) => format!("serial {s} ({})", d.target),
        (None, None) => d.target.clone(),
    }
}

/// A writer-clock time (ns since the epoch) as UTC with milliseconds, for the JSON's
/// `durable_up_to` (a documented field; the text listing reads to the second).
fn utc_ms(ns: u64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns as i64)
        .format("%Y-%m-%d %H:%M:%S%.3f")
        .to_string()
}

/// The latest verdict in a few words: "FAIL 2026-11-30 14:02:10 UTC", or "not
/// verified"; escaped (a witness older than the note checks may hold any string).
fn verified(i: &RunInfo) -> String {
    let Some(m) = &i.verified else {
        return "not verified".into();
    };
    let when = crate::units::fmt_utc_rfc3339(&m.verified_at).unwrap_or_default();
    format!("{} {when}", shown(&m.verdict))
        .trim_end()
        .to_string()
}

/// The list for people: one line per run, newest first, under a header. Every string
/// the witness sent is escaped (`model::peer_text`): writers chose them.
pub fn runs_text(runs: &[RunInfo]) -> String {
    if runs.is_empty() {
        return "the witness holds no runs\n".into();
    }
    let mut o = format!(
        "{:<32}  {:<23}  {:>13}  {:<23}  {:<12}  {:<28}  drive\n",
        "run", "started", "acks", "durable up to", "host", "verified"
    );
    for i in runs {
        let d = &i.descriptor;
        let started = crate::units::fmt_utc_rfc3339(&d.started_at)
            .unwrap_or_else(|| shown(&d.started_at).into_owned());
        o += &format!(
            "{:<32}  {:<23}  {:>13}  {:<23}  {:<12}  {:<28}  {}{}\n",
            d.run_id.hex(),
            started,
            crate::units::thousands(i.acks),
            i.last_flushed_ns
                .map(crate::units::fmt_utc_ns)
                .unwrap_or_else(|| "-".into()),
            shown(&d.host),
            verified(i),
            shown(&drive(i)),
            if i.damaged { "  [log damaged]" } else { "" },
        );
    }
    o
}

/// The list as JSON (`plugpull-runs/1`, docs/protocol.md "Listing runs").
pub fn runs_json(runs: &[RunInfo]) -> serde_json::Value {
    serde_json::json!({
        "format": "plugpull-runs/1",
        "runs": runs.iter().map(|i| serde_json::json!({
            "run_id": i.descriptor.run_id.hex(),
            "started_at": i.descriptor.started_at,
            "host": i.descriptor.host,
            "device_key": i.descriptor.device.key(),
            "drive": drive(i),
            "acks": i.acks,
            "durable_up_to_ns": i.last_flushed_ns,
            "durable_up_to": i.last_flushed_ns.map(utc_ms),
            "log_damaged": i.damaged,
            "verified": i.verified.as_ref().map(|m| serde_json::json!({
                "verdict": m.verdict,
                "failing": m.failing,
                "target": m.target,
                "verified_at": m.verified_at,
            })),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDescriptor, WriterSettings};

    fn verified_run() -> RunInfo {
        let mut descriptor = RunDescriptor {
            run_id: crate::record::RunId([7; 16]),
            format_version: crate::record::FORMAT_VERSION,
            plugpull_version: String::new(),
            host: "bench-host".into(),
            started_at: "2026-12-02T03:40:05.5+01:00".into(),
            device: Default::default(),
            settings: WriterSettings {
                region_offset: 0,
                region_bytes: 1 << 16,
                record_bytes_min: 4096,
                record_bytes_max: 4096,
                placement: "sequential".into(),
                streams: 1,
                flush: crate::device::FlushMethod::Fdatasync,
                direct: true,
                seed: 0,
                max_records_unacked: None,
                io: Default::default(),
            },
            command: vec![],
            tree: None,
        };
        descriptor.device.kind = "file".into();
        descriptor.device.target = "/srv/a.img".into();
        RunInfo {
            descriptor,
            acks: 32_715,
            // 2026-12-02 02:50:48.123456789 UTC.
            last_flushed_ns: Some(1_796_179_848_123_456_789),
            damaged: false,
            verified: Some(VerdictMark {
                run_id: "07".repeat(16),
                verdict: "PASS".into(),
                failing: 0,
                target: "/srv/a.img".into(),
                verified_at: "2026-12-02T03:52:10.25+01:00".into(),
            }),
            first_heard_ns: None,
        }
    }

    /// A row names every time with its year, in UTC to the second with the zone, as
    /// every text time reads, and the count of acks with thousands separators.
    #[test]
    fn a_run_reads_with_dated_utc_times_and_separated_counts() {
        let text = runs_text(&[verified_run()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "run                               started                           acks  durable up to            host          verified                      drive",
                "07070707070707070707070707070707  2026-12-02 02:40:05 UTC         32,715  2026-12-02 02:50:48 UTC  bench-host    PASS 2026-12-02 02:52:10 UTC  /srv/a.img",
            ]
        );
    }
}
