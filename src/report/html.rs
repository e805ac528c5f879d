//! The HTML page: verdict banner, key numbers, charts, tables, the exact commands.
//!
//! Why one self-contained file: it is handed to colleagues or attached to a vendor claim,
//! opened offline and archived. So: inline CSS, inline SVG, no scripts, no fonts, no
//! images, no links that fetch anything. Tests check that.

use super::aggregate::{CLASSES, Summary, latency_quantile_us};
use super::input::{Cycle, VerifyReport};
use super::svg::{self, Marker, esc, fmt_ms, fmt_us};
use crate::model::{RecordClass, Verdict};
use crate::units::fmt_bytes;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

const CSS: &str = "
body{font-family:sans-serif;margin:0 auto;max-width:1000px;padding:16px 24px;color:#222;line-height:1.4}
h1{font-size:22px;margin:8px 0} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
.banner{color:#fff;padding:14px 20px;border-radius:6px;margin:12px 0}
.banner .verdict{font-size:34px;font-weight:bold;letter-spacing:1px}
.banner .why{font-size:17px}
.numbers{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.num{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:140px}
.num b{display:block;font-size:22px} .num span{font-size:12px;color:#555}
table{border-collapse:collapse;margin:6px 0;font-size:14px} td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.n{text-align:right;font-variant-numeric:tabular-nums}
.sw{display:inline-block;width:12px;height:12px;margin-right:6px;vertical-align:-1px}
pre{background:#f6f6f6;border:1px solid #ddd;padding:8px;white-space:pre-wrap;word-break:break-all;font-size:13px}
.chart{margin:10px 0;border:1px solid #eee}
.note{color:#555;font-size:13px}
.fail{color:#c62828;font-weight:bold}
@media print{.chart{break-inside:avoid}}
";

/// What each class means, for the counts table.
fn meaning(class: RecordClass) -> &'static str {
    match class {
        RecordClass::Intact => "read back exactly as written",
        RecordClass::Superseded => "legitimately overwritten later by this run (not a failure)",
        RecordClass::Lost => "old or never-written content where an acknowledged record should be",
        RecordClass::Shorn => "some sectors new, the rest old: a torn write",
        RecordClass::Corrupt => "stamp or content bits wrong",
        RecordClass::Stale => "a record of another run where this one should be",
        RecordClass::Misdirected => "found at the wrong place, or a foreign record here",
        RecordClass::Unreadable => "read failed or hung",
    }
}

/// `argv` as one line a shell would take back.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn value_text(v: &Value) -> Option<String> {
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

fn device_table(o: &mut String, cycles: &[Cycle]) {
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
    let mut keys: Vec<String> = DEVICE_ORDER.iter().map(|s| s.to_string()).collect();
    for (d, _) in &seen {
        for k in d.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    o.push_str("<table id=\"device\"><tr><th></th>");
    for (_, when) in &seen {
        let _ = write!(o, "<th>{}</th>", esc(&when.join(" and ")));
    }
    o.push_str("</tr>");
    for k in keys {
        let vals: Vec<Option<String>> = seen
            .iter()
            .map(|(d, _)| {
                d.get(&k).and_then(value_text).map(|v| {
                    if k == "size_bytes" {
                        v.parse::<u64>()
                            .map(|b| format!("{} ({b} bytes)", fmt_bytes(b)))
                            .unwrap_or(v)
                    } else {
                        v
                    }
                })
            })
            .collect();
        if vals.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(o, "<tr><th>{}</th>", esc(&k.replace('_', " ")));
        for v in vals {
            let _ = write!(o, "<td>{}</td>", esc(v.as_deref().unwrap_or("unknown")));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
}

fn counts_table(o: &mut String, s: &Summary) {
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
            "<tr id=\"count-{class}\"><td><span class=\"sw\" style=\"background:{}\"></span>{class}</td><td class=\"n\"{cls}>{n}</td><td class=\"n\">{share}</td><td>{}</td></tr>",
            svg::class_colour(class),
            meaning(class)
        );
    }
    let _ = write!(
        o,
        "<tr><th>all acknowledged</th><td class=\"n\">{}</td><td class=\"n\">100%</td><td></td></tr></table>",
        s.acked_records
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

fn runs_table(o: &mut String, cycles: &[Cycle]) {
    o.push_str("<table id=\"runs\"><tr><th>#</th><th>source</th><th>run</th><th>started</th><th>verdict</th><th>acked</th><th>failing</th><th>loss window</th><th>ordering holes</th><th>writer</th></tr>");
    for (k, c) in cycles.iter().enumerate() {
        let r = &c.report;
        let failing = r.summary.counts.failing();
        let (id, started) = r
            .run
            .as_ref()
            .map(|x| (x.run_id.clone(), x.started_at.clone()))
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
            r.acked_records,
            failing,
            r.summary
                .loss_window
                .as_ref()
                .map(|w| format!(
                    "{} ({}, {} records)",
                    fmt_ms(w.ms),
                    fmt_bytes(w.bytes),
                    w.records
                ))
                .unwrap_or_else(|| "-".into()),
            r.summary.ordering_holes,
            esc(&settings_text(r)),
        );
    }
    o.push_str("</table>");
}

fn findings_table(o: &mut String, c: &Cycle) {
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
        r.summary
            .loss_window
            .as_ref()
            .map_or(f.len() as u64, |w| w.records),
        esc(&c.label)
    );
    o.push_str("<table id=\"findings\"><tr><th>class</th><th>stream</th><th>seq</th><th>offset</th><th>length</th><th>acked before the last ack</th><th>sectors found</th><th>ordering hole</th></tr>");
    for x in f.iter().take(20) {
        let sectors = x
            .sectors
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ");
        let extra = x
            .corrupt_bits
            .map(|b| format!(", {b} bits flipped"))
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
            esc(&fmt_ms(x.acked_ms_before_last_ack)),
            esc(&sectors),
            esc(&extra),
            if x.ordering_hole { "yes" } else { "no" }
        );
    }
    o.push_str("</table>");
}

fn number(o: &mut String, id: &str, value: &str, label: &str) {
    let _ = write!(
        o,
        "<div class=\"num\" id=\"num-{id}\"><b>{}</b><span>{}</span></div>",
        esc(value),
        esc(label)
    );
}

/// A latency percentile: exact from the report for one run; for several, the upper edge of
/// the merged bucket holding it (never understated).
fn quantile(cycles: &[Cycle], s: &Summary, q: f64) -> Option<f64> {
    match (cycles, q) {
        ([c], 0.5) => c.report.flush_latency.as_ref().map(|l| l.p50_us),
        ([c], 0.99) => c.report.flush_latency.as_ref().map(|l| l.p99_us),
        _ => latency_quantile_us(&s.latency, q),
    }
}

/// The banner sentence: the run's own summary, or the campaign's tally.
fn banner_text(cycles: &[Cycle], s: &Summary) -> String {
    if cycles.len() == 1 {
        return cycles[0].report.summary.summary.clone();
    }
    let mut t = format!(
        "{} cycles: {}",
        s.cycles,
        s.cycles_by_verdict
            .iter()
            .map(|(v, n)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if s.verdict == Verdict::Pass {
        let _ = write!(
            t,
            ". No loss in {} cycles: with 95% confidence fewer than {:.1}% of cuts would lose data (rule of three: 3/{}).",
            s.cycles,
            300.0 / s.cycles as f64,
            s.cycles
        );
    } else if s.verdict == Verdict::Fail {
        t += &format!(
            "; {} acknowledged records did not survive in all.",
            s.failing_records
        );
    }
    t
}

/// The whole page. `made_by` is the `plugpull report` command line; `notes` lists inputs
/// that were skipped.
pub fn render(
    cycles: &[Cycle],
    s: &Summary,
    title: Option<&str>,
    made_by: &str,
    notes: &[String],
) -> String {
    let model = cycles
        .iter()
        .find_map(|c| {
            c.report
                .device
                .as_ref()
                .and_then(|d| d.get("model"))
                .and_then(value_text)
        })
        .unwrap_or_else(|| cycles[0].report.target.clone());
    let title = title
        .map(str::to_string)
        .unwrap_or_else(|| format!("plugpull: {} - {}", model, s.verdict));
    let mut o = String::with_capacity(64 * 1024);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"generator\" content=\"plugpull {}\"><title>{}</title><style>{CSS}</style></head><body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(&title)
    );
    let _ = write!(o, "<h1>{}</h1>", esc(&title));
    let _ = write!(
        o,
        "<div class=\"banner\" id=\"verdict\" data-verdict=\"{v}\" style=\"background:{}\"><div class=\"verdict\">{v}</div><div class=\"why\">{}</div></div>",
        svg::verdict_colour(s.verdict),
        esc(&banner_text(cycles, s)),
        v = s.verdict,
    );

    o.push_str("\n<div class=\"numbers\">");
    number(
        &mut o,
        "acked",
        &s.acked_records.to_string(),
        "acknowledged records",
    );
    number(
        &mut o,
        "failing",
        &s.failing_records.to_string(),
        "did not survive intact",
    );
    number(
        &mut o,
        "loss-window",
        &s.loss_window_ms_max
            .map(fmt_ms)
            .unwrap_or_else(|| "none".into()),
        if cycles.len() > 1 {
            "largest loss window"
        } else {
            "loss window (ack age of oldest failing record)"
        },
    );
    let holes: u64 = cycles.iter().map(|c| c.report.summary.ordering_holes).sum();
    number(&mut o, "holes", &holes.to_string(), "ordering holes");
    if let (Some(p50), Some(p99)) = (quantile(cycles, s, 0.5), quantile(cycles, s, 0.99)) {
        number(
            &mut o,
            "latency",
            &format!("{} / {}", fmt_us(p50), fmt_us(p99)),
            "write+flush latency p50 / p99",
        );
    }
    if cycles.len() > 1 {
        number(&mut o, "cycles", &s.cycles.to_string(), "cycles");
    }
    o.push_str("</div>\n");

    if cycles.len() > 1 {
        o.push_str("<h2>Campaign</h2>");
        let v: Vec<(String, Verdict)> = cycles
            .iter()
            .map(|c| (c.label.clone(), c.report.summary.verdict))
            .collect();
        o.push_str(&svg::cycles(&v));
        let mut lw: BTreeMap<usize, (f64, u64)> = BTreeMap::new();
        for w in cycles
            .iter()
            .filter_map(|c| c.report.summary.loss_window.as_ref())
        {
            let i = crate::verify::distribution::bucket_125(w.ms);
            let lo = if i == 0 {
                0.0
            } else {
                crate::verify::distribution::edge_125(i - 1)
            };
            lw.entry(i).or_insert((lo, 0)).1 += 1;
        }
        let data: Vec<(f64, u64)> = lw.into_values().collect();
        o.push_str(&svg::log_bars(
            "chart-loss-window",
            "Loss window of the failing cycles",
            "how long before the last ack the oldest failing record was acknowledged (log scale)",
            "failing cycles",
            &data,
            fmt_ms,
            "#c62828",
            &[],
        ));
    }

    o.push_str("<h2>Around the cut</h2>");
    if s.has_timeline {
        o.push_str(&svg::timeline(&s.timeline, s.loss_window_ms_max));
        o.push_str("<p class=\"note\">Each column holds the records acknowledged in one interval before the run's last ack; its colours show what share of them survived. The number above is the record count (failing/all where some failed). A drive that keeps its promises is all green and grey; losses cluster at the right, just before the cut. Grey (superseded) records were overwritten later by the same run: not a failure.</p>");
    } else {
        o.push_str("<p class=\"note\">This report has no <code>ack_timeline</code> (made by an older plugpull): only the counts below are available.</p>");
    }
    counts_table(&mut o, s);

    o.push_str("<h2>Flush latency</h2>");
    if s.has_latency {
        let markers: Vec<Marker> = [(0.5, "p50"), (0.99, "p99")]
            .iter()
            .filter_map(|(q, name)| {
                quantile(cycles, s, *q).map(|v| Marker {
                    value: v,
                    label: format!("{name} {}", fmt_us(v)),
                })
            })
            .collect();
        let data: Vec<(f64, u64)> = s.latency.iter().map(|b| (b.from_us, b.count)).collect();
        o.push_str(&svg::log_bars(
            "chart-latency",
            "Write + flush latency of every acknowledged record",
            "from write submission to flush completion, writer clock (log scale)",
            "records",
            &data,
            fmt_us,
            "#1565c0",
            &markers,
        ));
        o.push_str("<p class=\"note\">A drive without power-loss protection that really writes to non-volatile media needs on the order of a millisecond or more per flush. Flushes in the tens of microseconds mean a cache answered: fine with power-loss protection, a lie without it. Only the power cut tells which (docs/FAQ.md).</p>");
    } else {
        o.push_str("<p class=\"note\">This report has no <code>flush_latency</code> (made by an older plugpull).</p>");
    }

    o.push_str("<h2>Device</h2>");
    device_table(&mut o, cycles);

    o.push_str("<h2>Runs</h2>");
    runs_table(&mut o, cycles);
    for c in cycles {
        if let Some(d) = &c.report.summary.dead_device {
            let _ = write!(
                o,
                "<p class=\"fail\">{}: dead device: {}</p>",
                esc(&c.label),
                esc(d)
            );
        }
        for (off, len, why) in c.report.unreadable_ranges.iter().take(5) {
            let _ = write!(
                o,
                "<p>{}: unreadable {} at offset {off}: {}</p>",
                esc(&c.label),
                fmt_bytes(*len),
                esc(why)
            );
        }
    }

    if let Some(worst) = cycles
        .iter()
        .filter(|c| !c.report.findings.is_empty())
        .max_by_key(|c| c.report.findings.len())
    {
        findings_table(&mut o, worst);
    }

    o.push_str("<h2>Commands</h2><p>The writer command line of each run (from the run descriptor the witness holds):</p>");
    let mut cmds: Vec<String> = vec![];
    for c in cycles {
        if let Some(r) = &c.report.run {
            if !r.command.is_empty() {
                let line = shell_line(&r.command);
                if !cmds.contains(&line) {
                    cmds.push(line);
                }
            }
        }
    }
    if cmds.is_empty() {
        o.push_str("<p class=\"note\">The input holds no command lines.</p>");
    }
    for (k, cmd) in cmds.iter().enumerate().take(20) {
        let _ = write!(
            o,
            "<pre class=\"command\" id=\"command-{}\">{}</pre>",
            k + 1,
            esc(cmd)
        );
    }
    if cmds.len() > 20 {
        let _ = write!(o, "<p class=\"note\">... and {} more.</p>", cmds.len() - 20);
    }
    let _ = write!(
        o,
        "<p>This page was made with:</p><pre class=\"command\" id=\"made-by\">{}</pre>",
        esc(made_by)
    );
    for n in notes {
        let _ = write!(o, "<p class=\"note\">{}</p>", esc(n));
    }
    let _ = write!(
        o,
        "<p class=\"note\">plugpull {} · generated {} · verify reports: format plugpull-verify/1 (docs/report.md)</p></body></html>",
        env!("CARGO_PKG_VERSION"),
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC")
    );
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_lines_quote_what_needs_it() {
        let a = [
            "plugpull",
            "write",
            "/dev/sdb",
            "--witness",
            "w:7420",
            "it's here",
        ]
        .map(String::from);
        assert_eq!(
            shell_line(&a),
            "plugpull write /dev/sdb --witness w:7420 'it'\\''s here'"
        );
    }
}
