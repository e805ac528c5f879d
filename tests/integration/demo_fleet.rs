//! `plugpull demo --fleet`: three simulated drives cut together and compared. The drive
//! with power-loss protection and the honest one with a volatile cache must pass every
//! cut, the one that acknowledges flushes it never made must fail every cut, in every
//! seeded run; the command prints the matrix (text within 100 columns, or JSON) and
//! exits 1 because a drive failed.

use crate::common::*;
use plugpull::fleet::demo::{DRIVES, FleetDemoOptions};
use plugpull::fleet::{CutOutcome, FLEET_FORMAT};
use std::time::Duration;

#[test]
fn the_three_drives_are_judged_right_in_20_seeded_runs() {
    for seed in 1..=20u64 {
        let o = FleetDemoOptions {
            cuts: 1,
            seed: Some(seed),
            duration: Duration::from_millis(300),
            narrate: false,
        };
        let m = plugpull::fleet::demo::run(&o).unwrap();
        assert_eq!(m.seed, seed);
        let outcomes: Vec<CutOutcome> = m.drives.iter().map(|d| d.cuts[0].outcome).collect();
        assert_eq!(
            outcomes,
            [CutOutcome::Pass, CutOutcome::Pass, CutOutcome::Fail],
            "seed {seed}: {:#?}",
            m.drives
        );
        let lying = &m.drives[2];
        assert_eq!(lying.drive.name, DRIVES[2].0);
        assert!(lying.cuts[0].acked_lost > 0, "seed {seed}");
        assert!(
            m.drives[..2].iter().all(|d| d.cuts[0].acked > 0),
            "seed {seed}"
        );
    }
}

#[test]
fn demo_fleet_prints_the_matrix_and_exits_1() {
    let args = [
        "demo",
        "--fleet",
        "--cuts",
        "2",
        "--duration",
        "300ms",
        "--seed",
        "3",
    ];
    let r = run(args);
    assert_eq!(r.code, 1, "{r:?}");
    for line in r.stdout.lines() {
        assert!(line.chars().count() <= 100, "{line:?}");
    }
    assert!(
        r.stdout
            .starts_with("plugpull fleet: 3 drives, 2 power cuts each (seed 3): FAIL")
    );
    let row = |name: &str| -> Vec<String> {
        let line = r.stdout.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace()
            .skip(2)
            .take(5)
            .map(String::from)
            .collect()
    };
    assert_eq!(
        row("candidate A"),
        ["2", "2", "0", "0", "0"],
        "{}",
        r.stdout
    );
    assert_eq!(
        row("candidate B"),
        ["2", "2", "0", "0", "0"],
        "{}",
        r.stdout
    );
    assert_eq!(
        row("candidate C"),
        ["2", "0", "2", "0", "0"],
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("candidate C (plugpull simdrive (lying)) lost writes it had confirmed in 2 of 2 power cuts"),
        "{}",
        r.stdout
    );
    // The cuts as they go, on stderr.
    assert!(
        r.stderr
            .contains("cut 2 of 2: candidate A PASS, candidate B PASS, candidate C FAIL")
    );

    let mut json_args = args.to_vec();
    json_args.push("--json");
    let r = run(json_args);
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["format"], FLEET_FORMAT);
    assert_eq!(j["cuts"], 2);
    assert_eq!(j["drives"][0]["claims_plp"], true);
    assert_eq!(j["drives"][2]["fail"], 2);
    assert_eq!(j["drives"][2]["cuts"][1]["outcome"], "FAIL");
    assert_eq!(j["pairs"].as_array().unwrap().len(), 3);
    assert!(r.stderr.is_empty(), "{r:?}");
}

