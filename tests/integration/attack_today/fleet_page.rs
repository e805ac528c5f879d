//! `plugpull report MATRIX.json` of hand-made `plugpull-fleet/1` documents: what the page
//! says must follow from the cuts, names and models must be escaped, and the page must
//! fetch nothing.

use crate::common::*;
use plugpull::fleet::{CutOutcome, CutResult, DriveRow, DriveSpec, Matrix};
use serde_json::Value;
use std::path::Path;

fn cut(outcome: CutOutcome, lost: u64) -> CutResult {
    CutResult {
        outcome,
        acked_lost: lost,
        acked: 1000,
        loss_window_ms: (lost > 0).then_some(12.5),
        unsafe_shutdowns_delta: None,
    }
}

fn matrix(name_a: &str, model_a: &str) -> Matrix {
    let spec = |name: &str, model: &str| DriveSpec {
        name: name.into(),
        model: model.into(),
        claims_plp: true,
        write_cache: None,
        fua: None,
    };
    Matrix::new(
        7,
        vec![
            DriveRow::new(spec(name_a, model_a), vec![cut(CutOutcome::Pass, 0); 3]),
            DriveRow::new(spec("liar", "m"), vec![cut(CutOutcome::Fail, 40); 3]),
        ],
    )
}

/// Renders `doc`: the exit code and the page, if one was written.
fn render(dir: &Path, doc: &Value) -> (Run, Option<String>) {
    let json = dir.join("m.json");
    let html = dir.join("m.html");
    let _ = std::fs::remove_file(&html);
    std::fs::write(&json, serde_json::to_string(doc).unwrap()).unwrap();
    let r = run([
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    (r, std::fs::read_to_string(&html).ok())
}

fn fetches_nothing(page: &str) {
    for bad in [
        "<script",
        "<img",
        "<link",
        "<iframe",
        "<object",
        "<embed",
        "src=\"",
        "href=\"http",
        "url(",
        "@import",
    ] {
        assert!(!page.contains(bad), "the page has {bad}");
    }
}

#[test]
fn attack_today_names_and_models_with_html_are_escaped_everywhere() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let evil = "<img src=x onerror=alert(1)>\"'&";
    let doc = serde_json::to_value(matrix(evil, evil)).unwrap();
    let (r, page) = render(dir.path(), &doc);
    assert_eq!(r.code, 0, "{r:?}");
    let page = page.unwrap();
    fetches_nothing(&page);
    assert!(!page.contains("onerror=alert(1)>"), "unescaped");
    assert!(page.contains("&lt;img"));
}

/// A row whose counts say PASS over cuts that failed: the page must not say PASS. The
/// document is damaged (docs/fleet.md: exit 2, nothing written), or the page follows the
/// cuts.
#[test]
fn attack_today_a_row_that_disagrees_with_its_own_cuts_is_not_shown_as_it_claims() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut doc = serde_json::to_value(matrix("A", "m")).unwrap();
    let liar = &mut doc["drives"][1];
    liar["pass"] = 3.into();
    liar["fail"] = 0.into();
    liar["acked_lost_per_failing_cut"] = Value::Array(vec![]);
    liar["plp_claim_broken"] = false.into();
    liar["failure_rate_upper_95"] = 0.6.into();
    liar["sentence"] = "liar (m) kept every write it confirmed in all 3 power cuts".into();
    for p in doc["pairs"].as_array_mut().unwrap() {
        p["p_value"] = 1.0.into();
    }
    let (r, page) = render(dir.path(), &doc);
    if let Some(page) = page {
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            page.contains("data-verdict=\"FAIL\""),
            "a FAIL cut shown as PASS"
        );
        assert!(!page.contains("kept every write it confirmed in all 3"));
    } else {
        assert_eq!(r.code, 2, "{r:?}");
    }
    // The top-level count of cuts is the rows' too.
    let mut doc = serde_json::to_value(matrix("A", "m")).unwrap();
    doc["cuts"] = 1_000_000.into();
    let (r, page) = render(dir.path(), &doc);
    if let Some(page) = page {
        assert!(!page.contains("1000000 power cuts"), "{r:?}");
    } else {
        assert_eq!(r.code, 2, "{r:?}");
    }
}

/// Numbers no matrix of plugpull's has (counts at u64::MAX, a loss window of 1e308 ms or
/// negative, a p-value above 1): refused or rendered, never a panic.
#[test]
fn attack_today_hostile_numbers_do_not_crash_the_page() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let edits: [(&str, Value); 5] = [
        ("acked_lost", u64::MAX.into()),
        ("acked", u64::MAX.into()),
        ("loss_window_ms", 1e308.into()),
        ("loss_window_ms", (-5.0).into()),
        ("outcome", "MAYBE".into()),
    ];
    for (key, v) in edits {
        let mut doc = serde_json::to_value(matrix("A", "m")).unwrap();
        doc["drives"][1]["cuts"][0][key] = v.clone();
        let (r, page) = render(dir.path(), &doc);
        assert!(r.code == 0 || r.code == 2, "{key}={v}: {r:?}");
        if let Some(page) = page {
            fetches_nothing(&page);
            assert!(!page.contains("NaN"), "{key}={v}");
        }
    }
}
