//! Inline SVG charts for the HTML report, written by hand as strings.
//!
//! Why no charting crate or JavaScript: the page must be one self-contained file that
//! renders offline, in a mail attachment, years later. Every chart is a plain `<svg>` with
//! an id (`chart-timeline`, `chart-latency`, `chart-cycles`, `chart-loss-window`), axis
//! titles with units, and text labels next to every colour, so it reads in greyscale too.
//! Rectangles carry a `<title>` so hovering shows exact numbers.

use super::aggregate::CLASSES;
use super::input::TimelineBucket;
use crate::model::{RecordClass, Verdict};
use crate::verify::distribution::{bucket_125, edge_125};
use std::fmt::Write;

const W: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 40.0;

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A colour per record class: green survived, greys for legitimately overwritten, warm and
/// dark colours for the failure kinds.
pub fn class_colour(class: RecordClass) -> &'static str {
    match class {
        RecordClass::Intact => "#2e7d32",
        RecordClass::Superseded => "#9fb3bf",
        RecordClass::Lost => "#c62828",
        RecordClass::Shorn => "#ef6c00",
        RecordClass::Corrupt => "#6a1b9a",
        RecordClass::Stale => "#8d6e63",
        RecordClass::Misdirected => "#d81b60",
        RecordClass::Unreadable => "#212121",
    }
}

pub fn verdict_colour(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "#2e7d32",
        Verdict::Fail => "#c62828",
        Verdict::Inconclusive | Verdict::Error => "#f9a825",
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// "0", "500 ms", "2 s", "5 min"...
pub fn fmt_ms(ms: f64) -> String {
    if ms == 0.0 {
        "0".into()
    } else if ms < 1.0 {
        format!("{} µs", trim(ms * 1e3))
    } else if ms < 1e3 {
        format!("{} ms", trim(ms))
    } else if ms < 600e3 {
        format!("{} s", trim(ms / 1e3))
    } else if ms < 36_000e3 {
        format!("{} min", trim(ms / 60e3))
    } else {
        format!("{} h", trim(ms / 3600e3))
    }
}

pub fn fmt_us(us: f64) -> String {
    if us == 0.0 {
        "0".into()
    } else if us < 1e3 {
        format!("{} µs", trim(us))
    } else {
        fmt_ms(us / 1e3)
    }
}

fn lower(i: usize) -> f64 {
    if i == 0 { 0.0 } else { edge_125(i - 1) }
}

/// A round step giving at most ~5 ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    let mut i = 0;
    while max / edge_125(i) > 5.0 {
        i += 1;
    }
    edge_125(i)
}

fn open(id: &str, h: f64, title: &str) -> String {
    format!(
        "<svg id=\"{id}\" class=\"chart\" viewBox=\"0 0 {W} {h}\" width=\"100%\" role=\"img\" \
aria-label=\"{t}\" font-family=\"sans-serif\">\
<text x=\"{LEFT}\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{t}</text>",
        t = esc(title)
    )
}

fn text(o: &mut String, x: f64, y: f64, size: u32, anchor: &str, extra: &str, s: &str) {
    let _ = write!(
        o,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {extra}>{}</text>",
        esc(s)
    );
}

/// Y axis with gridlines from 0 to `max` (already a multiple of `step`).
#[allow(clippy::too_many_arguments)]
fn y_axis(
    o: &mut String,
    top: f64,
    bottom: f64,
    right: f64,
    max: f64,
    step: f64,
    suffix: &str,
    title: &str,
) {
    let mut v = 0.0;
    while v <= max + 1e-9 {
        let y = bottom - (bottom - top) * v / max;
        let _ = write!(
            o,
            "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>"
        );
        text(
            o,
            LEFT - 6.0,
            y + 4.0,
            12,
            "end",
            "",
            &format!("{}{suffix}", trim(v)),
        );
        v += step;
    }
    let mid = (top + bottom) / 2.0;
    text(
        o,
        18.0,
        mid,
        13,
        "middle",
        &format!("transform=\"rotate(-90 18 {mid:.1})\""),
        title,
    );
}

