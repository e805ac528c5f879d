//! Bar charts on 1-2-5 buckets (flush latency, loss windows), with marker lines, and the
//! one-square-per-cycle outcome chart.
//!
//! Why apart from the timeline: these are plain left-to-right charts of counts; they
//! share their bucket geometry (`BarSpan`) and nothing else with it.

use super::draw::{LEFT, RIGHT, TOP, W, esc, lower, open, text, tick_step, verdict_colour, y_axis};
use crate::model::Verdict;
use crate::units::thousands;
use crate::verify::distribution::{bucket_125, edge_125};
use std::fmt::Write;

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
    let (lo_i, hi_i) = shown_buckets(data);
    let n = hi_i - lo_i + 1;
    let cw = (right - LEFT) / n as f64;
    let max = data.iter().map(|d| d.1).max().unwrap_or(1).max(1) as f64;
    let step = tick_step(max);
    let ymax = (max / step).ceil() * step;
    y_axis(&mut o, top, bottom, right, ymax, step, "", y_title);
    let span = BarSpan {
        lo_i,
        hi_i,
        cw,
        top,
        bottom,
    };
    bars(&mut o, &span, data, ymax, fmt, colour);
    edge_ticks(&mut o, &span, fmt);
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#555\"/>"
    );
    marker_lines(&mut o, &span, markers);
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

/// The 1-2-5 buckets a bar chart shows: those of `data`, widened to at least six
/// intervals so one lone bucket does not fill the whole width.
fn shown_buckets(data: &[(f64, u64)]) -> (usize, usize) {
    let mut lo_i = data.iter().map(|d| bucket_125(d.0)).min().unwrap_or(0);
    let mut hi_i = data.iter().map(|d| bucket_125(d.0)).max().unwrap_or(0);
    while hi_i - lo_i + 1 < 6 {
        if lo_i > 0 && (hi_i - lo_i) % 2 == 0 {
            lo_i -= 1;
        } else {
            hi_i += 1;
        }
    }
    (lo_i, hi_i)
}

/// Where a bar chart's buckets `lo_i..=hi_i` are: columns of width `cw` from `LEFT`,
/// bars between `top` and `bottom`.
struct BarSpan {
    lo_i: usize,
    hi_i: usize,
    cw: f64,
    top: f64,
    bottom: f64,
}

/// One bar per bucket of `data`, its count above it.
fn bars(
    o: &mut String,
    g: &BarSpan,
    data: &[(f64, u64)],
    ymax: f64,
    fmt: fn(f64) -> String,
    colour: &str,
) {
    let (lo_i, cw, top, bottom) = (g.lo_i, g.cw, g.top, g.bottom);
    for (from, count) in data {
        let i = bucket_125(*from) - lo_i;
        let x = LEFT + i as f64 * cw + 2.0;
        let hh = (bottom - top) * *count as f64 / ymax;
        let _ = write!(
            o,
            "<rect class=\"bar\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hh:.1}\" fill=\"{colour}\"><title>{} between {} and {}</title></rect>",
            bottom - hh,
            cw - 4.0,
            thousands(*count),
            esc(&fmt(*from)),
            esc(&fmt(edge_125(bucket_125(*from)))),
        );
        text(
            o,
            x + (cw - 4.0) / 2.0,
            bottom - hh - 4.0,
            11,
            "middle",
            "",
            &thousands(*count),
        );
    }
}

/// A tick at every bucket edge, labelled with its value.
fn edge_ticks(o: &mut String, g: &BarSpan, fmt: fn(f64) -> String) {
    let (lo_i, cw, bottom) = (g.lo_i, g.cw, g.bottom);
    let n = g.hi_i - g.lo_i + 1;
    for j in 0..=n {
        let x = LEFT + j as f64 * cw;
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{:.1}\" stroke=\"#555\"/>",
            bottom + 5.0
        );
        text(o, x, bottom + 18.0, 11, "middle", "", &fmt(lower(lo_i + j)));
    }
}

/// Dashed lines at the markers' values (log scale within their bucket), labelled.
fn marker_lines(o: &mut String, g: &BarSpan, markers: &[Marker]) {
    let (lo_i, hi_i, cw, top, bottom) = (g.lo_i, g.hi_i, g.cw, g.top, g.bottom);
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
            o,
            x + dx,
            y + 4.0,
            12,
            anchor,
            "font-weight=\"bold\"",
            &m.label,
        );
    }
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
        let label = format!("{v} ({}): {}", &v.name()[..1], thousands(n as u64));
        text(&mut o, x + 19.0, y, 13, "start", "", &label);
        x += 40.0 + label.len() as f64 * 7.5;
    }
    o + "</svg>"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contents of every `<text>` of an SVG, in order.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text ")
            .skip(1)
            .map(|t| &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()])
            .collect()
    }

    /// A bar's count, its tooltip and the axis read with thousands separators.
    #[test]
    fn bar_counts_are_thousands_separated() {
        let svg = log_bars(
            "chart",
            "title",
            "x",
            "records",
            &[(1000.0, 32_715)],
            crate::units::fmt_duration_us,
            "#000",
            &[],
        );
        let texts = texts(&svg);
        assert!(texts.contains(&"32,715"), "{texts:?}");
        assert!(texts.contains(&"40,000"), "the axis' top: {texts:?}");
        assert!(svg.contains("<title>32,715 between "), "{svg}");
    }

    /// The cycles legend counts each verdict with thousands separators.
    #[test]
    fn the_cycles_legend_counts_are_thousands_separated() {
        let verdicts: Vec<(String, Verdict)> = (0..1200)
            .map(|k| (format!("cycle {k}"), Verdict::Pass))
            .collect();
        let svg = cycles(&verdicts);
        assert!(
            texts(&svg).contains(&"PASS (P): 1,200"),
            "{:?}",
            texts(&svg)
        );
    }
}
