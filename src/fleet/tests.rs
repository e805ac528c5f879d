use super::*;

fn cut(outcome: CutOutcome, lost: u64, window_ms: Option<f64>) -> CutResult {
    CutResult {
        outcome,
        acked_lost: lost,
        acked: 100,
        loss_window_ms: window_ms,
        unsafe_shutdowns_delta: None,
    }
}

fn spec(name: &str, claims_plp: bool) -> DriveSpec {
    DriveSpec {
        name: name.into(),
        model: "model X, firmware 1.0".into(),
        claims_plp,
        write_cache: Some("write back".into()),
        fua: Some(true),
    }
}

/// A row counts each outcome, keeps what each failing cut lost, and says in one
/// sentence what the drive did, for every class of outcome.
#[test]
fn a_row_counts_its_cuts_and_says_what_they_show() {
    use CutOutcome::*;
    let failing = vec![
        cut(Pass, 0, None),
        cut(Fail, 510, Some(12.5)),
        cut(Fail, 7, Some(40.0)),
        cut(Pass, 0, None),
    ];
    let r = DriveRow::new(spec("B", false), failing.clone());
    assert_eq!((r.pass, r.fail, r.inconclusive, r.dead), (2, 2, 0, 0));
    assert_eq!(r.acked_lost_per_failing_cut, [510, 7]);
    assert_eq!(r.worst_loss_window_ms, Some(40.0));
    assert!(!r.plp_claim_broken);
    assert_eq!(
        r.sentence,
        "B (model X, firmware 1.0) lost writes it had confirmed in 2 of 4 power cuts: do not use it for a database or a ZFS log device."
    );
    let plp = DriveRow::new(spec("P", true), failing);
    assert!(plp.plp_claim_broken);
    assert!(
        plp.sentence
            .contains("in 2 of 4 power cuts, although it claims power-loss protection: do not")
    );
    let clean = DriveRow::new(spec("A", true), vec![cut(Pass, 0, None); 20]);
    assert!(!clean.plp_claim_broken);
    assert_eq!(
        clean.sentence,
        "A (model X, firmware 1.0) kept every write it confirmed in all 20 power cuts: its failure rate per cut is below 13.9% at 95% confidence."
    );
    let mixed = vec![
        cut(Pass, 0, None),
        cut(Inconclusive, 0, None),
        cut(Dead, 0, None),
    ];
    let m = DriveRow::new(spec("M", false), mixed);
    assert_eq!((m.pass, m.inconclusive, m.dead), (1, 1, 1));
    assert!(
        m.sentence.contains(
            "in the 1 of 3 power cuts that could be judged (1 could not be judged, the drive was dead after 1): its failure rate per cut is below 95.0%"
        ),
        "{}",
        m.sentence
    );
    let none = DriveRow::new(spec("N", false), vec![cut(Dead, 0, None); 2]);
    assert_eq!(
        none.sentence,
        "N (model X, firmware 1.0): none of its 2 power cuts could be judged (the drive was dead after 2)."
    );
    assert_eq!(none.failure_rate_upper_95, 1.0);
}

fn fleet() -> Matrix {
    use CutOutcome::*;
    Matrix::new(
        7,
        vec![
            DriveRow::new(spec("candidate A", true), vec![cut(Pass, 0, None); 20]),
            DriveRow::new(
                spec("candidate B with a name far too long for its column", false),
                vec![cut(Pass, 0, None); 20],
            ),
            DriveRow::new(
                spec("candidate C", true),
                vec![cut(Fail, 1_234, Some(3.5)); 20],
            ),
        ],
    )
}

/// Every pair of drives is tested, in the rows' order; the fleet fails when one drive
/// failed.
#[test]
fn the_matrix_tests_every_pair_and_fails_when_a_drive_failed() {
    let m = fleet();
    let pairs: Vec<(&str, &str)> = m
        .pairs
        .iter()
        .map(|p| (p.a.as_str(), p.b.as_str()))
        .collect();
    assert_eq!(pairs.len(), 3);
    assert_eq!(pairs[0].0, "candidate A");
    assert_eq!(pairs[2].1, "candidate C");
    assert_eq!(m.pairs[0].p_value, 1.0);
    assert!((m.pairs[1].p_value - 1.4508889103849688e-11).abs() < 1e-15);
    assert_eq!(m.verdict(), Verdict::Fail);
    assert_eq!(m.cuts, 20);
    let clean = Matrix::new(1, vec![m.drives[0].clone()]);
    assert_eq!(clean.verdict(), Verdict::Pass);
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(json["format"], FLEET_FORMAT);
    assert_eq!(json["drives"][2]["name"], "candidate C");
    assert_eq!(json["drives"][2]["plp_claim_broken"], true);
    assert_eq!(json["drives"][2]["cuts"][0]["outcome"], "FAIL");
}

/// The text fits 100 columns, names the broken claim, and separates thousands.
#[test]
fn the_text_fits_100_columns() {
    let t = text::matrix_text(&fleet());
    for line in t.lines() {
        assert!(line.chars().count() <= text::WIDTH, "{line:?}");
    }
    let row = t.lines().find(|l| l.starts_with("candidate C")).unwrap();
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields[2..8], ["20", "0", "20", "0", "0", "1,234"]);
    assert!(t.contains("candidate B with a na..."), "{t}");
    assert!(t.contains("  candidate A vs candidate C: p < 0.0001 (they differ beyond chance)"));
    // Wrapped at a space, the rest indented.
    assert!(
        t.contains("  candidate A vs candidate B with a name far too long for its column: p = 1.0000 (no difference\n    shown)"),
        "{t}"
    );
    assert!(t.contains("POWER-LOSS PROTECTION CLAIM BROKEN: candidate C lost acknowledged"));
    assert!(t.starts_with("plugpull fleet: 3 drives, 20 power cuts each (seed 7): FAIL\n"));
}