/// Records around the cut: one column per 1-2-5 interval of ack time before the last ack,
/// oldest on the left, the last ack at the right edge; each column is split by class
/// (share of that interval's records), with the record count above it.
pub fn timeline(buckets: &[TimelineBucket], loss_window_ms: Option<f64>) -> String {
    let h = 420.0;
    let bottom = h - 95.0;
    let right = W - RIGHT;
    let mut o = open(
        "chart-timeline",
        h,
        "Acknowledged records by ack time before the last ack, and what became of them",
    );
    if buckets.is_empty() {
        text(
            &mut o,
            W / 2.0,
            h / 2.0,
            14,
            "middle",
            "",
            "no acknowledged records",
        );
        return o + "</svg>";
    }
    let n = buckets
        .iter()
        .map(|b| bucket_125(b.from_ms))
        .max()
        .unwrap_or(0)
        + 1;
    let cw = (right - LEFT) / n as f64;
    let col_x = |i: usize| LEFT + (n - 1 - i) as f64 * cw;
    y_axis(
        &mut o,
        TOP + 20.0,
        bottom,
        right,
        100.0,
        25.0,
        "%",
        "share of records (%)",
    );
    let top = TOP + 20.0;
    for i in 0..n {
        if !buckets.iter().any(|b| bucket_125(b.from_ms) == i) {
            text(
                &mut o,
                col_x(i) + cw / 2.0,
                bottom - 6.0,
                10,
                "middle",
                "fill=\"#888\"",
                "none",
            );
        }
    }
    for b in buckets {
        let i = bucket_125(b.from_ms);
        let total: u64 = b.counts.total();
        if total == 0 {
            continue;
        }
        let x = col_x(i) + 2.0;
        let w = cw - 4.0;
        let mut y = bottom;
        for class in CLASSES {
            let c = b.counts.get(class);
            if c == 0 {
                continue;
            }
            let hh = (bottom - top) * c as f64 / total as f64;
            y -= hh;
            let _ = write!(
                o,
                "<rect class=\"bar class-{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>{}: {c} of {total} records acknowledged {} to {} before the last ack</title></rect>",
                class_colour(class),
                class,
                esc(&fmt_ms(b.from_ms)),
                esc(&fmt_ms(b.to_ms)),
            );
        }
        let failing: u64 = b.counts.failing();
        let label = if failing > 0 {
            format!("{failing}/{total}")
        } else {
            total.to_string()
        };
        let colour = if failing > 0 { "#c62828" } else { "#333" };
        text(
            &mut o,
            x + w / 2.0,
            top - 5.0,
            if cw < 40.0 { 9 } else { 11 },
            "middle",
            &format!("fill=\"{colour}\""),
            &label,
        );
    }
    // Boundary ticks: the right edge is the last ack; each boundary to its left is the
    // lower edge of the column to its right.
    for j in 0..=n {
        let x = LEFT + j as f64 * cw;
        let v = if j == n { 0.0 } else { lower(n - j) };
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{:.1}\" stroke=\"#555\"/>",
            bottom + 5.0
        );
        let label = if j == n {
            "last ack".to_string()
        } else {
            fmt_ms(v)
        };
        text(
            &mut o,
            x,
            bottom + 16.0,
            11,
            "end",
            &format!("transform=\"rotate(-35 {x:.1} {:.1})\"", bottom + 16.0),
            &label,
        );
    }
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#555\"/>"
    );
    if let Some(ms) = loss_window_ms {
        let i = bucket_125(ms);
        if i < n {
            let (lo, hi) = (lower(i), edge_125(i));
            let frac = if lo == 0.0 {
                ms / hi
            } else {
                (ms / lo).ln() / (hi / lo).ln()
            };
            let x = col_x(i) + cw * (1.0 - frac);
            let _ = write!(
                o,
                "<line id=\"loss-window-marker\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{bottom}\" stroke=\"#000\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>",
                top - 18.0
            );
            let label = format!("loss window: from {} before the last ack", fmt_ms(ms));
            let (dx, anchor, label) = if x < W / 2.0 {
                (4.0, "start", format!("← {label}"))
            } else {
                (-4.0, "end", format!("{label} →"))
            };
            text(
                &mut o,
                x + dx,
                top - 20.0,
                12,
                anchor,
                "font-weight=\"bold\"",
                &label,
            );
        }
    }
    text(
        &mut o,
        (LEFT + right) / 2.0,
        h - 38.0,
        13,
        "middle",
        "",
        "acknowledged this long before the run's last ack (log scale; the cut is at the right edge)",
    );
    legend(&mut o, h - 14.0, buckets);
    o + "</svg>"
}

