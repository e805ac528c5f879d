//! The fleet's page: the matrix of `plugpull demo --fleet --json` (format
//! `plugpull-fleet/1`) as one self-contained HTML file, under the same rules as a run's
//! page (inline CSS and SVG, no scripts, nothing fetched).
//!
//! Why its own page and not the cycles' page: the question is a comparison, so the page
//! leads with one sentence per drive, then a row per drive, then every cut of every drive
//! side by side, so a drive that fails where the others do not stands out at a glance.

use super::head;
use crate::fleet::{CutOutcome, DriveRow, Matrix};
use crate::model::Verdict;
use crate::report::svg::{esc, verdict_colour};
use crate::units::{fmt_duration_ms, thousands};
use std::fmt::Write;

/// A cut's colour: a verdict's, and near-black for a drive that could not be read.
fn outcome_colour(o: CutOutcome) -> &'static str {
    match o {
        CutOutcome::Pass => verdict_colour(Verdict::Pass),
        CutOutcome::Fail => verdict_colour(Verdict::Fail),
        CutOutcome::Inconclusive => verdict_colour(Verdict::Inconclusive),
        CutOutcome::Dead => "#212121",
    }
}

/// The page. `made_by` is the `plugpull report` command line.
pub fn render(m: &Matrix, title: Option<&str>, made_by: &str) -> String {
    let verdict = m.verdict();
    let title = title.map(str::to_string).unwrap_or_else(|| {
        format!(
            "plugpull: {} drives, {} power cuts - {verdict}",
            m.drives.len(),
            m.cuts
        )
    });
    let mut o = String::with_capacity(16 * 1024);
    head(&mut o, &title);
    let _ = write!(
        o,
        "<div class=\"banner\" id=\"verdict\" data-verdict=\"{verdict}\" style=\"background:{}\"><div class=\"verdict\">{verdict}</div><div class=\"why\">{}</div></div>",
        verdict_colour(verdict),
        esc(&banner_text(m))
    );
    o.push_str("<ul class=\"plain\" id=\"sentences\">");
    for d in &m.drives {
        let _ = write!(o, "<li>{}</li>", esc(&d.sentence));
    }
    o.push_str("</ul>");
    matrix_table(&mut o, m);
    let _ = write!(
        o,
        "<h2 id=\"cuts\">Every cut</h2><p>One square per power cut, in order; every drive was cut at the same moments. The number in a square is the acknowledged records that cut lost.</p>{}",
        cuts_chart(m)
    );
    pairs_table(&mut o, m);
    let _ = writeln!(
        o,
        "<p>This page was made with:</p><pre class=\"command\" id=\"made-by\">{}</pre>\
<p class=\"note\">plugpull {} · seed {} · generated {} · matrix: format {} (docs/fleet.md)</p></body></html>",
        esc(made_by),
        env!("CARGO_PKG_VERSION"),
        m.seed,
        chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC"),
        esc(&m.format)
    );
    o
}

/// "candidate C lost acknowledged writes in 3 of 5 cuts", or that none did.
fn banner_text(m: &Matrix) -> String {
    let failing: Vec<String> = m
        .drives
        .iter()
        .filter(|d| d.lost_acked_writes())
        .map(|d| {
            let dead = match d.dead_with_losses() {
                0 => String::new(),
                n => format!(", and dead with them after {n}"),
            };
            format!(
                "{} in {} of {} cuts{dead}",
                d.drive.name,
                d.fail,
                d.cuts.len()
            )
        })
        .collect();
    if failing.is_empty() {
        match m.verdict() {
            Verdict::Pass => "no drive lost an acknowledged write".into(),
            _ => "no drive lost an acknowledged write, but not every cut could be judged".into(),
        }
    } else {
        format!("lost acknowledged writes: {}", failing.join("; "))
    }
}

