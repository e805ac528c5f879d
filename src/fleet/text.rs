//! The matrix as text for people: one row per drive, the pairs that differ, a sentence
//! per drive; no line wider than [`WIDTH`] columns.

use super::Matrix;
use crate::units::thousands;
use std::fmt::Write;

/// The widest line the text has (a terminal of 100 columns shows it whole).
pub const WIDTH: usize = 100;

/// Drive names longer than this are cut (with "...") in the table; the sentences
/// keep them whole.
const NAME_COLUMNS: usize = 24;

/// Below this p-value two drives are said to differ beyond chance.
pub const SIGNIFICANT: f64 = 0.05;

pub fn matrix_text(m: &Matrix) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plugpull fleet: {} drives, {} power cuts each (seed {}): {}",
        m.drives.len(),
        m.cuts,
        m.seed,
        m.verdict().name()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<NAME_COLUMNS$} {:>5} {:>5} {:>5} {:>5} {:>5} {:>15} {:>12} {:>10}",
        "drive",
        "cuts",
        "PASS",
        "FAIL",
        "INC",
        "DEAD",
        "lost/fail cut",
        "worst window",
        "rate (95%)"
    );
    for d in &m.drives {
        let lost = match (
            d.acked_lost_per_failing_cut.iter().min(),
            d.acked_lost_per_failing_cut.iter().max(),
        ) {
            (Some(lo), Some(hi)) if lo == hi => thousands(*lo),
            (Some(lo), Some(hi)) => format!("{}-{}", thousands(*lo), thousands(*hi)),
            _ => "-".into(),
        };
        let window = d
            .worst_loss_window_ms
            .map_or("-".into(), |ms| format!("{ms:.1} ms"));
        let rate = match d.judged() {
            0 => "-".into(),
            _ => format!("≤ {:.1}%", d.failure_rate_upper_95 * 100.0),
        };
        let _ = writeln!(
            out,
            "{:<NAME_COLUMNS$} {:>5} {:>5} {:>5} {:>5} {:>5} {:>15} {:>12} {:>10}",
            cut_to(&d.drive.name, NAME_COLUMNS),
            d.cuts.len(),
            d.pass,
            d.fail,
            d.inconclusive,
            d.dead,
            lost,
            window,
            rate
        );
    }
    let _ = writeln!(
        out,
        "(INC: inconclusive; rate: the most its failure rate per cut can be, at 95% confidence)"
    );
    if !m.pairs.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Between drives (Fisher's exact test on failing against clean cuts):"
        );
        for p in &m.pairs {
            let says = match p.p_value < SIGNIFICANT {
                true => "they differ beyond chance",
                false => "no difference shown",
            };
            let p_text = match p.p_value < 1e-4 {
                true => "p < 0.0001".to_string(),
                false => format!("p = {:.4}", p.p_value),
            };
            let line = format!("  {} vs {}: {p_text} ({says})", p.a, p.b);
            out.push_str(&wrap(&line, "    "));
        }
    }
    let broken: Vec<&str> = m
        .drives
        .iter()
        .filter(|d| d.plp_claim_broken)
        .map(|d| d.drive.name.as_str())
        .collect();
    if !broken.is_empty() {
        let _ = writeln!(out);
        let line = format!(
            "POWER-LOSS PROTECTION CLAIM BROKEN: {} lost acknowledged writes although sold with power-loss protection.",
            broken.join(", ")
        );
        out.push_str(&wrap(&line, "  "));
    }
    let _ = writeln!(out);
    for d in &m.drives {
        out.push_str(&wrap(&d.sentence, "  "));
    }
    out
}

/// `s` in at most `n` characters: cut, with "..." at the end, when longer.
fn cut_to(s: &str, n: usize) -> String {
    match s.chars().count() <= n {
        true => s.to_string(),
        false => s.chars().take(n - 3).chain("...".chars()).collect(),
    }
}

/// `line` in lines of at most [`WIDTH`] columns, broken at spaces, its own leading
/// spaces kept and the continuation lines indented by `indent`; a word longer than a
/// line is cut.
fn wrap(line: &str, indent: &str) -> String {
    let body = line.trim_start_matches(' ');
    let mut cur = line[..line.len() - body.len()].to_string();
    let mut holds_a_word = false;
    let mut out = String::new();
    for word in body.split(' ').filter(|w| !w.is_empty()) {
        if holds_a_word && cur.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(&cut_to(&cur, WIDTH));
            out.push('\n');
            cur = indent.to_string();
            holds_a_word = false;
        }
        if holds_a_word {
            cur.push(' ');
        }
        cur.push_str(word);
        holds_a_word = true;
    }
    out.push_str(&cut_to(&cur, WIDTH));
    out.push('\n');
    out
}
