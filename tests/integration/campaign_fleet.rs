//! A campaign of several drives (`[[drives]]`): every cycle cuts every drive, one
//! witness for all, and the campaign ends with the fleet matrix. Three simulated drives
//! (power-loss protection, an honest volatile cache, one that acknowledges flushes it
//! never made): the matrix must name the lying drive, and only it, as failing every cut.

use crate::common::*;
use plugpull::fleet::{CutOutcome, Matrix};
use std::path::{Path, PathBuf};

fn fleet_config(dir: &Path, cycles: u64, drives: &str) -> PathBuf {
    let p = dir.join("fleet.toml");
    std::fs::write(
        &p,
        format!(
            r#"
[campaign]
cycles = {cycles}
results = "fleet.jsonl"
delay = "10ms-60ms"
off = "5ms"
seed = 42

[power]
driver = "simdrive"
{drives}"#
        ),
    )
    .unwrap();
    p
}

const THREE: &str = r#"
[[drives]]
name = "candidate A"
claims_plp = true
[drives.target]
kind = "simdrive"
profile = "honest-plp"
size = "8M"

[[drives]]
name = "candidate B"
[drives.target]
kind = "simdrive"
profile = "honest"
size = "8M"

[[drives]]
name = "candidate C"
[drives.target]
kind = "simdrive"
profile = "lying"
size = "8M"
"#;

fn lines_of(results: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(results)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_fleet_campaign_names_the_lying_drive_and_only_it() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cfg = fleet_config(dir.path(), 3, THREE);
    let r = run(["campaign", "--config", cfg.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let m: Matrix = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m.format, plugpull::fleet::FLEET_FORMAT);
    assert_eq!(m.seed, 42);
    assert_eq!(m.cuts, 3);
    let names: Vec<&str> = m.drives.iter().map(|d| d.drive.name.as_str()).collect();
    assert_eq!(names, ["candidate A", "candidate B", "candidate C"]);
    for d in &m.drives[..2] {
        assert_eq!(
            d.cuts.iter().map(|c| c.outcome).collect::<Vec<_>>(),
            [CutOutcome::Pass; 3],
            "{}: {:?}",
            d.drive.name,
            d.cuts
        );
        assert!(d.cuts.iter().all(|c| c.acked > 0 && c.acked_lost == 0));
        assert!(!d.plp_claim_broken);
    }
    let lying = &m.drives[2];
    assert_eq!(lying.fail, 3, "{:?}", lying.cuts);
    assert!(lying.acked_lost_per_failing_cut.iter().all(|n| *n > 0));
    assert!(lying.drive.model.contains("lying"), "{}", lying.drive.model);
    // As verify identified each drive; a simulated drive has no health log to read.
    assert!(
        m.drives
            .iter()
            .all(|d| d.drive.write_cache.as_deref() == Some("write back"))
    );
    assert!(
        lying
            .cuts
            .iter()
            .all(|c| c.unsafe_shutdowns_delta.is_none())
    );
    assert!(
        lying
            .sentence
            .contains("lost writes it had confirmed in 3 of 3 power cuts")
    );
    // Every cycle of every drive is a line of the one results file, named by drive.
    let lines = lines_of(&dir.path().join("fleet.jsonl"));
    assert_eq!(lines.len(), 9);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["cycle"], (i / 3 + 1) as u64, "{l}");
        assert_eq!(l["drive"], names[i % 3], "{l}");
    }
    // Runs of different drives and cycles are different runs at the one witness.
    let mut runs: Vec<&str> = lines
        .iter()
        .map(|l| l["run_id"].as_str().unwrap())
        .collect();
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 9);

    // --summary prints the same matrix from the results file, cutting nothing.
    let s = run([
        "campaign",
        "--config",
        cfg.to_str().unwrap(),
        "--summary",
        "--json",
    ]);
    assert_eq!(s.code, 1, "{s:?}");
    let again: Matrix = serde_json::from_str(&s.stdout).unwrap();
    assert_eq!(
        serde_json::to_value(&again.drives).unwrap(),
        serde_json::to_value(&m.drives).unwrap()
    );
    assert_eq!(lines_of(&dir.path().join("fleet.jsonl")).len(), 9);

    // Resumed with more cycles: only the new cycle is run, for every drive; the text
    // matrix fits 100 columns and names the lying drive.
    let more = run([
        "campaign",
        "--config",
        cfg.to_str().unwrap(),
        "--cycles",
        "4",
    ]);
    assert_eq!(more.code, 1, "{more:?}");
    let lines = lines_of(&dir.path().join("fleet.jsonl"));
    assert_eq!(lines.len(), 12);
    assert!(lines[9..].iter().all(|l| l["cycle"] == 4));
    assert!(
        more.stdout
            .starts_with("plugpull fleet: 3 drives, 4 power cuts each (seed 42): FAIL"),
        "{}",
        more.stdout
    );
    for line in more.stdout.lines() {
        assert!(line.chars().count() <= 100, "{line:?}");
    }
}

#[test]
fn a_fleet_of_honest_drives_passes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let two = THREE
        .split("[[drives]]\nname = \"candidate C\"")
        .next()
        .unwrap();
    let cfg = fleet_config(dir.path(), 2, two);
    let r = run(["campaign", "--config", cfg.to_str().unwrap(), "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let m: Matrix = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m.drives.len(), 2);
    assert!(m.drives.iter().all(|d| d.pass == 2 && d.fail == 0));
}

#[test]
fn fleet_files_that_cannot_be_run_are_refused_before_anything_is_cut() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let real = "[[drives]]\nname = \"ssd\"\n[drives.target]\nkind = \"device\"\nserial = \"S1\"\n";
    for (drives, says) in [
        (
            format!("{THREE}\n[target]\nkind = \"simdrive\"\n"),
            "remove the top-level [target]",
        ),
        (
            THREE.replace("candidate B", "candidate A"),
            "\"candidate A\" is given twice",
        ),
        (
            THREE.replace("name = \"candidate B\"\n", ""),
            "every drive needs a name",
        ),
        (real.to_string(), "a real drive needs its own switch"),
        (
            "[[drives]]\nname = \"h\"\n[drives.target]\nkind = \"host\"\n[drives.power]\ndriver = \"manual\"\nscope = \"host\"\n".to_string(),
            "whole-host drives",
        ),
        (
            THREE.replace("profile = \"lying\"", "profile = \"lyin\""),
            "drives[2] (\"candidate C\")",
        ),
        (
            THREE.replace("claims_plp = true", "claims_plp = \"yes\""),
            "claims_plp must be true or false",
        ),
    ] {
        let cfg = fleet_config(dir.path(), 1, &drives);
        let r = run(["campaign", "--config", cfg.to_str().unwrap()]);
        assert_eq!(r.code, 2, "{drives}: {r:?}");
        assert!(r.stderr.contains(says), "{says}: {}", r.stderr);
        assert!(!dir.path().join("fleet.jsonl").exists(), "{drives}");
    }
}
