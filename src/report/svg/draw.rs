//! Drawing primitives shared by every chart: the canvas, text, the y axis, colours per
//! class and verdict, and numbers with units.
//!
//! Why apart: the charts differ in layout but must agree on these, so a page reads as one
//! design; keeping them here lets each chart file depend on this one and on nothing else.

use crate::model::{RecordClass, Verdict};
use crate::verify::distribution::edge_125;
use std::fmt::Write;

pub(super) const W: f64 = 960.0;
pub(super) const LEFT: f64 = 70.0;
pub(super) const RIGHT: f64 = 30.0;
pub(super) const TOP: f64 = 40.0;

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

/// An axis value: one decimal, none when whole; whole values from 1,000 up (the record
/// counts of a chart's axis) with thousands separators, as the tables write them.
pub(super) fn trim(v: f64) -> String {
    if v >= 1000.0 && v.fract() == 0.0 && v <= u64::MAX as f64 {
        return crate::units::thousands(v as u64);
    }
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

pub(super) fn lower(i: usize) -> f64 {
    if i == 0 { 0.0 } else { edge_125(i - 1) }
}

/// A round step giving at most ~5 ticks up to `max`.
pub(super) fn tick_step(max: f64) -> f64 {
    let mut i = 0;
    while max / edge_125(i) > 5.0 {
        i += 1;
    }
    edge_125(i)
}

pub(super) fn open(id: &str, h: f64, title: &str) -> String {
    format!(
        "<svg id=\"{id}\" class=\"chart\" viewBox=\"0 0 {W} {h}\" width=\"100%\" role=\"img\" \
aria-label=\"{t}\" font-family=\"sans-serif\">\
<text x=\"{LEFT}\" y=\"22\" font-size=\"16\" font-weight=\"bold\">{t}</text>",
        t = esc(title)
    )
}

pub(super) fn text(o: &mut String, x: f64, y: f64, size: u32, anchor: &str, extra: &str, s: &str) {
    let _ = write!(
        o,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" {extra}>{}</text>",
        esc(s)
    );
}

/// Y axis with gridlines from 0 to `max` (already a multiple of `step`).
#[allow(clippy::too_many_arguments)]
pub(super) fn y_axis(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_values_read_as_the_tables_write_them() {
        assert_eq!(trim(0.0), "0");
        assert_eq!(trim(2.5), "2.5");
        assert_eq!(trim(500.0), "500");
        assert_eq!(trim(20_000.0), "20,000");
        assert_eq!(trim(1_250_000.0), "1,250,000");
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(esc("<a&\">"), "&lt;a&amp;&quot;&gt;");
    }
}