#[test]
fn bad_fleet_flags_are_refused() {
    for (args, says) in [
        (
            vec!["demo", "--fleet", "--profile", "lying"],
            "cannot be used with",
        ),
        (vec!["demo", "--cuts", "3"], "--fleet"),
        (
            vec!["demo", "--fleet", "--cuts", "0"],
            "0 is not in 1..=1000",
        ),
    ] {
        let r = run(&args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {r:?}");
    }
}

/// The matrix as `plugpull report` renders it: the page names every drive's sentence,
/// its row counts what the JSON counts, and its chart has a square per cut of every
/// drive, coloured by that cut's outcome, in order; nothing on it fetches anything.
#[test]
fn report_renders_the_fleet_matrix_as_one_page() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let args = [
        "demo",
        "--fleet",
        "--cuts",
        "3",
        "--duration",
        "300ms",
        "--seed",
        "5",
        "--json",
    ];
    let r = run(args);
    assert_eq!(r.code, 1, "{r:?}");
    let json = dir.path().join("fleet.json");
    std::fs::write(&json, &r.stdout).unwrap();
    let m: plugpull::fleet::Matrix = serde_json::from_str(&r.stdout).unwrap();
    let html_path = dir.path().join("fleet.html");
    let w = run([
        "report",
        json.to_str().unwrap(),
        "-o",
        html_path.to_str().unwrap(),
    ]);
    assert_eq!(w.code, 0, "{w:?}");
    assert!(
        w.stdout.contains("(3 drives, 3 cuts each, verdict FAIL,"),
        "{}",
        w.stdout
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    for bad in [
        "http://", "https://", "<script", "<link", "src=", "url(", "<img",
    ] {
        assert!(!html.contains(bad), "the page contains {bad:?}");
    }
    assert!(html.contains("<title>plugpull: 3 drives, 3 power cuts - FAIL</title>"));
    assert!(html.contains("data-verdict=\"FAIL\""));
    let rows: Vec<&str> = html.split("<tr class=\"drive\"").skip(1).collect();
    assert_eq!(rows.len(), m.drives.len());
    for (row, d) in rows.iter().zip(&m.drives) {
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(
            row.starts_with(&format!(" data-fail=\"{}\"", d.fail)),
            "{row}"
        );
        let cells: Vec<&str> = row
            .split("<td class=\"n\">")
            .skip(1)
            .map(|c| &c[..c.find("</td>").unwrap()])
            .collect();
        let counts = [d.pass, d.fail, d.inconclusive, d.dead].map(|n| n.to_string());
        assert_eq!(cells[..4], counts, "{row}");
        assert!(
            row.contains("<td>write back, FUA not known</td>"),
            "the write cache and FUA of a simulated drive: {row}"
        );
        assert!(row.ends_with("<td>not read</td>"), "{row}");
        assert!(
            html.contains(&format!("<li>{}</li>", d.sentence)),
            "{}",
            d.sentence
        );
        let squares: Vec<&str> = html
            .match_indices(&format!("data-drive=\"{}\" data-outcome=\"", d.drive.name))
            .map(|(i, pat)| {
                let rest = &html[i + pat.len()..];
                &rest[..rest.find('"').unwrap()]
            })
            .collect();
        let outcomes: Vec<&str> = d.cuts.iter().map(|c| c.outcome.name()).collect();
        assert_eq!(squares, outcomes, "{}", d.drive.name);
    }
    // The lying drive's claim is not PLP, and it is the only drive the banner names.
    let lying = &m.drives[2];
    assert!(lying.fail > 0);
    assert!(html.contains(&format!(
        "lost acknowledged writes: {} in {} of 3 cuts</div>",
        lying.drive.name, lying.fail
    )));
}

/// A matrix given with other inputs, in a format this build does not read, or damaged, is
/// refused with a sentence that says what to do, and no page is written.
#[test]
fn report_refuses_a_fleet_matrix_it_cannot_render() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let r = run([
        "demo",
        "--fleet",
        "--cuts",
        "1",
        "--duration",
        "200ms",
        "--seed",
        "2",
        "--json",
    ]);
    let good = dir.path().join("fleet.json");
    std::fs::write(&good, &r.stdout).unwrap();
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, r.stdout.replace(FLEET_FORMAT, "plugpull-fleet/9")).unwrap();
    let damaged = dir.path().join("damaged.json");
    std::fs::write(&damaged, r.stdout.replace("\"drives\"", "\"drivez\"")).unwrap();
    let out = dir.path().join("page.html");
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec![good.to_str().unwrap(), good.to_str().unwrap()],
            "is rendered on its own page: give it as the only input",
        ),
        (
            vec![newer.to_str().unwrap()],
            "plugpull-fleet/9, which this plugpull does not read",
        ),
        (vec![damaged.to_str().unwrap()], "malformed fleet matrix"),
    ];
    for (inputs, says) in cases {
        let mut args = vec!["report"];
        args.extend(&inputs);
        args.extend(["-o", out.to_str().unwrap()]);
        let w = run(args);
        assert_eq!(w.code, 2, "{w:?}");
        assert!(w.stderr.contains(says), "{}", w.stderr);
        assert!(!out.exists());
    }
}
