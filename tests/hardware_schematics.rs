//! The interposer schematics (hardware/schematics/, SKiDL): each board passes SKiDL's
//! electrical rules check and our structure check, its drawing passes the picture check
//! (rendered headless with cairosvg: no overlapping labels, no label on a line, every rail
//! present), and the committed drawings (hardware/wiring/) and BOMs (hardware/bom/) are
//! what the code generates. A second test breaks boards and drawings on purpose and
//! requires every check to notice, so the first cannot pass by checking nothing.
//!
//! Needs python3 with the packages in hardware/schematics/requirements.txt (`.ci/run`
//! installs them); without them the tests skip with the reason printed, and fail under
//! PLUGPULL_REQUIRE_ALL_TESTS=1: see `common::skip_unless`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn check_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/schematics/check.py")
}

fn have_python_packages() -> bool {
    // (importing skidl writes log files into the working directory: not into the tree)
    Command::new("python3")
        .args(["-c", "import skidl, cairosvg, PIL"])
        .current_dir(std::env::temp_dir())
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_check(arg: Option<&str>) -> (bool, String) {
    let mut cmd = Command::new("python3");
    cmd.arg(check_py());
    if let Some(a) = arg {
        cmd.arg(a);
    }
    let out = cmd.output().expect("run python3");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const SKIP: &str = "python3 lacks skidl, cairosvg or pillow \
                    (python3 -m pip install -r hardware/schematics/requirements.txt)";

#[test]
fn interposer_schematics_pass_erc_and_their_drawings_pass_the_picture_check() {
    if !common::skip_unless(have_python_packages(), SKIP) {
        return;
    }
    let (ok, text) = run_check(None);
    assert!(ok, "hardware/schematics/check.py failed:\n{text}");
    for board in ["sata", "m2", "u2"] {
        assert!(
            text.contains(&format!("{board}: "))
                && text
                    .lines()
                    .any(|l| l.starts_with(&format!("{board}: ")) && l.ends_with(": ok")),
            "no passing line for {board}:\n{text}"
        );
    }
    assert!(text.contains("3 passed, 0 failed"), "{text}");
}

#[test]
fn schematic_checks_catch_broken_boards_and_drawings() {
    if !common::skip_unless(have_python_packages(), SKIP) {
        return;
    }
    let (ok, text) = run_check(Some("--self-test"));
    assert!(ok, "a check missed a fault it must catch:\n{text}");
    for fault in [
        "ERC, sense divider pin left open",
        "ERC, two switches driving one rail",
        "structure, sense on the wrong ADC pin",
        "drawing, overlapping labels",
        "drawing, label across a rail line",
        "drawing, 3.3 V rail missing",
    ] {
        assert!(
            text.contains(&format!("caught: {fault}")),
            "{fault} not caught:\n{text}"
        );
    }
    assert!(text.contains("clean drawing: passes"), "{text}");
}

/// The pins named on the first line of `NAME = ["A", "B"]` (or `NAME = (["A"] + ...`) in
/// interposers.py.
fn pin_list(src: &str, name: &str) -> Vec<String> {
    let line = src
        .lines()
        .find(|l| l.starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("no {name} in interposers.py"));
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The U.2 board's pin roles against the cited table hardware/schematics/u2-pins.tsv:
/// every pin switched as 12 V or tied to ground is that signal in the table and verified
/// by a source the table names; the 3.3 V aux pin is the table's, and a pin used for power
/// that no source verifies is listed under "Unverified pins" in the schematics README (so
/// a builder is told to check it). No Python needed: it reads the files.
#[test]
fn u2_pin_assignment_matches_the_cited_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/schematics");
    let tsv = std::fs::read_to_string(dir.join("u2-pins.tsv")).unwrap();
    let py = std::fs::read_to_string(dir.join("interposers.py")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let sources: Vec<&str> = tsv
        .lines()
        .filter_map(|l| l.strip_prefix("# ["))
        .filter_map(|l| l.split(']').next())
        .collect();
    let mut table = std::collections::BTreeMap::new();
    for l in tsv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f.len(), 4, "not pin, signal, status, source: {l:?}");
        assert!(
            ["verified", "unverified"].contains(&f[2]),
            "status of {}: {}",
            f[0],
            f[2]
        );
        assert!(
            f[3] == "none" && f[2] == "unverified" || sources.contains(&f[3]),
            "{}: source {} is not cited in the table's header",
            f[0],
            f[3]
        );
        table.insert(f[0].to_string(), (f[1].to_string(), f[2] == "verified"));
    }
    let unverified_listed = readme
        .split("## Unverified pins")
        .nth(1)
        .map(|s| s.split("\n## ").next().unwrap_or(""))
        .unwrap_or("");
    let mut roles: Vec<(String, &str)> = Vec::new();
    roles.extend(pin_list(&py, "U2_12V").into_iter().map(|p| (p, "+12V")));
    roles.extend(pin_list(&py, "U2_GND").into_iter().map(|p| (p, "GND")));
    let aux = py
        .split("\"3V3AUX\": [")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("the 3V3AUX pins of u2()");
    roles.extend(
        aux.split('"')
            .skip(1)
            .step_by(2)
            .map(|p| (p.to_string(), "+3.3V aux")),
    );
    assert!(roles.len() >= 7, "{roles:?}");
    for (pin, role) in &roles {
        let (signal, verified) = table
            .get(pin)
            .unwrap_or_else(|| panic!("{pin} ({role}) is not in u2-pins.tsv"));
        assert!(
            signal == role || signal.starts_with(&format!("{role} ")),
            "{pin} is {role} in the schematic but {signal} in u2-pins.tsv"
        );
        assert!(
            *verified || unverified_listed.contains(&format!("**{pin}**")),
            "{pin} ({role}) is unverified and not listed under \"Unverified pins\" in hardware/schematics/README.md"
        );
    }
    // Pins the table cannot vouch for may only pass through (or stay open) unless listed.
    for (pin, (signal, verified)) in &table {
        if !verified && !roles.iter().any(|(p, _)| p == pin) {
            let passed = pin_list(&py, "U2_PASS").contains(pin)
                || py.contains(&format!("\"{pin}\"]"))
                || pin_list(&py, "U2_OPEN").contains(pin);
            assert!(
                passed,
                "{pin} ({signal}) neither passes through nor stays open"
            );
        }
    }
    // The BOM and README send a builder to the table.
    let bom = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/bom/u2-interposer.md"),
    )
    .unwrap();
    assert!(readme.contains("u2-pins.tsv") && bom.contains("u2-pins.tsv"));
}
