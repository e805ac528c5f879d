//! Proof of the cut: a rail's sampled fall (`Trace`) and what it says (`Fall`): time from
//! switch-off to 50% and to 10% of nominal, and the lowest voltage reached while off.
//!
//! Why pure functions over a sample list: a switch that says "off" proves nothing about
//! the drive's rail (a stuck MOSFET, a back-fed rail, hold-up capacitors that outlast the
//! off time); only the rail's own voltage does. The firmware samples the drive side of
//! each switched rail with its ADC and reports the samples (hardware/firmware/PROTOCOL.md,
//! `TRACE?`); a recorded trace file holds the same line. Everything here is computed on
//! the host from those samples, so it is unit-tested with sampled traces in, fall times
//! out.
//!
//! Why a median-of-5 filter before looking for crossings: ADC samples on a switched rail
//! carry spikes (the switching edge, the drive's own load steps); one sample below a
//! threshold is noise, not a fall. A fall that stays below for three samples out of five
//! survives the filter.

use serde::{Deserialize, Serialize};

/// Most points a `Fall` keeps for the report's plot (the trace itself may hold thousands).
pub const PLOT_POINTS: usize = 120;

/// One rail's samples around a cut, as the firmware reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The switch channel (rail) the trace belongs to.
    pub channel: u32,
    /// Samples per second.
    pub rate_hz: u32,
    /// The rail's nominal voltage (12000, 5000, 3300), the 100% of the fall times.
    pub nominal_mv: u32,
    /// Index of the first sample taken after the switch went off (samples before it are
    /// the rail still powered).
    pub off_index: usize,
    pub samples_mv: Vec<u32>,
}

/// What a trace says about one cut; stored in the cycle's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fall {
    pub channel: u32,
    pub nominal_mv: u32,
    pub rate_hz: u32,
    /// Switch-off to the rail at or below 50% of nominal, µs; `None`: it never got there
    /// within the trace.
    pub to_50_us: Option<f64>,
    /// Switch-off to the rail at or below 10% of nominal, µs.
    pub to_10_us: Option<f64>,
    /// The lowest (filtered) voltage after switch-off.
    pub min_mv: u32,
    /// The trace started after the switch went off and its first sample was already below
    /// 50%: the fall times are upper bounds (the true fall was faster).
    pub late_start: bool,
    /// Up to [`PLOT_POINTS`] (µs since switch-off, mV) points of the filtered trace, for
    /// the HTML report's plot.
    pub points: Vec<(f64, u32)>,
}

impl Fall {
    /// Whether the rail fell to at most `fraction` of nominal: the cut is proven.
    pub fn proven(&self, fraction: f64) -> bool {
        (self.min_mv as f64) <= fraction * self.nominal_mv as f64
    }
}

/// Why a trace line was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("a trace line starts with TRACE <channel>: {line:?}")]
    NotATrace { line: String },
    #[error("trace field {field} is missing or not a number")]
    BadField { field: &'static str },
    #[error("trace has no samples")]
    NoSamples,
    #[error("trace off index {off} is beyond its {n} samples")]
    OffBeyondEnd { off: usize, n: usize },
}

/// Parses `TRACE <ch> hz=<rate> nominal_mv=<mv> off=<index> mv=<v0>,<v1>,...` (the text
/// after `OK <us> ` in the firmware's reply, and the line of a recorded trace file).
/// Unknown `key=value` words are skipped, so a later firmware may add fields.
pub fn parse_trace(line: &str) -> Result<Trace, TraceError> {
    let mut words = line.split_whitespace();
    let not = || TraceError::NotATrace {
        line: line.chars().take(80).collect(),
    };
    if words.next() != Some("TRACE") {
        return Err(not());
    }
    let channel = words.next().and_then(|w| w.parse().ok()).ok_or_else(not)?;
    let (mut rate, mut nominal, mut off, mut samples) = (None, None, None, None);
    for w in words {
        let Some((k, v)) = w.split_once('=') else {
            continue;
        };
        match k {
            "hz" => rate = v.parse::<u32>().ok(),
            "nominal_mv" => nominal = v.parse::<u32>().ok(),
            "off" => off = v.parse::<usize>().ok(),
            "mv" => {
                samples = v
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse::<u32>().ok())
                    .collect::<Option<Vec<u32>>>()
            }
            _ => {}
        }
    }
    let rate_hz = rate
        .filter(|&r| r > 0)
        .ok_or(TraceError::BadField { field: "hz" })?;
    let nominal_mv = nominal.filter(|&n| n > 0).ok_or(TraceError::BadField {
        field: "nominal_mv",
    })?;
    let off_index = off.ok_or(TraceError::BadField { field: "off" })?;
    let samples_mv = samples.ok_or(TraceError::BadField { field: "mv" })?;
    if samples_mv.is_empty() {
        return Err(TraceError::NoSamples);
    }
    if off_index >= samples_mv.len() {
        return Err(TraceError::OffBeyondEnd {
            off: off_index,
            n: samples_mv.len(),
        });
    }
    Ok(Trace {
        channel,
        rate_hz,
        nominal_mv,
        off_index,
        samples_mv,
    })
}

