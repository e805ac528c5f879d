//! The page's tables: the device identity (at write and at verify), the counts by class,
//! one row per run, and the failing records of the worst run.
//!
//! Why apart from the page layout: each table is a self-contained reading of the input
//! (the device table alone merges identities across runs); the layout in `mod.rs` only
//! decides their order and the words around them.

use super::super::aggregate::{CLASSES, Summary};
use super::super::input::{Cycle, VerifyReport};
use super::super::svg::{self, esc};
use crate::model::RecordClass;
use crate::units::fmt_duration_ms;
use crate::units::{fmt_bytes, thousands};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

/// What each class means, for the counts table.
/// One wording for every output: `verify::plain`.
fn meaning(class: RecordClass) -> &'static str {
    crate::verify::plain::meaning(class)
}

pub(super) fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "yes" } else { "no" }.into()),
        other => Some(other.to_string()),
    }
}

/// Device fields in the order people look for them, then any others.
const DEVICE_ORDER: [&str; 13] = [
    "model",
    "serial",
    "firmware",
    "kind",
    "target",
    "disk",
    "size_bytes",
    "write_cache",
    "fua",
    "logical_sector_bytes",
    "physical_sector_bytes",
    "rotational",
    "loop_backing_file",
];

/// A device identity as labelled rows: nested objects (the `file` that holds a file or
/// loop target's bytes) become one row per field ("file inode"), not a line of JSON.
fn identity_rows(d: &BTreeMap<String, Value>) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for (k, v) in d {
        match v {
            Value::Object(fields) => {
                for (f, fv) in fields {
                    if let Some(t) = field_text(f, fv) {
                        rows.insert(format!("{k}: {}", field_label(f)), t);
                    }
                }
            }
            _ => {
                if let Some(t) = field_text(k, v) {
                    rows.insert(field_label(k).to_string(), t);
                }
            }
        }
    }
    rows
}

/// The label of an identity field, in words where the JSON name is terse.
fn field_label(key: &str) -> String {
    match key {
        "fs_dev" => "file system device".into(),
        "fsid" => "file system id".into(),
        "wwn" => "WWN".into(),
        "fua" => "FUA".into(),
        "size_bytes" => "size".into(),
        "offset" => "offset".into(),
        other => other.replace('_', " "),
    }
}

/// An identity field's value for people: sizes and offsets in units with the exact byte
/// count (thousands separated), everything else as it was recorded.
fn field_text(key: &str, v: &Value) -> Option<String> {
    let text = value_text(v)?;
    if key == "size_bytes" || key == "offset" {
        if let Some(b) = v.as_u64() {
            return Some(if b < 1024 {
                format!("{} bytes", thousands(b))
            } else {
                format!("{} ({} bytes)", fmt_bytes(b), thousands(b))
            });
        }
    }
    Some(text)
}

