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
