//! What `plugpull report` says after writing its page: the skipped inputs on stderr,
//! then a line (or JSON) naming the page on stdout; nothing on stdout when the page
//! itself went there.

use crate::report::{Shown, Written};
use crate::units::thousands;

/// The notes on skipped inputs, one line each (for stderr); none when quiet.
pub fn notes(w: &Written, quiet: bool) -> String {
    if quiet {
        return String::new();
    }
    w.notes.iter().map(|n| format!("plugpull: {n}\n")).collect()
}

/// What was written (for stdout).
pub fn written(w: &Written, json: bool, quiet: bool) -> Result<String, serde_json::Error> {
    if w.to_stdout {
        return Ok(String::new());
    }
    if json {
        let v = serde_json::json!({
            "format": "plugpull-report/1",
            "output": w.output.display().to_string(),
            "bytes": w.bytes,
            "summary": w.summary,
            "skipped": w.notes,
        });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&v)?));
    }
    if quiet {
        return Ok(String::new());
    }
    let what = match &w.summary {
        Shown::Cycles(s) => format!(
            "{} cycle(s), verdict {}",
            thousands(s.cycles as u64),
            s.verdict
        ),
        Shown::Fleet {
            verdict,
            drives,
            cuts,
        } => format!("{drives} drives, {cuts} cuts each, verdict {verdict}"),
    };
    Ok(format!(
        "wrote {} ({what}, {} KiB)\n",
        w.output.display(),
        thousands(w.bytes.div_ceil(1024) as u64)
    ))
}