pub(super) fn device_table(o: &mut String, cycles: &[Cycle]) {
    // Distinct identities, each with where it was seen.
    let mut seen: Vec<(BTreeMap<String, Value>, Vec<String>)> = vec![];
    for c in cycles {
        let mut add =
            |d: &BTreeMap<String, Value>, when: &str| match seen.iter_mut().find(|(x, _)| x == d) {
                Some((_, w)) => {
                    if !w.iter().any(|x| x == when) {
                        w.push(when.to_string())
                    }
                }
                None => seen.push((d.clone(), vec![when.to_string()])),
            };
        if let Some(r) = &c.report.run {
            if !r.device.is_empty() {
                add(&r.device, "at write");
            }
        }
        if let Some(d) = &c.report.device {
            add(d, "at verify");
        }
    }
    if seen.is_empty() {
        o.push_str("<p class=\"note\">The input holds no device identity.</p>");
        return;
    }
    seen.truncate(6);
    let tables: Vec<BTreeMap<String, String>> =
        seen.iter().map(|(d, _)| identity_rows(d)).collect();
    let mut labels: Vec<String> = DEVICE_ORDER.iter().map(|k| field_label(k)).collect();
    for rows in &tables {
        for k in rows.keys() {
            if !labels.contains(k) {
                labels.push(k.clone());
            }
        }
    }
    o.push_str("<table id=\"device\"><tr><th></th>");
    for (_, when) in &seen {
        let _ = write!(o, "<th>{}</th>", esc(&when.join(" and ")));
    }
    o.push_str("</tr>");
    for label in labels {
        let vals: Vec<Option<&String>> = tables.iter().map(|rows| rows.get(&label)).collect();
        if vals.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(o, "<tr><th>{}</th>", esc(&label));
        for v in vals {
            let _ = write!(o, "<td>{}</td>", esc(v.map_or("unknown", String::as_str)));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

pub(super) fn counts_table(o: &mut String, s: &Summary) {
    o.push_str("<table id=\"counts\"><tr><th>class</th><th>records</th><th>share</th><th>meaning</th></tr>");
    for class in CLASSES {
        let n = s.counts.get(class);
        let share = if s.acked_records > 0 {
            format!("{:.2}%", 100.0 * n as f64 / s.acked_records as f64)
        } else {
            "-".into()
        };
        let cls = if n > 0 && class.is_failure() {
            " class=\"fail\""
        } else {
            ""
        };
        let _ = write!(
            o,
            "<tr id=\"count-{class}\"><td><span class=\"sw\" style=\"background:{}\"></span>{class}</td><td class=\"n\"{cls}>{}</td><td class=\"n\">{share}</td><td>{}</td></tr>",
            svg::class_colour(class),
            thousands(n),
            meaning(class)
        );
    }
    let _ = write!(
        o,
        "<tr><th>all acknowledged</th><td class=\"n\">{}</td><td class=\"n\">100%</td><td></td></tr></table>",
        thousands(s.acked_records)
    );
}

fn settings_text(r: &VerifyReport) -> String {
    let Some(run) = &r.run else {
        return String::new();
    };
    let g = |k: &str| run.settings.get(k).and_then(value_text).unwrap_or_default();
    let (lo, hi) = (
        g("record_bytes_min").parse::<u64>().unwrap_or(0),
        g("record_bytes_max").parse::<u64>().unwrap_or(0),
    );
    let size = if lo == hi {
        fmt_bytes(lo)
    } else {
        format!("{}-{}", fmt_bytes(lo), fmt_bytes(hi))
    };
    format!(
        "{} records, {}, {} stream(s), {}{}",
        size,
        g("placement"),
        g("streams"),
        g("flush"),
        if g("direct") == "no" {
            ", page cache"
        } else {
            ", O_DIRECT"
        }
    )
}

pub(super) fn runs_table(o: &mut String, cycles: &[Cycle]) {
    o.push_str("<table id=\"runs\"><tr><th>#</th><th>source</th><th>run</th><th>started</th><th>verdict</th><th>acked</th><th>failing</th><th>loss window</th><th>ordering holes</th><th>writer</th></tr>");
    for (k, c) in cycles.iter().enumerate() {
        let r = &c.report;
        let failing = r.summary.counts.failing();
        let (id, started) = r
            .run
            .as_ref()
            .map(|x| {
                let started = crate::units::fmt_utc_rfc3339(&x.started_at)
                    .unwrap_or_else(|| x.started_at.clone());
                (x.run_id.clone(), started)
            })
            .unwrap_or_default();
        let _ = write!(
            o,
            "<tr><td class=\"n\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td style=\"color:{};font-weight:bold\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            k + 1,
            esc(&c.label),
            esc(&id),
            esc(&started),
            svg::verdict_colour(r.summary.verdict),
            r.summary.verdict,
            thousands(r.acked_records),
            thousands(failing),
            r.summary
                .loss_window
                .as_ref()
                .map(|w| format!(
                    "{} ({}, {} records)",
                    fmt_duration_ms(w.ms),
                    fmt_bytes(w.bytes),
                    thousands(w.records)
                ))
                .unwrap_or_else(|| "-".into()),
            thousands(r.summary.ordering_holes),
            esc(&settings_text(r)),
        );
    }
    o.push_str("</table>");
}

pub(super) fn findings_table(o: &mut String, c: &Cycle) {
    let r = &c.report;
    if r.findings.is_empty() {
        return;
    }
    let mut f: Vec<_> = r.findings.iter().collect();
    f.sort_by(|a, b| {
        a.acked_ms_before_last_ack
            .total_cmp(&b.acked_ms_before_last_ack)
    });
    let _ = write!(
        o,
        "<h2>Failing records</h2><p>{} of {} failing records of {}, most recently acknowledged first (the full list is in the JSON report).</p>",
        f.len().min(20),
        thousands(
            r.summary
                .loss_window
                .as_ref()
                .map_or(f.len() as u64, |w| w.records)
        ),
        esc(&c.label)
    );
    o.push_str("<table id=\"findings\"><tr><th>class</th><th>stream</th><th>seq</th><th>offset</th><th>length</th><th>acked before the last ack</th><th>sectors found</th><th>ordering hole</th></tr>");
    for x in f.iter().take(20) {
        let sectors = x
            .sectors
            .iter()
            .map(|(k, v)| format!("{} {k}", thousands(*v)))
            .collect::<Vec<_>>()
            .join(", ");
        let extra = x
            .corrupt_bits
            .map(|b| format!(", {} bits flipped", thousands(b)))
            .unwrap_or_default()
            + &x.found_at
                .map(|a| format!(", found at {a}"))
                .unwrap_or_default();
        let _ = write!(
            o,
            "<tr><td><span class=\"sw\" style=\"background:{}\"></span>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}{}</td><td>{}</td></tr>",
            svg::class_colour(x.class),
            x.class,
            x.stream,
            x.seq,
            x.offset,
            fmt_bytes(x.len_bytes),
            esc(&fmt_duration_ms(x.acked_ms_before_last_ack)),
            esc(&sectors),
            esc(&extra),
            if x.ordering_hole { "yes" } else { "no" }
        );
    }
    o.push_str("</table>");
}
