//! The proof of the cut: each cycle's rail voltage after the switch-off, as sampled by
//! the switch (`power::fall::Fall::points`), one line per cycle, over a dashed line at 10%
//! of nominal.
//!
//! Why one chart of lines rather than numbers only: a rail that sags and stays up, a slow
//! hold-up tail, or one cycle unlike the rest are seen at a glance; the table under the
//! chart has the exact times.

use super::draw::{LEFT, RIGHT, TOP, W, esc, open, text, tick_step, trim, y_axis};
use crate::power::fall::Fall;
use crate::units::fmt_duration_us;
use std::fmt::Write;

/// Most lines drawn; the rest are counted in a note.
pub const MAX_FALL_LINES: usize = 60;

/// Colour of a cycle's fall line: green proven, amber not proven, grey unknown.
pub fn proof_colour(proven: Option<bool>) -> &'static str {
    match proven {
        Some(true) => "#2e7d32",
        Some(false) => "#f9a825",
        None => "#78909c",
    }
}

/// `(label, fall, proven)` per cycle, as an SVG with id `chart-falls`.
pub fn falls(series: &[(String, &Fall, Option<bool>)]) -> String {
    let h = 360.0;
    let bottom = h - 70.0;
    let right = W - RIGHT;
    let top = TOP + 20.0;
    let mut o = open("chart-falls", h, "Rail voltage after the switch-off");
    let max_us = series
        .iter()
        .flat_map(|(_, f, _)| f.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let max_v = series
        .iter()
        .map(|(_, f, _)| {
            f.nominal_mv
                .max(f.points.iter().map(|p| p.1).max().unwrap_or(0))
        })
        .max()
        .unwrap_or(1)
        .max(1) as f64
        / 1e3;
    let vstep = tick_step(max_v);
    let vmax = (max_v / vstep).ceil() * vstep;
    y_axis(
        &mut o,
        top,
        bottom,
        right,
        vmax,
        vstep,
        " V",
        "rail voltage (V)",
    );
    let x = |us: f64| LEFT + (right - LEFT) * us / max_us;
    let y = |mv: f64| bottom - (bottom - top) * (mv / 1e3) / vmax;
    let tstep = tick_step(max_us);
    let mut t = 0.0;
    while t <= max_us + 1e-9 {
        text(
            &mut o,
            x(t),
            bottom + 16.0,
            12,
            "middle",
            "",
            &fmt_duration_us(t),
        );
        t += tstep;
    }
    text(
        &mut o,
        (LEFT + right) / 2.0,
        bottom + 40.0,
        13,
        "middle",
        "",
        "time since the switch-off",
    );
    // 10% of the highest nominal: the default cut_proof_threshold.
    let nominal = series.iter().map(|s| s.1.nominal_mv).max().unwrap_or(0) as f64;
    let ten = y(0.1 * nominal);
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{right}\" y1=\"{ten:.1}\" y2=\"{ten:.1}\" stroke=\"#c62828\" stroke-dasharray=\"6 4\"/>"
    );
    text(
        &mut o,
        right - 4.0,
        ten - 5.0,
        12,
        "end",
        "fill=\"#c62828\"",
        &format!("10% of {} V", trim(nominal / 1e3)),
    );
    for (label, f, proven) in series.iter().take(MAX_FALL_LINES) {
        let pts: Vec<String> = f
            .points
            .iter()
            .map(|&(us, mv)| format!("{:.1},{:.1}", x(us), y(mv as f64)))
            .collect();
        let _ = write!(
            o,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"><title>{}: 50% at {}, 10% at {}, lowest {} V</title></polyline>",
            proof_colour(*proven),
            pts.join(" "),
            esc(label),
            f.to_50_us
                .map(fmt_duration_us)
                .unwrap_or_else(|| "never".into()),
            f.to_10_us
                .map(fmt_duration_us)
                .unwrap_or_else(|| "never".into()),
            trim(f.min_mv as f64 / 1e3)
        );
    }
    text(
        &mut o,
        LEFT,
        h - 8.0,
        12,
        "start",
        "",
        "green: the rail fell to the threshold (cut proven); amber: it did not (cut not proven); grey: not judged",
    );
    o + "</svg>"
}