fn legend(o: &mut String, y: f64, buckets: &[TimelineBucket]) {
    let mut x = LEFT;
    for class in CLASSES {
        let n: u64 = buckets.iter().map(|b| b.counts.get(class)).sum();
        if n == 0 && class != RecordClass::Intact && class != RecordClass::Lost {
            continue;
        }
        let _ = write!(
            o,
            "<rect class=\"legend class-{class}\" x=\"{x:.1}\" y=\"{:.1}\" width=\"14\" height=\"14\" fill=\"{}\"/>",
            y - 12.0,
            class_colour(class)
        );
        let label = format!("{class} {n}");
        text(o, x + 19.0, y, 13, "start", "", &label);
        x += 34.0 + label.chars().count() as f64 * 7.5;
    }
}

/// A marker line on a 1-2-5 bar chart.
pub struct Marker {
    pub value: f64,
    pub label: String,
}

/// Counts in 1-2-5 buckets (`(lower edge, count)` pairs, any order) as bars, lowest values
/// on the left; `fmt` labels the edges with units.
#[allow(clippy::too_many_arguments)]
pub fn log_bars(
    id: &str,
    title: &str,
    x_title: &str,
    y_title: &str,
    data: &[(f64, u64)],
    fmt: fn(f64) -> String,
    colour: &str,
    markers: &[Marker],
) -> String {
    let h = 340.0;
    let bottom = h - 70.0;
    let right = W - RIGHT;
    let top = TOP + 20.0;
    let mut o = open(id, h, title);
    if data.is_empty() {
        text(
            &mut o,
            W / 2.0,
            h / 2.0,
            14,
            "middle",
            "",
            "no data in the input",
        );
        return o + "</svg>";
    }
    let mut lo_i = data.iter().map(|d| bucket_125(d.0)).min().unwrap();
    let mut hi_i = data.iter().map(|d| bucket_125(d.0)).max().unwrap();
    // At least six intervals, so one lone bucket does not fill the whole width.
    while hi_i - lo_i + 1 < 6 {
        if lo_i > 0 && (hi_i - lo_i) % 2 == 0 {
            lo_i -= 1;
        } else {
            hi_i += 1;
        }
    }
    let n = hi_i - lo_i + 1;
    let cw = (right - LEFT) / n as f64;
    let max = data.iter().map(|d| d.1).max().unwrap_or(1).max(1) as f64;
    let step = tick_step(max);
    let ymax = (max / step).ceil() * step;
    y_axis(&mut o, top, bottom, right, ymax, step, "", y_title);
    for (from, count) in data {
        let i = bucket_125(*from) - lo_i;
        let x = LEFT + i as f64 * cw + 2.0;
        let hh = (bottom - top) * *count as f64 / ymax;
        let _ = write!(
            o,
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hh:.1}\" fill=\"{colour}\"><title>{count} between {} and {}</title></rect>",
            bottom - hh,
            cw - 4.0,
            esc(&fmt(*from)),
            esc(&fmt(edge_125(bucket_125(*from)))),
        );
        text(
            &mut o,
            x + (cw - 4.0) / 2.0,
            bottom - hh - 4.0,
            11,
            "middle",
            "",
            &count.to_string(),
        );
    }
    for j in 0..=n {
        let x = LEFT + j as f64 * cw;
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{:.1}\" stroke=\"#555\"/>",
            bottom + 5.0
        );
        text(
            &mut o,
            x,
            bottom + 18.0,
            11,
            "middle",
            "",
            &fmt(lower(lo_i + j)),
        );
    }
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#555\"/>"
    );
    for (k, m) in markers.iter().enumerate() {
        let i = bucket_125(m.value);
        if i < lo_i || i > hi_i {
            continue;
        }
        let (a, b) = (lower(i), edge_125(i));
        let frac = if a == 0.0 {
            m.value / b
        } else {
            (m.value / a).ln() / (b / a).ln()
        };
        let x = LEFT + ((i - lo_i) as f64 + frac) * cw;
        let y = top - 6.0 + 14.0 * k as f64;
        let _ = write!(
            o,
            "<line class=\"marker\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{y:.1}\" y2=\"{bottom}\" stroke=\"#000\" stroke-dasharray=\"4 3\"/>"
        );
        let anchor = if x > W * 0.7 { "end" } else { "start" };
        let dx = if anchor == "end" { -4.0 } else { 4.0 };
        text(
            &mut o,
            x + dx,
            y + 4.0,
            12,
            anchor,
            "font-weight=\"bold\"",
            &m.label,
        );
    }
    text(
        &mut o,
        (LEFT + right) / 2.0,
        h - 22.0,
        13,
        "middle",
        "",
        x_title,
    );
    o + "</svg>"
}

