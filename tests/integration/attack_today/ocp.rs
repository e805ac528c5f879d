//! `campaign --format ocp` of a fleet: valid against the vendored schema, its result the
//! exit code's, and every cycle's step naming the drive it cut (two drives of one model
//! are otherwise the same step twice, and a reader cannot tell which one failed).

use crate::common::*;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn can_validate() -> bool {
    Command::new("python3")
        .args(["-c", "import jsonschema, referencing, rfc3339_validator"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn valid(out: &str) -> Vec<Value> {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ocp-schema");
    let mut child = Command::new("python3")
        .arg(schema.join("validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(out.as_bytes())
        .unwrap();
    let v = child.wait_with_output().unwrap();
    assert!(v.status.success(), "not valid OCP: {v:?}\n{out}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn attack_today_a_fleets_ocp_run_is_valid_and_names_each_cycles_drive() {
    if !skip_unless(can_validate(), "python3 lacks jsonschema") {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cfg = dir.path().join("fleet.toml");
    let drive = |name: &str, profile: &str| {
        format!(
            "\n[[drives]]\nname = \"{name}\"\n[drives.target]\nkind = \"simdrive\"\nprofile = \"{profile}\"\nsize = \"4M\"\n"
        )
    };
    std::fs::write(
        &cfg,
        format!(
            "[campaign]\ncycles = 2\nresults = \"r.jsonl\"\ndelay = \"20ms-60ms\"\noff = \"5ms\"\nseed = 3\n[power]\ndriver = \"simdrive\"\n{}{}",
            drive("good one", "honest"),
            drive("bad one", "lying")
        ),
    )
    .unwrap();
    let r = run([
        "campaign",
        "--config",
        cfg.to_str().unwrap(),
        "--quiet",
        "--format",
        "ocp",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines = valid(&r.stdout);
    let steps: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["testStepArtifact"]["testStepStart"]["name"].as_str())
        .collect();
    assert_eq!(
        steps,
        [
            "cycle 1: good one",
            "cycle 1: bad one",
            "cycle 2: good one",
            "cycle 2: bad one",
            "campaign summary"
        ]
    );
    let end = lines
        .iter()
        .find_map(|l| l["testRunArtifact"].get("testRunEnd"))
        .unwrap();
    assert_eq!(end["result"], "FAIL", "{end}");
}
