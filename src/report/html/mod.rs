//! The HTML page: verdict banner, key numbers, charts, tables, the exact commands.
//!
//! Why one self-contained file: it is handed to colleagues or attached to a vendor claim,
//! opened offline and archived. So: inline CSS, inline SVG, no scripts, no fonts, no
//! images, no links that fetch anything. Tests check that. The tables are in `tables`;
//! this file lays out the page, one function per section.

pub mod fleet;
mod tables;

use super::aggregate::{Summary, latency_quantile_us};
use super::input::Cycle;
use super::svg::{self, Marker, esc};
use crate::model::Verdict;
use crate::units::{fmt_bytes, thousands};
use crate::units::{fmt_duration_ms, fmt_duration_us};
use std::collections::BTreeMap;
use std::fmt::Write;
use tables::{counts_table, device_table, findings_table, runs_table, value_text};

const CSS: &str = "
body{font-family:sans-serif;margin:0 auto;max-width:1000px;padding:16px 24px;color:#222;line-height:1.4}
h1{font-size:22px;margin:8px 0} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}
.banner{color:#fff;padding:14px 20px;border-radius:6px;margin:12px 0}
.banner .verdict{font-size:34px;font-weight:bold;letter-spacing:1px}
.banner .why{font-size:17px}
.plain{font-size:17px;margin:8px 0 16px}
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
        thousands(s.cycles as u64),
        s.cycles_by_verdict
            .iter()
            .map(|(v, n)| format!("{} {v}", thousands(*n as u64)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if s.verdict == Verdict::Pass {
        let _ = write!(
            t,
            ". No loss in {} cycles: with 95% confidence fewer than {:.1}% of cuts would lose data (rule of three: 3/{}).",
            thousands(s.cycles as u64),
            300.0 / s.cycles as f64,
            thousands(s.cycles as u64)
        );
    } else if s.verdict == Verdict::Fail {
        t += &format!(
            "; {} acknowledged records did not survive in all.",
            thousands(s.failing_records)
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
    let mut o = String::with_capacity(64 * 1024);
    head_and_banner(&mut o, cycles, s, title);
    key_numbers(&mut o, cycles, s);
    if cycles.len() > 1 {
        campaign_charts(&mut o, cycles);
    }
    around_the_cut(&mut o, cycles, s);
    if cycles.iter().any(|c| c.report.fall.is_some()) {
        proof_of_the_cut(&mut o, cycles);
    }
    flush_latency(&mut o, cycles, s);
    o.push_str("<h2>Device</h2>");
    device_table(&mut o, cycles);
    runs(&mut o, cycles);
    if let Some(worst) = cycles
        .iter()
        .filter(|c| !c.report.findings.is_empty())
        .max_by_key(|c| c.report.findings.len())
    {
        findings_table(&mut o, worst);
    }
    commands_and_footer(&mut o, cycles, made_by, notes);
    o
}

/// The drive the cycles tested, for the title: its model (else its target), or how many
/// drives when the runs tested more than one (their latencies are not one drive's).
fn what_was_tested(cycles: &[Cycle]) -> String {
    let field = |c: &Cycle, k: &str| {
        let d = c
            .report
            .device
            .as_ref()
            .or(c.report.run.as_ref().map(|r| &r.device));
        d.and_then(|d| d.get(k)).and_then(value_text)
    };
    let mut drives: Vec<(Option<String>, Option<String>)> = cycles
        .iter()
        .map(|c| (field(c, "model"), field(c, "serial")))
        .filter(|d| *d != (None, None))
        .collect();
    drives.sort();
    drives.dedup();
    match drives.as_slice() {
        [] => match cycles[0].report.target.as_str() {
            "" => "a drive".into(),
            t => t.to_string(),
        },
        [(Some(model), _)] => model.clone(),
        [(None, Some(serial))] => format!("serial {serial}"),
        more => format!("{} drives", more.len()),
    }
}

/// The document's head, with `title`, and the title as the page's heading.
fn head(o: &mut String, title: &str) {
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<meta name=\"generator\" content=\"plugpull {}\"><title>{}</title><style>{CSS}</style></head><body>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title)
    );
    let _ = write!(o, "<h1>{}</h1>", esc(title));
}

/// The document head, the title and the verdict banner.
fn head_and_banner(o: &mut String, cycles: &[Cycle], s: &Summary, title: Option<&str>) {
    let title = title
        .map(str::to_string)
        .unwrap_or_else(|| format!("plugpull: {} - {}", what_was_tested(cycles), s.verdict));
    head(o, &title);
    let _ = write!(
        o,
        "<div class=\"banner\" id=\"verdict\" data-verdict=\"{v}\" style=\"background:{}\"><div class=\"verdict\">{v}</div><div class=\"why\">{}</div></div>",
        svg::verdict_colour(s.verdict),
        esc(&banner_text(cycles, s)),
        v = s.verdict,
    );
    let _ = write!(
        o,
        "<p class=\"plain\" id=\"plain\">{}</p>",
        esc(&plain_text(cycles, s))
    );
}

/// The verdict in plain words: the run's own `plain` (or, for a report made before it
/// existed, the same sentence built from its summary); for several runs, the campaign's.
fn plain_text(cycles: &[Cycle], s: &Summary) -> String {
    use crate::verify::plain;
    if let [c] = cycles {
        if !c.report.plain.is_empty() {
            return c.report.plain.clone();
        }
        return plain::sentence(&plain::Facts::from_summary(&c.report.summary));
    }
    let n = |v: Verdict| s.cycles_by_verdict.get(v.name()).copied().unwrap_or(0) as u64;
    let judged = n(Verdict::Pass) + n(Verdict::Fail);
    plain::campaign_sentence(&plain::CampaignFacts {
        cycles: s.cycles as u64,
        passed: n(Verdict::Pass),
        failed: n(Verdict::Fail),
        lost_records: s.failing_records,
        cut_not_proven: cycles
            .iter()
            .filter(|c| c.report.cut_proven == Some(false))
            .count() as u64,
        dead_cycles: cycles
            .iter()
            .filter(|c| c.report.summary.dead_device.is_some())
            .count() as u64,
        // The rule of three, as the banner says it.
        upper_95: if judged == 0 {
            1.0
        } else {
            (3.0 / judged as f64).min(1.0)
        },
    })
}

/// The row of big numbers under the banner.
fn key_numbers(o: &mut String, cycles: &[Cycle], s: &Summary) {
    o.push_str("\n<div class=\"numbers\">");
    number(
        o,
        "acked",
        &thousands(s.acked_records),
        "acknowledged records",
    );
    number(
        o,
        "failing",
        &thousands(s.failing_records),
        "did not survive intact",
    );
    number(
        o,
        "loss-window",
        &s.loss_window_ms_max
            .map(fmt_duration_ms)
            .unwrap_or_else(|| "none".into()),
        if cycles.len() > 1 {
            "largest loss window"
        } else {
            "loss window (ack age of oldest failing record)"
        },
    );
    let holes: u64 = cycles.iter().map(|c| c.report.summary.ordering_holes).sum();
    number(o, "holes", &thousands(holes), "ordering holes");
    if let (Some(p50), Some(p99)) = (quantile(cycles, s, 0.5), quantile(cycles, s, 0.99)) {
        number(
            o,
            "latency",
            &format!("{} / {}", fmt_duration_us(p50), fmt_duration_us(p99)),
            "write+flush latency p50 / p99",
        );
    }
    if cycles.len() > 1 {
        number(o, "cycles", &thousands(s.cycles as u64), "cycles");
    }
    o.push_str("</div>\n");
}

/// Several cycles: the outcome of each, and the loss windows of the failing ones.
fn campaign_charts(o: &mut String, cycles: &[Cycle]) {
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
        fmt_duration_ms,
        "#c62828",
        &[],
    ));
}

/// The acknowledged records by age before the last ack and class, and the counts.
fn around_the_cut(o: &mut String, cycles: &[Cycle], s: &Summary) {
    o.push_str("<h2>Around the cut</h2>");
    if s.has_timeline {
        o.push_str(&svg::timeline(&s.timeline, s.loss_window_ms_max));
        o.push_str("<p class=\"note\">Each column holds the records acknowledged in one interval before the run's last ack; its colours show what share of them survived. The number above is the record count (failing/all where some failed). A drive that keeps its promises is all green and grey; losses cluster at the right, just before the cut. Grey (superseded) records were overwritten later by the same run: not a failure.</p>");
    } else {
        o.push_str("<p class=\"note\">This report has no <code>ack_timeline</code> (made by an older plugpull): only the counts below are available.</p>");
    }
    counts_table(o, s);
    let holes: u64 = cycles.iter().map(|c| c.report.summary.ordering_holes).sum();
    if holes > 0 {
        let _ = write!(
            o,
            "<p class=\"note\" id=\"holes-meaning\"><b>Ordering holes</b> ({}): {}.</p>",
            thousands(holes),
            esc(crate::verify::plain::ORDERING_HOLES)
        );
    }
}

/// The write+flush latency chart, with p50 and p99 marked.
fn flush_latency(o: &mut String, cycles: &[Cycle], s: &Summary) {
    o.push_str("<h2>Flush latency</h2>");
    if s.has_latency {
        let markers: Vec<Marker> = [(0.5, "p50"), (0.99, "p99")]
            .iter()
            .filter_map(|(q, name)| {
                quantile(cycles, s, *q).map(|v| Marker {
                    value: v,
                    label: format!("{name} {}", fmt_duration_us(v)),
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
            fmt_duration_us,
            "#1565c0",
            &markers,
        ));
        o.push_str("<p class=\"note\">A drive without power-loss protection that really writes to non-volatile media needs on the order of a millisecond or more per flush. Flushes in the tens of microseconds mean a cache answered: fine with power-loss protection, a lie without it. Only the power cut tells which (docs/FAQ.md).</p>");
    } else {
        o.push_str("<p class=\"note\">This report has no <code>flush_latency</code> (made by an older plugpull).</p>");
    }
}

/// One row per run, then each run's dead device and unreadable ranges.
fn runs(o: &mut String, cycles: &[Cycle]) {
    o.push_str("<h2>Runs</h2>");
    runs_table(o, cycles);
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
}

/// The writer command lines of the runs, how this page was made, the skipped inputs and
/// the footer.
fn commands_and_footer(o: &mut String, cycles: &[Cycle], made_by: &str, notes: &[String]) {
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
        let _ = write!(
            o,
            "<p class=\"note\">... and {} more.</p>",
            thousands((cmds.len() - 20) as u64)
        );
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
}

/// The rail's fall of every cycle whose switch sampled it: the chart, then one row per
/// cycle (fall time asked, 50% and 10% times, lowest voltage, proven or not).
fn proof_of_the_cut(o: &mut String, cycles: &[Cycle]) {
    o.push_str("<h2 id=\"proof-of-the-cut\">Proof of the cut</h2>");
    let series: Vec<(String, &crate::power::fall::Fall, Option<bool>)> = cycles
        .iter()
        .filter_map(|c| {
            let f = c.report.fall.as_ref()?;
            Some((c.label.clone(), f, c.report.cut_proven))
        })
        .collect();
    o.push_str(&svg::falls(&series));
    let not_proven = series.iter().filter(|s| s.2 == Some(false)).count();
    let _ = write!(
        o,
        "<p class=\"note\">The switch sampled the drive's rail around each cut. A cycle whose rail never fell to the campaign's threshold (10% of nominal unless set otherwise) is <b>cut not proven</b> and never counts as a pass: {} of {} here.{}</p>",
        thousands(not_proven as u64),
        thousands(series.len() as u64),
        if series.len() > svg::MAX_FALL_LINES {
            format!(" The chart draws the first {}.", svg::MAX_FALL_LINES)
        } else {
            String::new()
        }
    );
    o.push_str("<table id=\"falls\"><tr><th>cycle</th><th>fall time asked</th><th>to 50%</th><th>to 10%</th><th>lowest</th><th>cut</th></tr>");
    let never = || "never".to_string();
    for (c, (label, f, proven)) in cycles
        .iter()
        .filter(|c| c.report.fall.is_some())
        .zip(&series)
    {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2} V</td><td style=\"color:{}\">{}</td></tr>",
            esc(label),
            c.report
                .fall_time_ms
                .map(fmt_duration_ms)
                .unwrap_or_else(|| "-".into()),
            f.to_50_us.map(fmt_duration_us).unwrap_or_else(never),
            f.to_10_us.map(fmt_duration_us).unwrap_or_else(never),
            f.min_mv as f64 / 1e3,
            svg::proof_colour(*proven),
            match proven {
                Some(true) => "proven",
                Some(false) => "NOT PROVEN",
                None => "-",
            }
        );
    }
    o.push_str("</table>\n");
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
