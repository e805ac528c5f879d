//! The witness's log lines on stderr: one `key=value` line per connection event (see
//! docs/protocol.md), plus free-form notes at startup.
//!
//! Why apart: the format is an interface (operators grep it, tests read it), so it
//! lives in one place instead of beside each event's cause.

use crate::model::now_ns;
use crate::witness::server::shared::Shared;

/// A log line's time: local, to the millisecond (lines are read next to the writer's),
/// the zone named (`2026-11-30 12:00:01.123 +01:00`).
pub(super) fn fmt_ns(ns: u64) -> String {
    let t = chrono::DateTime::from_timestamp_nanos(ns as i64).with_timezone(&chrono::Local);
    t.format("%Y-%m-%d %H:%M:%S%.3f %:z").to_string()
}

/// A value in a `key=value` log line: bare when it is one simple word, else quoted.
fn kv_value(v: &str) -> String {
    if !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".:-_/[]".contains(&b))
    {
        v.to_string()
    } else {
        format!("{v:?}")
    }
}

impl Shared {
    pub(super) fn log(&self, msg: impl std::fmt::Display) {
        if !self.opts.quiet {
            eprintln!("{} witness: {msg}", fmt_ns(now_ns()));
        }
    }

    /// One structured line: `event=KIND key=value ...`, values quoted when needed.
    pub(super) fn event(&self, kind: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
        if self.opts.quiet {
            return;
        }
        let mut line = format!("event={kind}");
        for (k, v) in fields {
            line.push(' ');
            line.push_str(k);
            line.push('=');
            line.push_str(&kv_value(&v.to_string()));
        }
        self.log(line);
    }
}