/// The median of the (up to) five samples centred on each sample: spikes of one or two
/// samples (either way) vanish, while a monotonic fall passes unchanged (the median of a
/// sorted window is its middle sample).
pub fn median5(s: &[u32]) -> Vec<u32> {
    (0..s.len())
        .map(|i| {
            let mut w: Vec<u32> = s[i.saturating_sub(2)..(i + 3).min(s.len())].to_vec();
            w.sort_unstable();
            w[w.len() / 2]
        })
        .collect()
}

/// µs from switch-off until the filtered rail is first at or below `level_mv`, linearly
/// interpolated between the two samples around the crossing; `None` if it never is.
fn crossing_us(f: &[u32], off: usize, rate_hz: u32, level_mv: f64) -> Option<f64> {
    let us_per_sample = 1e6 / rate_hz as f64;
    let i = (off..f.len()).find(|&i| f[i] as f64 <= level_mv)?;
    if i == off {
        return Some(0.0);
    }
    let (a, b) = (f[i - 1] as f64, f[i] as f64);
    let frac = if a > b { (a - level_mv) / (a - b) } else { 1.0 };
    Some(((i - 1 - off) as f64 + frac) * us_per_sample)
}

/// Reads the fall off a trace.
pub fn analyze(t: &Trace) -> Fall {
    let f = median5(&t.samples_mv);
    let nominal = t.nominal_mv as f64;
    let off = t.off_index.min(f.len().saturating_sub(1));
    let min_mv = f[off..].iter().copied().min().unwrap_or(t.nominal_mv);
    let us_per_sample = 1e6 / t.rate_hz as f64;
    let step = ((f.len() - off) as f64 / PLOT_POINTS as f64)
        .ceil()
        .max(1.0) as usize;
    let points = (off..f.len())
        .step_by(step)
        .map(|i| ((i - off) as f64 * us_per_sample, f[i]))
        .collect();
    Fall {
        channel: t.channel,
        nominal_mv: t.nominal_mv,
        rate_hz: t.rate_hz,
        to_50_us: crossing_us(&f, off, t.rate_hz, 0.5 * nominal),
        to_10_us: crossing_us(&f, off, t.rate_hz, 0.1 * nominal),
        min_mv,
        late_start: t.off_index == 0 && (f[0] as f64) < 0.5 * nominal,
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 12 V rail sampled at 10 kHz: `pre` samples at nominal, then `fall(k)` for the
    /// k-th sample after switch-off.
    fn trace(pre: usize, n: usize, fall: impl Fn(usize) -> u32) -> Trace {
        let mut s = vec![12_000; pre];
        s.extend((0..n).map(fall));
        Trace {
            channel: 1,
            rate_hz: 10_000,
            nominal_mv: 12_000,
            off_index: pre,
            samples_mv: s,
        }
    }

    #[test]
    fn a_linear_fall_crosses_50_and_10_percent_where_it_should() {
        // 12 V to 0 over 100 samples (10 ms): 120 mV per 100 µs sample.
        let f = analyze(&trace(16, 200, |k| {
            12_000u32.saturating_sub(120 * k as u32)
        }));
        // 6000 mV at sample 50 (5 ms), 1200 mV at sample 90 (9 ms).
        assert!((f.to_50_us.unwrap() - 5_000.0).abs() < 1.0, "{f:?}");
        assert!((f.to_10_us.unwrap() - 9_000.0).abs() < 1.0, "{f:?}");
        assert_eq!(f.min_mv, 0);
        assert!(f.proven(0.10));
        assert!(!f.late_start);
    }

    #[test]
    fn an_exponential_fall_is_interpolated_between_samples() {
        // RC fall with tau = 1 ms: 50% at tau*ln2 = 693 µs, 10% at tau*ln10 = 2303 µs.
        let f = analyze(&trace(16, 300, |k| {
            (12_000.0 * (-(k as f64) * 100e-6 / 1e-3).exp()).round() as u32
        }));
        assert!((f.to_50_us.unwrap() - 693.0).abs() < 30.0, "{f:?}");
        assert!((f.to_10_us.unwrap() - 2303.0).abs() < 30.0, "{f:?}");
    }

    #[test]
    fn a_rail_that_never_falls_has_no_fall_times_and_is_not_proven() {
        // Hold-up that sags to 11.4 V and stays: the switch said off, the rail did not.
        let f = analyze(&trace(16, 400, |k| 12_000 - (2 * k as u32).min(600)));
        assert_eq!((f.to_50_us, f.to_10_us), (None, None));
        assert_eq!(f.min_mv, 11_400);
        assert!(!f.proven(0.10));
    }

    #[test]
    fn a_rail_stuck_at_half_is_at_50_but_never_at_10_percent() {
        let f = analyze(&trace(16, 400, |k| if k < 20 { 12_000 } else { 5_000 }));
        assert!((f.to_50_us.unwrap() - 1_900.0).abs() < 101.0, "{f:?}");
        assert_eq!(f.to_10_us, None);
        assert!(!f.proven(0.10));
        assert!(f.proven(0.5));
    }

    #[test]
    fn single_sample_spikes_below_the_thresholds_are_noise_not_a_fall() {
        // Nominal with a few one-sample dips to 0 V (switching noise): never fell.
        let f = analyze(&trace(16, 400, |k| if k % 50 == 7 { 0 } else { 12_000 }));
        assert_eq!((f.to_50_us, f.to_10_us), (None, None));
        assert_eq!(f.min_mv, 12_000);
        assert!(!f.proven(0.10));
        // A real fall with ±300 mV noise on it still lands near the clean crossing.
        let noisy = analyze(&trace(16, 200, |k| {
            let clean = 12_000i64 - 120 * k as i64;
            let noise = if k % 2 == 0 { 300 } else { -300 };
            (clean + noise).max(0) as u32
        }));
        assert!(
            (noisy.to_50_us.unwrap() - 5_000.0).abs() < 400.0,
            "{noisy:?}"
        );
        assert!(noisy.proven(0.10));
    }

    #[test]
    fn a_fall_that_starts_late_is_timed_from_the_switch_off() {
        // Hold-up capacitors keep the rail up 3 ms after switch-off, then it drops in
        // 0.5 ms: the 50% time says 3.x ms, not 0.x.
        let f = analyze(&trace(16, 200, |k| match k {
            0..30 => 12_000,
            30..35 => 12_000 - 2_400 * (k as u32 - 29),
            _ => 0,
        }));
        let t50 = f.to_50_us.unwrap();
        assert!((3_100.0..3_400.0).contains(&t50), "{f:?}");
        assert!(!f.late_start);
    }

    #[test]
    fn a_trace_that_begins_after_the_cut_already_low_says_so() {
        let mut t = trace(0, 100, |k| 2_000u32.saturating_sub(40 * k as u32));
        t.off_index = 0;
        let f = analyze(&t);
        assert!(f.late_start);
        assert_eq!(f.to_50_us, Some(0.0));
        assert!(f.proven(0.10));
    }

    #[test]
    fn plot_points_are_bounded_and_start_at_the_switch_off() {
        let f = analyze(&trace(16, 5_000, |k| 12_000u32.saturating_sub(k as u32)));
        assert!(f.points.len() <= PLOT_POINTS, "{}", f.points.len());
        assert_eq!(f.points[0], (0.0, 12_000));
    }

    #[test]
    fn trace_lines_parse_and_bad_ones_are_refused() {
        let t =
            parse_trace("TRACE 2 hz=20000 nominal_mv=3300 off=2 x=1 mv=3300,3300,1000,0").unwrap();
        assert_eq!(
            t,
            Trace {
                channel: 2,
                rate_hz: 20_000,
                nominal_mv: 3300,
                off_index: 2,
                samples_mv: vec![3300, 3300, 1000, 0]
            }
        );
        assert!(matches!(
            parse_trace("PONG 1"),
            Err(TraceError::NotATrace { .. })
        ));
        assert_eq!(
            parse_trace("TRACE 1 nominal_mv=3300 off=0 mv=1"),
            Err(TraceError::BadField { field: "hz" })
        );
        assert_eq!(
            parse_trace("TRACE 1 hz=10 nominal_mv=3300 off=0 mv=1,x"),
            Err(TraceError::BadField { field: "mv" })
        );
        assert_eq!(
            parse_trace("TRACE 1 hz=10 nominal_mv=3300 off=5 mv=1,2"),
            Err(TraceError::OffBeyondEnd { off: 5, n: 2 })
        );
    }
}