/// One square per cycle, coloured and lettered by verdict, numbered in order.
pub fn cycles(verdicts: &[(String, Verdict)]) -> String {
    let per_row = 24usize;
    let size = 34.0;
    let rows = verdicts.len().div_ceil(per_row).max(1);
    let h = TOP + 20.0 + rows as f64 * (size + 6.0) + 40.0;
    let mut o = open("chart-cycles", h, "Outcome of every cycle, in order");
    for (k, (label, v)) in verdicts.iter().enumerate() {
        let x = LEFT + (k % per_row) as f64 * (size + 4.0);
        let y = TOP + 10.0 + (k / per_row) as f64 * (size + 6.0);
        let _ = write!(
            o,
            "<rect class=\"cycle verdict-{}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{size}\" height=\"{size}\" rx=\"3\" fill=\"{}\"><title>{}: {}</title></rect>",
            v.name().to_lowercase(),
            verdict_colour(*v),
            esc(label),
            v
        );
        text(
            &mut o,
            x + size / 2.0,
            y + 14.0,
            12,
            "middle",
            "fill=\"#fff\" font-weight=\"bold\"",
            &v.name()[..1],
        );
        text(
            &mut o,
            x + size / 2.0,
            y + 28.0,
            10,
            "middle",
            "fill=\"#fff\"",
            &(k + 1).to_string(),
        );
    }
    let mut x = LEFT;
    let y = h - 12.0;
    for v in [Verdict::Pass, Verdict::Fail, Verdict::Inconclusive] {
        let n = verdicts.iter().filter(|(_, x)| *x == v).count();
        let _ = write!(
            o,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"14\" height=\"14\" fill=\"{}\"/>",
            y - 12.0,
            verdict_colour(v)
        );
        let label = format!("{v} ({}): {n}", &v.name()[..1]);
        text(&mut o, x + 19.0, y, 13, "start", "", &label);
        x += 40.0 + label.len() as f64 * 7.5;
    }
    o + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_read_naturally() {
        assert_eq!(fmt_ms(0.0), "0");
        assert_eq!(fmt_ms(0.5), "500 µs");
        assert_eq!(fmt_ms(20.0), "20 ms");
        assert_eq!(fmt_ms(2000.0), "2 s");
        assert_eq!(fmt_us(87.25), "87.2 µs");
        assert_eq!(fmt_us(2000.0), "2 ms");
        assert_eq!(esc("<a&\">"), "&lt;a&amp;&quot;&gt;");
    }
}
