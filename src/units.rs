//! Parsing and printing sizes, counts, durations and times the way people read them.

use std::time::Duration;

/// Why a size, size range or duration given by the user could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("'{0}' is not a size (try 4k, 64M, 1G)")]
    NotASize(String),
    #[error("'{0}': a size cannot be negative")]
    Negative(String),
    #[error(
        "unknown size unit '{unit}' in '{input}' (use k, M, G, T = KiB, MiB, GiB, TiB; kB, MB, GB, TB = powers of 1000)"
    )]
    UnknownSizeUnit { unit: String, input: String },
    #[error("'{0}' is not a whole number of bytes")]
    NotWholeBytes(String),
    #[error("{0} is too large")]
    TooLarge(String),
    #[error("record size '{0}' must be whole 512-byte sectors, min <= max (e.g. 4k or 4k-64k)")]
    NotASectorRange(String),
    #[error("'{0}' is not a duration (try 30s, 5m, 500ms)")]
    NotADuration(String),
    #[error("unknown duration unit '{unit}' in '{input}' (use ms, s, m, h)")]
    UnknownDurationUnit { unit: String, input: String },
    #[error("'{0}' is not a duration")]
    NegativeOrInfiniteDuration(String),
}

/// Parses "4096", "4k", "4KiB", "64M", "1.5G", "16MB". The rule (docs/GUIDE.md, "Sizes"):
/// a bare letter or an IEC unit is binary (k = KiB = 1024, M = MiB = 1024², ...), as
/// storage tools write sizes; an SI unit with B is decimal (kB = 1000, MB = 1000², ...),
/// as drive labels and `dd` read it. Letters are case-insensitive; "s" is a 512-byte
/// sector.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(UnitError::Negative(s.into()));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| UnitError::NotASize(s.into()))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "s" | "sector" | "sectors" => 512,
        u => {
            return Err(UnitError::UnknownSizeUnit {
                unit: u.into(),
                input: s.into(),
            });
        }
    };
    let v = n * mult as f64;
    if v.fract() != 0.0 || v < 0.0 || v > u64::MAX as f64 {
        return Err(UnitError::NotWholeBytes(s.into()));
    }
    Ok(v as u64)
}

/// [`parse_size`] for a count of bytes held in memory.
pub fn parse_size_usize(s: &str) -> Result<usize, UnitError> {
    usize::try_from(parse_size(s)?).map_err(|_| UnitError::TooLarge(s.into()))
}

/// A fixed record size ("4k") or an inclusive range ("4k-64k").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeRange {
    pub min: u64,
    pub max: u64,
}

/// Parses a [`SizeRange`] of whole 512-byte sectors, min <= max.
pub fn parse_size_range(s: &str) -> Result<SizeRange, UnitError> {
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (parse_size(a)?, parse_size(b)?),
        None => {
            let v = parse_size(s)?;
            (v, v)
        }
    };
    if a == 0 || a % 512 != 0 || b % 512 != 0 || a > b {
        return Err(UnitError::NotASectorRange(s.into()));
    }
    Ok(SizeRange { min: a, max: b })
}

/// Parses "30", "30s", "500ms", "5m", "2h".
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| UnitError::NotADuration(s.into()))?;
    let secs = match unit.trim() {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "us" => n / 1e6,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        u => {
            return Err(UnitError::UnknownDurationUnit {
                unit: u.into(),
                input: s.into(),
            });
        }
    };
    if !(secs >= 0.0 && secs.is_finite()) {
        return Err(UnitError::NegativeOrInfiniteDuration(s.into()));
    }
    // Past u64 seconds: an error, not the panic `from_secs_f64` gives.
    Duration::try_from_secs_f64(secs).map_err(|_| UnitError::TooLarge(s.into()))
}

