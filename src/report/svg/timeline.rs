//! The timeline chart: acknowledged records by how long before the last ack they were
//! acknowledged, split by what became of them, with the loss window marked.
//!
//! Why its own file: it is the one chart laid out right to left (the cut at the right
//! edge) with stacked shares per column, so it has geometry of its own (`Columns`) that
//! the plain bar charts in `mod.rs` do not share.

use super::super::aggregate::CLASSES;
use super::super::input::TimelineBucket;
use super::draw::{LEFT, RIGHT, TOP, W, class_colour, esc, lower, open, text, y_axis};
use crate::model::RecordClass;
use crate::units::{fmt_duration_ms, thousands};
use crate::verify::distribution::{bucket_125, edge_125};
use std::fmt::Write;

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
    let g = Columns {
        n,
        cw: (right - LEFT) / n as f64,
        top: TOP + 20.0,
        bottom,
    };
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
    for i in 0..n {
        if !buckets.iter().any(|b| bucket_125(b.from_ms) == i) {
            text(
                &mut o,
                g.col_x(i) + g.cw / 2.0,
                bottom - 6.0,
                10,
                "middle",
                "fill=\"#888\"",
                "none",
            );
        }
    }
    for b in buckets {
        class_column(&mut o, &g, b);
    }
    time_ticks(&mut o, &g);
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"#555\"/>"
    );
    if let Some(ms) = loss_window_ms {
        loss_window_marker(&mut o, &g, ms);
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

/// Where the timeline's columns are: `n` of width `cw`, column 0 (nearest the cut) at the
/// right, bars between `top` and `bottom`.
struct Columns {
    n: usize,
    cw: f64,
    top: f64,
    bottom: f64,
}

impl Columns {
    fn col_x(&self, i: usize) -> f64 {
        LEFT + (self.n - 1 - i) as f64 * self.cw
    }
}

/// One interval's column: a bar per class, stacked by share, and the count above it.
fn class_column(o: &mut String, g: &Columns, b: &TimelineBucket) {
    let (top, bottom, cw) = (g.top, g.bottom, g.cw);
    let i = bucket_125(b.from_ms);
    let total: u64 = b.counts.total();
    if total == 0 {
        return;
    }
    let x = g.col_x(i) + 2.0;
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
            "<rect class=\"bar class-{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{hh:.1}\" fill=\"{}\"><title>{}: {} of {} records acknowledged {} to {} before the last ack</title></rect>",
            class_colour(class),
            class,
            thousands(c),
            thousands(total),
            esc(&fmt_duration_ms(b.from_ms)),
            esc(&fmt_duration_ms(b.to_ms)),
        );
    }
    let failing: u64 = b.counts.failing();
    let label = if failing > 0 {
        format!("{}/{}", thousands(failing), thousands(total))
    } else {
        thousands(total)
    };
    let colour = if failing > 0 { "#c62828" } else { "#333" };
    text(
        o,
        x + w / 2.0,
        top - 5.0,
        if cw < 40.0 { 9 } else { 11 },
        "middle",
        &format!("fill=\"{colour}\""),
        &label,
    );
}

/// Boundary ticks: the right edge is the last ack; each boundary to its left is the
/// lower edge of the column to its right.
fn time_ticks(o: &mut String, g: &Columns) {
    let (n, bottom) = (g.n, g.bottom);
    for j in 0..=n {
        let x = LEFT + j as f64 * g.cw;
        let v = if j == n { 0.0 } else { lower(n - j) };
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{:.1}\" stroke=\"#555\"/>",
            bottom + 5.0
        );
        let label = if j == n {
            "last ack".to_string()
        } else {
            fmt_duration_ms(v)
        };
        text(
            o,
            x,
            bottom + 16.0,
            11,
            "end",
            &format!("transform=\"rotate(-35 {x:.1} {:.1})\"", bottom + 16.0),
            &label,
        );
    }
}

/// The dashed line where the loss window starts, placed within its column on a log scale.
fn loss_window_marker(o: &mut String, g: &Columns, ms: f64) {
    let (top, bottom) = (g.top, g.bottom);
    let i = bucket_125(ms);
    if i >= g.n {
        return;
    }
    let (lo, hi) = (lower(i), edge_125(i));
    let frac = if lo == 0.0 {
        ms / hi
    } else {
        (ms / lo).ln() / (hi / lo).ln()
    };
    let x = g.col_x(i) + g.cw * (1.0 - frac);
    let _ = write!(
        o,
        "<line id=\"loss-window-marker\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{bottom}\" stroke=\"#000\" stroke-width=\"2\" stroke-dasharray=\"6 4\"/>",
        top - 18.0
    );
    let label = format!(
        "loss window: from {} before the last ack",
        fmt_duration_ms(ms)
    );
    let (dx, anchor, label) = if x < W / 2.0 {
        (4.0, "start", format!("← {label}"))
    } else {
        (-4.0, "end", format!("{label} →"))
    };
    text(
        o,
        x + dx,
        top - 20.0,
        12,
        anchor,
        "font-weight=\"bold\"",
        &label,
    );
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
        let label = format!("{class} {}", thousands(n));
        text(o, x + 19.0, y, 13, "start", "", &label);
        x += 34.0 + label.chars().count() as f64 * 7.5;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClassCounts;

    /// The contents of every `<text>` of an SVG, in order.
    fn texts(svg: &str) -> Vec<&str> {
        svg.split("<text ")
            .skip(1)
            .map(|t| &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()])
            .collect()
    }

    /// Big counts read with thousands separators: above the column, in its tooltip and
    /// in the legend.
    #[test]
    fn counts_are_thousands_separated() {
        let mut counts = ClassCounts::zero();
        counts.add(RecordClass::Intact, 1_234_567);
        counts.add(RecordClass::Lost, 32_715);
        let svg = timeline(
            &[TimelineBucket {
                from_ms: 0.0,
                to_ms: 10.0,
                counts,
            }],
            None,
        );
        let texts = texts(&svg);
        assert!(texts.contains(&"32,715/1,267,282"), "{texts:?}");
        assert!(texts.contains(&"intact 1,234,567"), "{texts:?}");
        assert!(texts.contains(&"lost 32,715"), "{texts:?}");
        assert!(
            svg.contains("<title>lost: 32,715 of 1,267,282 records acknowledged "),
            "{svg}"
        );
    }
}
