//! The text report: aligned tables in the shapes of the tools people compare against,
//! then the reading. (The JSON is the `BenchReport` serialised as is; see docs/bench.md.)

use super::measure::Status;
use super::report::BenchReport;
use crate::device::FlushMethod;
use crate::units::{fmt_bytes, thousands};
use std::fmt::Write;

/// Renders `rows` under `headers`: the first column left-aligned, the others right-aligned,
/// and a last free-text column ("note") left as is.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let n = headers.len();
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::from(" ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i == 0 {
                s.push(' ');
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else if i == n - 1 && headers[i] == "note" {
                s.push_str("  ");
                s.push_str(c);
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out += &line(r.iter().map(String::as_str).collect());
    }
    out
}

/// Every figure in the tables, printed as the reading quotes it.
fn f(v: f64) -> String {
    super::reading::figure(v)
}

fn note(status: Status) -> String {
    status.mark().to_string()
}

fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::from(indent);
    for word in text.split_whitespace() {
        if line.len() > indent.len() && line.len() + 1 + word.len() > width {
            out += &line;
            out.push('\n');
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if line.len() > indent.len() {
        out += &line;
        out.push('\n');
    }
    out
}

fn errors<'a>(out: &mut String, errs: impl Iterator<Item = (String, &'a Option<String>)>) {
    for (what, e) in errs {
        if let Some(e) = e {
            let _ = writeln!(out, "  ! {what}: {e}");
        }
    }
}

/// The whole text report.
pub fn text(r: &BenchReport) -> String {
    let mut o = String::new();
    let d = &r.device;
    let s = &r.settings;
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "?".into());
    let yn = |v: Option<bool>| match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    };
    let _ = writeln!(
        o,
        "plugpull bench {}  (region {} at offset {})",
        r.bench_path,
        fmt_bytes(s.region_bytes),
        fmt_bytes(s.region_offset_bytes)
    );
    let _ = writeln!(
        o,
        "device: {}  model {}  serial {}  firmware {}",
        opt(&d.disk),
        opt(&d.model),
        opt(&d.serial),
        opt(&d.firmware)
    );
    let _ = writeln!(
        o,
        "cache:  write_cache {}  fua {}  rotational (kernel flag) {}",
        d.write_cache
            .as_deref()
            .map(|w| format!("\"{w}\""))
            .unwrap_or_else(|| "?".into()),
        yn(d.fua),
        yn(d.rotational)
    );
    let _ = writeln!(
        o,
        "run:    flush {}, {}, {:.2} s per size, seed {}",
        s.flush_method.name(),
        if s.direct { "O_DIRECT" } else { "page cache" },
        s.time_per_size_s,
        s.seed
    );

    if !r.sweep.is_empty() {
        sweep_table(&mut o, r);
    }
    if !r.methods.is_empty() {
        methods_table(&mut o, r);
    }
    // A table cut short before its first row (Ctrl-C) is left out, as the sweep is.
    if let Some(du) = r.durability.as_ref().filter(|du| !du.rows.is_empty()) {
        durability_table(&mut o, du);
    }
    if let Some(iops) = &r.iops {
        iops_table(&mut o, iops);
    }
    reading(&mut o, &r.reading);
    o
}

fn sweep_table(o: &mut String, r: &BenchReport) {
    let s = &r.settings;
    let flush_word = match s.flush_method {
        FlushMethod::None => "no flush".to_string(),
        FlushMethod::Dsync => "O_DSYNC".to_string(),
        m => m.name().to_string(),
    };
    let _ = writeln!(
        o,
        "\nSync-write sweep: random size-aligned writes, each with {flush_word} (µs per write+flush, like diskinfo -wS)"
    );
    let rows: Vec<Vec<String>> = r
        .sweep
        .iter()
        .map(|x| {
            vec![
                fmt_bytes(x.size_bytes),
                thousands(x.ios),
                f(x.latency.latency_us_mean),
                f(x.latency.latency_us_p50),
                f(x.latency.latency_us_p99),
                f(x.latency.latency_us_p999),
                f(x.latency.latency_us_max),
                f(x.ios_per_s),
                f(x.throughput_mb_per_s),
                note(x.status),
            ]
        })
        .collect();
    *o += &table(
        &[
            "size", "ios", "mean", "p50", "p99", "p99.9", "max", "IO/s", "MB/s", "note",
        ],
        &rows,
    );
    errors(
        o,
        r.sweep.iter().map(|x| (fmt_bytes(x.size_bytes), &x.error)),
    );
}