/// "4.0 KiB", "1.5 GiB"; up to EiB, where u64 ends (16 EiB).
pub fn fmt_bytes(b: u64) -> String {
    const U: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// 1234567 -> "1,234,567": counts people read at a glance.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A span of time in seconds, with the precision people use for it: "850 µs", "1.5 ms",
/// "24 ms", "2.4 s", "4 min 10 s", "2 h 5 min"; "0" for none. One decimal below 10 of a
/// unit, none above: a reader compares spans at a glance, and the second digit of a
/// loss window or a flush latency is noise. The one formatter of spans for every report,
/// summary and chart, so that one span reads the same everywhere.
pub fn fmt_duration_s(secs: f64) -> String {
    if !secs.is_finite() {
        return format!("{secs} s");
    }
    if secs < 0.0 {
        return format!("-{}", fmt_duration_s(-secs));
    }
    if secs == 0.0 {
        return "0".into();
    }
    // (unit, its length in seconds, where the next unit takes over)
    for (unit, len_s, next) in [("µs", 1e-6, 1000.0), ("ms", 1e-3, 1000.0), ("s", 1.0, 60.0)] {
        let v = secs / len_s;
        let shown = if v < 9.95 {
            (v * 10.0).round() / 10.0
        } else {
            v.round()
        };
        if shown < next {
            let text = format!("{shown:.1}");
            let text = text.strip_suffix(".0").unwrap_or(&text);
            return format!("{text} {unit}");
        }
    }
    let whole_s = secs.round() as u64;
    if whole_s < 3600 {
        return match (whole_s / 60, whole_s % 60) {
            (m, 0) => format!("{m} min"),
            (m, s) => format!("{m} min {s} s"),
        };
    }
    match (
        (secs / 60.0).round() as u64 / 60,
        (secs / 60.0).round() as u64 % 60,
    ) {
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

/// [`fmt_duration_s`] of a span in milliseconds (loss windows, fall times).
pub fn fmt_duration_ms(ms: f64) -> String {
    fmt_duration_s(ms / 1e3)
}

/// [`fmt_duration_s`] of a span in microseconds (flush latencies and floors).
pub fn fmt_duration_us(us: f64) -> String {
    fmt_duration_s(us / 1e6)
}

/// A wall-clock time in ns since the Unix epoch (the writer's clock) as UTC to the
/// second: "2026-12-02 17:38:48 UTC", the form of every other time in the text output.
/// Nanoseconds mean nothing to a reader; the JSON keeps them for machines.
pub fn fmt_utc_ns(ns: u64) -> String {
    let t = chrono::DateTime::from_timestamp_nanos(i64::try_from(ns).unwrap_or(i64::MAX));
    format!("{} UTC", t.format("%Y-%m-%d %H:%M:%S"))
}

/// An RFC 3339 time as written in run descriptors ("2026-12-02T17:38:48.123456789+00:00")
/// as UTC to the second: "2026-12-02 17:38:48 UTC". None when it does not parse (a
/// writer may send anything; the caller shows it as it came).
pub fn fmt_utc_rfc3339(s: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_rfc3339(s).ok()?;
    Some(format!(
        "{} UTC",
        t.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M:%S")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(300), "300");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(53_000), "53,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
    #[test]
    fn spans_read_in_human_units() {
        for (secs, text) in [
            (0.0, "0"),
            (0.5e-6, "0.5 µs"),
            (87.24e-6, "87 µs"),
            (850e-6, "850 µs"),
            (999.7e-6, "1 ms"),
            (400e-6, "400 µs"),
            (1.5e-3, "1.5 ms"),
            (24.3e-3, "24 ms"),
            (340e-3, "340 ms"),
            (2.4, "2.4 s"),
            (12.34, "12 s"),
            (59.7, "1 min"),
            (95.0, "1 min 35 s"),
            (250.0, "4 min 10 s"),
            (3600.0, "1 h"),
            (2.0 * 3600.0 + 300.0, "2 h 5 min"),
            (-0.02, "-20 ms"),
        ] {
            assert_eq!(fmt_duration_s(secs), text, "{secs} s");
        }
    }
    #[test]
    fn times_are_utc_without_nanoseconds() {
        // 2026-12-02 17:38:48.123456789 UTC.
        let ns = 1_796_233_128_123_456_789;
        assert_eq!(fmt_utc_ns(ns), "2026-12-02 17:38:48 UTC");
        // Truncated, not rounded: the second the flush returned in.
        assert_eq!(fmt_utc_ns(ns + 800_000_000), "2026-12-02 17:38:48 UTC");
        assert_eq!(
            fmt_utc_rfc3339("2026-12-02T17:38:48.123456789+00:00").as_deref(),
            Some("2026-12-02 17:38:48 UTC")
        );
        // Another offset reads as the same instant in UTC.
        assert_eq!(
            fmt_utc_rfc3339("2026-12-02T18:38:48.5+01:00").as_deref(),
            Some("2026-12-02 17:38:48 UTC")
        );
        assert_eq!(fmt_utc_rfc3339("yesterday"), None);
    }
    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("8 sectors"), Ok(4096));
        assert!(parse_size("abc").is_err());
        assert!(parse_size("4q").is_err());
        assert!(parse_size("0.3").is_err());
    }
    /// The units people type: IEC and bare letters binary, SI with B decimal.
    #[test]
    fn si_and_iec_units() {
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("16MiB"), Ok(16 << 20));
        assert_eq!(parse_size("16mib"), Ok(16 << 20));
        assert_eq!(parse_size("16MB"), Ok(16_000_000));
        assert_eq!(parse_size("4kB"), Ok(4000));
        assert_eq!(parse_size("2TB"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
    }
    #[test]
    fn negative_sizes_say_so() {
        let e = parse_size("-5M").unwrap_err();
        assert_eq!(e, UnitError::Negative("-5M".into()));
        assert!(e.to_string().contains("cannot be negative"), "{e}");
    }
    #[test]
    fn durations() {
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("3 weeks").is_err());
    }
    #[test]
    fn bytes_print() {
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(4096), "4.0 KiB");
        assert_eq!(fmt_bytes(3 << 40), "3.0 TiB");
        assert_eq!(fmt_bytes(1536 << 40), "1.5 PiB");
        assert_eq!(fmt_bytes(1 << 62), "4.0 EiB");
        assert_eq!(fmt_bytes(u64::MAX), "16.0 EiB");
    }
}