fn matrix_table(o: &mut String, m: &Matrix) {
    o.push_str(
        "<h2 id=\"matrix\">The matrix</h2><table id=\"matrix-table\"><tr><th>Drive</th><th>Model</th><th>Write cache, FUA</th><th>Claims PLP</th>\
<th>PASS</th><th>FAIL</th><th>INCONCLUSIVE</th><th>DEAD</th><th>Acked records lost per failing cut</th>\
<th>Worst loss window</th><th>Failure rate at most (95%)</th><th>Unsafe-shutdown counter per cut</th></tr>",
    );
    for d in &m.drives {
        let lost = if d.acked_lost_per_failing_cut.is_empty() {
            "-".to_string()
        } else {
            d.acked_lost_per_failing_cut
                .iter()
                .map(|n| thousands(*n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let claim = match (d.drive.claims_plp, d.plp_claim_broken) {
            (true, true) => "<span class=\"fail\">yes, broken</span>",
            (true, false) => "yes",
            (false, _) => "no",
        };
        let _ = write!(
            o,
            "<tr class=\"drive\" data-fail=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{claim}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            d.fail,
            esc(&d.drive.name),
            esc(&d.drive.model),
            esc(&cache_and_fua(d)),
            d.pass,
            d.fail,
            d.inconclusive,
            d.dead,
            esc(&lost),
            d.worst_loss_window_ms
                .map(fmt_duration_ms)
                .unwrap_or_else(|| "-".into()),
            rate(d),
            esc(&deltas(d)),
        );
    }
    o.push_str("</table>");
}

/// "write back, FUA" / "write through, no FUA"; "not known" for what was not read.
fn cache_and_fua(d: &DriveRow) -> String {
    let cache = d.drive.write_cache.as_deref().unwrap_or("not known");
    let fua = match d.drive.fua {
        Some(true) => "FUA",
        Some(false) => "no FUA",
        None => "FUA not known",
    };
    format!("{cache}, {fua}")
}

/// Each cut's rise of the unsafe-shutdown counter ("+1 +1 +0"), "-" where not read, or
/// "not read" when no cut read it.
fn deltas(d: &DriveRow) -> String {
    if d.cuts.iter().all(|c| c.unsafe_shutdowns_delta.is_none()) {
        return "not read".into();
    }
    d.cuts
        .iter()
        .map(|c| match c.unsafe_shutdowns_delta {
            Some(n) => format!("{n:+}"),
            None => "-".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The 95% upper bound as a percentage, or "-" when no cut was judged.
fn rate(d: &DriveRow) -> String {
    if d.judged() == 0 {
        "-".into()
    } else {
        format!("{:.1}%", d.failure_rate_upper_95 * 100.0)
    }
}

/// A row of squares per drive, a column per cut, each coloured by its outcome.
fn cuts_chart(m: &Matrix) -> String {
    const NAME_W: f64 = 160.0;
    const CELL: f64 = 26.0;
    const GAP: f64 = 4.0;
    let cols = m.drives.iter().map(|d| d.cuts.len()).max().unwrap_or(0);
    let w = NAME_W + cols as f64 * (CELL + GAP) + 10.0;
    let h = 24.0 + m.drives.len() as f64 * (CELL + GAP) + 10.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"chart\" id=\"cuts-chart\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\"><title>every cut of every drive</title>"
    );
    for c in 0..cols {
        let x = NAME_W + c as f64 * (CELL + GAP) + CELL / 2.0;
        let _ = write!(
            s,
            "<text x=\"{x}\" y=\"16\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            c + 1
        );
    }
    for (r, d) in m.drives.iter().enumerate() {
        let y = 24.0 + r as f64 * (CELL + GAP);
        let _ = write!(
            s,
            "<text x=\"4\" y=\"{}\" font-size=\"13\">{}</text>",
            y + CELL * 0.65,
            esc(&d.drive.name)
        );
        for (c, cut) in d.cuts.iter().enumerate() {
            let x = NAME_W + c as f64 * (CELL + GAP);
            let _ = write!(
                s,
                "<rect class=\"cut\" data-drive=\"{}\" data-outcome=\"{}\" x=\"{x}\" y=\"{y}\" width=\"{CELL}\" height=\"{CELL}\" fill=\"{}\"><title>{}, cut {}: {}, {} of {} acknowledged records lost</title></rect>",
                esc(&d.drive.name),
                cut.outcome.name(),
                outcome_colour(cut.outcome),
                esc(&d.drive.name),
                c + 1,
                cut.outcome.name(),
                thousands(cut.acked_lost),
                thousands(cut.acked)
            );
            if cut.acked_lost > 0 {
                let _ = write!(
                    s,
                    "<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#fff\" text-anchor=\"middle\">{}</text>",
                    x + CELL / 2.0,
                    y + CELL * 0.65,
                    compact(cut.acked_lost)
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// A count that fits a square: 950, 12k, 3M.
fn compact(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{}k", n / 1_000),
        _ => format!("{}M", n / 1_000_000),
    }
}

fn pairs_table(o: &mut String, m: &Matrix) {
    if m.pairs.is_empty() {
        return;
    }
    o.push_str(
        "<h2 id=\"pairs\">Between drives</h2><p>Fisher's exact test, two-sided, on failing against clean judged cuts: a small p-value says the two drives' failure rates differ by more than chance would make them.</p>\
<table id=\"pairs-table\"><tr><th>Drive</th><th>Drive</th><th>p-value</th></tr>",
    );
    for p in &m.pairs {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{:.3}</td></tr>",
            esc(&p.a),
            esc(&p.b),
            p.p_value
        );
    }
    o.push_str("</table>");
}
