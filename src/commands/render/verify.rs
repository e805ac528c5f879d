//! `plugpull verify`'s report on stdout: text, JSON, or the verdict line; for a device
//! and for a directory tree.

use super::Format;
use crate::tree::TreeVerified;
use crate::verify::report::Report;

/// The report of a device verify in `format`.
pub fn report(format: Format, r: &Report) -> Result<String, serde_json::Error> {
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(r)?),
        Format::Quiet => verdict_line(r),
        Format::Text => r.to_text(),
    })
}

/// The report of a directory verify in `format`: the device report's forms, in words
/// about the storage under the directory, with the tree's own section.
pub fn tree(format: Format, t: &TreeVerified) -> Result<String, serde_json::Error> {
    let r = &t.report.report;
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(&t.report)?),
        Format::Quiet => verdict_line(r),
        Format::Text => {
            let text = r
                .to_text()
                .replacen(
                    "In plain words: This drive",
                    "In plain words: The storage under this directory (file system and drive)",
                    1,
                )
                .replace("on this drive", "on this storage");
            text + &crate::tree::verify::tree_text(&t.report.tree)
        }
    })
}

fn verdict_line(r: &Report) -> String {
    format!("VERDICT: {} - {}\n", r.verdict.name(), r.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunDescriptor, RunLog, WriterSettings};

    fn log_started_at(started_at: &str) -> RunLog {
        RunLog {
            files: Default::default(),
            descriptor: RunDescriptor {
                run_id: crate::record::RunId([7; 16]),
                format_version: crate::record::FORMAT_VERSION,
                plugpull_version: String::new(),
                host: "bench-host".into(),
                started_at: started_at.into(),
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
            },
            acks: vec![],
            events: vec![],
        }
    }

    /// The header names the start to the second, in UTC, whatever the writer's offset:
    /// the descriptor's nanoseconds are for machines.
    #[test]
    fn the_run_header_shows_the_start_in_utc_seconds() {
        let r = crate::verify::dead_device_report(
            &log_started_at("2026-12-02T18:38:48.123456789+01:00"),
            "gone".into(),
        );
        let text = report(Format::Text, &r).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            "run 07070707070707070707070707070707 started 2026-12-02 17:38:48 UTC on bench-host (fdatasync, 4.0 KiB records, 1 stream(s), sequential)"
        );
        // A time that does not parse is shown as it came, escaped.
        let r = crate::verify::dead_device_report(&log_started_at("soon"), "gone".into());
        let text = report(Format::Text, &r).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            "run 07070707070707070707070707070707 started soon on bench-host (fdatasync, 4.0 KiB records, 1 stream(s), sequential)"
        );
    }
}
