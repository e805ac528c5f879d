//! `verify --format ocp` and `campaign --format ocp` (docs/ocp.md): every line valid
//! against the OCP Test and Validation output schema (tests/fixtures/ocp-schema/, checked
//! by Python's jsonschema there), numbered from 0, and saying what the JSON report and
//! the results file say: the verdict as the run's result and diagnosis, the counts as
//! measurements, the drive's identity as the device under test.
//!
//! Needs python3 with the packages in tests/fixtures/ocp-schema/requirements.txt (`.ci/run`
//! installs them); without them the tests are skipped, or fail with
//! PLUGPULL_REQUIRE_ALL_TESTS=1: see `common::skip_unless`.

use crate::common;
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ocp-schema")
}

const SKIP: &str = "python3 lacks jsonschema or rfc3339-validator \
                    (python3 -m pip install -r tests/fixtures/ocp-schema/requirements.txt)";

fn can_validate() -> bool {
    Command::new("python3")
        .args(["-c", "import jsonschema, referencing, rfc3339_validator"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Validates `out` against the schema (panics naming each invalid line) and returns its
/// lines, after checking they are numbered 0, 1, ... and begin with the schema version.
fn valid_lines(out: &str) -> Vec<Value> {
    let mut child = Command::new("python3")
        .arg(schema_dir().join("validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(out.as_bytes())
        .unwrap();
    let v = child.wait_with_output().unwrap();
    assert!(
        v.status.success(),
        "not valid OCP output:\n{}{}\n--- the output\n{out}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["sequenceNumber"], i as u64, "{l}");
    }
    assert_eq!(lines[0]["schemaVersion"], json!({"major": 2, "minor": 0}));
    let stamps: Vec<&str> = lines
        .iter()
        .map(|l| l["timestamp"].as_str().unwrap())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] <= w[1]),
        "timestamps go back: {stamps:?}"
    );
    lines
}

fn run_artifact<'a>(lines: &'a [Value], key: &str) -> &'a Value {
    let found: Vec<&Value> = lines
        .iter()
        .filter_map(|l| l["testRunArtifact"].get(key))
        .collect();
    assert_eq!(found.len(), 1, "one {key} in {lines:?}");
    found[0]
}

/// The step artifacts `key` of the step named `step`.
fn in_step<'a>(lines: &'a [Value], step: &str, key: &str) -> Vec<&'a Value> {
    let id = lines
        .iter()
        .find(|l| l["testStepArtifact"]["testStepStart"]["name"] == step)
        .unwrap_or_else(|| panic!("no step {step:?}"))["testStepArtifact"]["testStepId"]
        .clone();
    lines
        .iter()
        .map(|l| &l["testStepArtifact"])
        .filter(|a| a["testStepId"] == id)
        .filter_map(|a| a.get(key))
        .collect()
}

fn measurement<'a>(lines: &'a [Value], step: &str, name: &str) -> &'a Value {
    in_step(lines, step, "measurement")
        .into_iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no measurement {name} in {step}"))
}

fn verify_ocp(w: &WitnessProc, t: &Path) -> Run {
    run([
        "verify",
        t.to_str().unwrap(),
        "--witness",
        &w.addr,
        "--rehearsal",
        "--format",
        "ocp",
    ])
}

const JUDGE: &str = "read back and judge";

#[test]
fn verify_pass_and_fail_are_valid_ocp_runs_with_the_reports_counts() {
    if !common::skip_unless(can_validate(), SKIP) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("t.img");
    let wr = write(&w, &t, &["--size", "256k", "--count", "64"]);
    assert_eq!(wr.code, 0, "{wr:?}");

    let v = verify_ocp(&w, &t);
    assert_eq!(v.code, 0, "{v:?}");
    let lines = valid_lines(&v.stdout);
    let start = run_artifact(&lines, "testRunStart");
    assert_eq!(start["name"], "plugpull-verify");
    assert_eq!(start["parameters"]["rehearsal"], true);
    let report = verify(&w, &t, &[]).json();
    let device = &report["device"];
    let hw = &start["dutInfo"]["hardwareInfos"][0];
    assert_eq!(hw["hardwareInfoId"], "drive0");
    assert_eq!(hw["location"], device["target"]);
    if let Some(serial) = device["serial"].as_str() {
        assert_eq!(hw["serialNumber"], serial);
        assert_eq!(
            start["dutInfo"]["dutInfoId"],
            device["wwn"].as_str().unwrap_or(serial)
        );
    }
    assert_eq!(
        start["dutInfo"]["metadata"]["capacity_bytes"],
        device["size_bytes"]
    );
    assert_eq!(
        run_artifact(&lines, "testRunEnd"),
        &json!({"status": "COMPLETE", "result": "PASS"})
    );
    assert_eq!(measurement(&lines, JUDGE, "intact_records")["value"], 64);
    assert_eq!(measurement(&lines, JUDGE, "lost_records")["value"], 0);
    assert_eq!(
        measurement(&lines, "load the acknowledgements", "acked_records")["value"],
        64
    );
    let diag = in_step(&lines, JUDGE, "diagnosis");
    assert_eq!((diag.len(), &diag[0]["type"]), (1, &json!("PASS")));

    // Records 40..48 set back to zeros: lost.
    edit(&t, 40 * 4096, 8 * 4096, |b| b.fill(0));
    let report = verify(&w, &t, &[]).json();
    assert_eq!(report["verdict"], "FAIL");
    let v = verify_ocp(&w, &t);
    assert_eq!(v.code, 1, "{v:?}");
    let lines = valid_lines(&v.stdout);
    assert_eq!(
        run_artifact(&lines, "testRunEnd"),
        &json!({"status": "COMPLETE", "result": "FAIL"})
    );
    for class in ["intact", "lost", "corrupt", "shorn", "misdirected"] {
        assert_eq!(
            measurement(&lines, JUDGE, &format!("{class}_records"))["value"],
            report["counts"][class],
            "{class}"
        );
    }
    let lost = measurement(&lines, JUDGE, "lost_records");
    assert_eq!(lost["value"], 8);
    assert_eq!(lost["unit"], "records");
    assert_eq!(
        lost["validators"],
        json!([{"name": "no acknowledged record lost (PASS needs 0)", "type": "EQUAL", "value": 0}])
    );
    assert_eq!(
        measurement(&lines, JUDGE, "loss_window_ms")["value"],
        report["loss_window"]["ms"]
    );
    assert_eq!(
        measurement(&lines, JUDGE, "ordering_holes")["value"],
        report["ordering_holes"]["count"]
    );
    let diag = in_step(&lines, JUDGE, "diagnosis");
    assert_eq!(diag.len(), 1);
    assert_eq!(
        (&diag[0]["type"], &diag[0]["verdict"]),
        (&json!("FAIL"), &json!("FAIL"))
    );
    let summary = report["summary"].as_str().unwrap();
    assert!(
        diag[0]["message"].as_str().unwrap().starts_with(summary),
        "{}",
        diag[0]
    );
}