fn methods_table(o: &mut String, r: &BenchReport) {
    let _ = writeln!(
        o,
        "\nFlush methods: one 8 KiB write in place (like pg_test_fsync)"
    );
    let rows: Vec<Vec<String>> = r
        .methods
        .iter()
        .map(|m| {
            let name = match m.method {
                FlushMethod::Dsync => "open_dsync (O_DSYNC)",
                FlushMethod::Fdatasync => "fdatasync",
                FlushMethod::Fsync => "fsync",
                FlushMethod::None => "write, no flush (reference)",
            };
            vec![
                name.to_string(),
                f(m.ops_per_s),
                f(m.latency_us_per_op),
                f(m.latency_us_p50),
                f(m.latency_us_p99),
                note(m.status),
            ]
        })
        .collect();
    *o += &table(&["method", "ops/s", "µs/op", "p50", "p99", "note"], &rows);
    errors(
        o,
        r.methods
            .iter()
            .map(|m| (m.method.name().to_string(), &m.error)),
    );
}

fn durability_table(o: &mut String, du: &super::durability::Durability) {
    let _ = writeln!(
        o,
        "\nDurability cost: sequential {} records, {} (like iozone -e)",
        fmt_bytes(du.record_bytes),
        du.flush_method.name()
    );
    let rows: Vec<Vec<String>> = du
        .rows
        .iter()
        .map(|x| {
            let name = match x.mode {
                super::durability::FlushMode::NoFlush => "no flush",
                super::durability::FlushMode::FlushAtEnd => "flush at end (timed)",
                super::durability::FlushMode::FlushEveryRecord => "flush every record",
            };
            vec![
                name.to_string(),
                fmt_bytes(x.bytes),
                format!("{:.3}", x.elapsed_s),
                f(x.throughput_mb_per_s),
                format!("{:.3}", x.ratio_to_no_flush),
                note(x.status),
            ]
        })
        .collect();
    *o += &table(&["mode", "written", "s", "MB/s", "ratio", "note"], &rows);
    errors(
        o,
        du.rows.iter().map(|x| (format!("{:?}", x.mode), &x.error)),
    );
}

fn iops_table(o: &mut String, iops: &[super::iops::IopsRow]) {
    {
        let threads = iops.first().map(|x| x.threads).unwrap_or(1);
        let _ = writeln!(
            o,
            "\nIOPS: no flush, {threads} thread(s) = queue depth {threads} (like SQLIO)"
        );
        let rows: Vec<Vec<String>> = iops
            .iter()
            .map(|x| {
                vec![
                    format!("{:?}", x.op).to_lowercase(),
                    format!("{:?}", x.pattern).to_lowercase(),
                    fmt_bytes(x.block_bytes),
                    f(x.ios_per_s),
                    f(x.throughput_mb_per_s),
                    f(x.latency_us_min),
                    f(x.latency_us_avg),
                    f(x.latency_us_max),
                    note(x.status),
                ]
            })
            .collect();
        *o += &table(
            &[
                "op", "pattern", "block", "IOs/s", "MB/s", "min µs", "avg µs", "max µs", "note",
            ],
            &rows,
        );
        errors(
            o,
            iops.iter().map(|x| {
                (
                    format!("{:?} {:?} {}", x.op, x.pattern, fmt_bytes(x.block_bytes)),
                    &x.error,
                )
            }),
        );
    }
}

fn reading(o: &mut String, rd: &super::reading::Reading) {
    let _ = writeln!(
        o,
        "\nReading ({}):",
        serde_json::to_value(rd.class)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    );
    *o += &wrap(&rd.summary, "  ", 92);
    for n in &rd.notes {
        *o += &wrap(n, "  ", 92);
    }
    let _ = writeln!(o, "  The power-cut test:");
    for c in &rd.power_cut_test {
        let _ = writeln!(o, "    {c}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn table_aligns_columns() {
        let t = table(
            &["size", "ios", "note"],
            &[
                vec!["512 B".into(), "7".into(), "".into()],
                vec!["8.0 MiB".into(), "12345".into(), "FLUSH FAILED".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        // The numeric column ends at the same place on every line.
        let end = |l: &str, s: &str| l.find(s).unwrap() + s.len();
        assert_eq!(end(lines[0], "ios"), end(lines[1], "7"));
        assert_eq!(end(lines[1], "7"), end(lines[2], "12345"));
    }
}
