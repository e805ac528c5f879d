//! Inline SVG charts for the HTML report, written by hand as strings.
//!
//! Why no charting crate or JavaScript: the page must be one self-contained file that
//! renders offline, in a mail attachment, years later. Every chart is a plain `<svg>` with
//! an id (`chart-timeline`, `chart-latency`, `chart-cycles`, `chart-loss-window`, `chart-falls`), axis
//! titles with units, and text labels next to every colour, so it reads in greyscale too.
//! Rectangles carry a `<title>` so hovering shows exact numbers.
//!
//! - `draw`: the primitives every chart uses (text, axes, colours, units);
//! - `timeline`: records around the cut, by ack age and class;
//! - `falls`: each cycle's rail voltage after the switch-off (proof of the cut);
//! - `bars`: counts on 1-2-5 buckets (latency, loss windows) and the cycle squares.

mod bars;
mod draw;
mod falls;
mod timeline;

pub use bars::{Marker, cycles, log_bars};
pub use draw::{class_colour, esc, verdict_colour};
pub use falls::{MAX_FALL_LINES, falls, proof_colour};
pub use timeline::timeline;