/// An error exit (2) is an OCP run too: its error, status ERROR, no result.
#[test]
fn a_verify_error_is_a_valid_ocp_run_with_status_error() {
    if !common::skip_unless(can_validate(), SKIP) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.img");
    std::fs::write(&t, vec![0u8; 4096]).unwrap();
    let missing = d.path().join("no.acklog");
    let v = run([
        "verify",
        t.to_str().unwrap(),
        "--acks",
        missing.to_str().unwrap(),
        "--format",
        "ocp",
    ]);
    assert_eq!(v.code, 2, "{v:?}");
    let lines = valid_lines(&v.stdout);
    assert_eq!(
        run_artifact(&lines, "testRunEnd"),
        &json!({"status": "ERROR", "result": "NOT_APPLICABLE"})
    );
    let error = run_artifact(&lines, "error");
    assert_eq!(error["symptom"], "verify-error");
    assert!(!error["message"].as_str().unwrap().is_empty());
    assert_eq!(
        run_artifact(&lines, "testRunStart")["dutInfo"]["dutInfoId"],
        t.to_str().unwrap()
    );
}

#[test]
fn json_with_a_contradicting_format_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let t = d.path().join("t.img");
    for args in [
        ["--json", "--format", "ocp"],
        ["--format", "text", "--json"],
    ] {
        let mut all = vec!["verify", t.to_str().unwrap(), "--acks", "x"];
        all.extend(args);
        let v = run(all);
        assert_eq!(v.code, 2, "{v:?}");
        assert!(v.stderr.contains("--json contradicts --format"), "{v:?}");
        assert_eq!(v.stdout, "");
    }
    let v = run([
        "campaign", "--config", "x.toml", "--json", "--format", "ocp",
    ]);
    assert_eq!(v.code, 2, "{v:?}");
    assert!(
        v.stderr.contains("--json contradicts --format ocp"),
        "{v:?}"
    );
}

#[test]
fn a_campaign_of_a_lying_drive_is_one_ocp_run_a_step_per_cycle() {
    if !common::skip_unless(can_validate(), SKIP) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("lying.toml");
    std::fs::write(
        &cfg,
        r#"
[campaign]
cycles = 3
results = "lying.jsonl"
delay = "10ms-60ms"
off = "5ms"
seed = 42

[target]
kind = "simdrive"
profile = "lying"
size = "8M"

[power]
driver = "simdrive"
"#,
    )
    .unwrap();
    let c = run([
        "campaign",
        "--quiet",
        "--format",
        "ocp",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(c.code, 1, "{c:?}");
    let lines = valid_lines(&c.stdout);
    let results: Vec<Value> = std::fs::read_to_string(d.path().join("lying.jsonl"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), 3);
    let start = run_artifact(&lines, "testRunStart");
    assert_eq!(start["name"], "plugpull-campaign");
    assert_eq!(start["parameters"]["seed"], 42);
    assert_eq!(
        start["dutInfo"]["hardwareInfos"][0]["serialNumber"],
        results[0]["device"]["serial"]
    );
    for r in &results {
        let step = format!("cycle {}", r["cycle"]);
        let diag = in_step(&lines, &step, "diagnosis");
        assert_eq!(diag.len(), 1, "{step}");
        assert_eq!(diag[0]["verdict"], r["verdict"], "{step}");
        assert_eq!(
            diag[0]["type"],
            match r["verdict"].as_str().unwrap() {
                "PASS" => "PASS",
                "FAIL" => "FAIL",
                _ => "UNKNOWN",
            },
            "{step}"
        );
        assert_eq!(
            measurement(&lines, &step, "lost_records")["value"],
            r["counts"]["lost"],
            "{step}"
        );
        assert_eq!(
            measurement(&lines, &step, "acked_records")["value"],
            r["acked_records"],
            "{step}"
        );
    }
    let failed = results.iter().filter(|r| r["verdict"] == "FAIL").count();
    assert!(failed > 0, "a lying drive fails some cycle: {results:?}");
    assert_eq!(
        measurement(&lines, "campaign summary", "failed_cycles")["value"],
        failed
    );
    assert_eq!(
        run_artifact(&lines, "testRunEnd"),
        &json!({"status": "COMPLETE", "result": "FAIL"})
    );
}
