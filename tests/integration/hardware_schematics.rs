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

use crate::common;

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

/// Every pin of `NAME = ...` in interposers.py up to the next blank line: the quoted pins
/// plus the ones a comprehension `[f"E{n}" for n in range(1, 26) if n != 3]` makes (the
/// condition may also be `if n not in (3, 5)`). The 68-pin count check below catches a
/// form this does not read.
fn expanded_pin_list(src: &str, name: &str) -> Vec<String> {
    let start = src
        .find(&format!("\n{name} = "))
        .unwrap_or_else(|| panic!("no {name} in interposers.py"));
    let text = &src[start + 1..];
    let text = &text[..text.find("\n\n").unwrap_or(text.len())];
    let mut pins = Vec::new();
    let mut rest = text;
    while let Some(q) = rest.find('"') {
        let fstring = rest[..q].ends_with('f');
        let after = &rest[q + 1..];
        let end = after.find('"').expect("unclosed string");
        let lit = &after[..end];
        rest = &after[end + 1..];
        if !fstring {
            pins.push(lit.to_string());
            continue;
        }
        let prefix = lit
            .strip_suffix("{n}")
            .expect("f-string of the form \"X{n}\"");
        let clause = &rest[..rest.find(']').expect("comprehension closes")];
        let range = clause
            .split("range(")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .expect("range(a, b)");
        let (a, b) = range.split_once(',').expect("range(a, b)");
        let (a, b): (u32, u32) = (a.trim().parse().unwrap(), b.trim().parse().unwrap());
        let skip: Vec<u32> = match clause.split(" if n ").nth(1) {
            None => vec![],
            Some(cond) => cond
                .trim_start_matches("!=")
                .trim_start_matches("not in")
                .split(|c: char| !c.is_ascii_digit())
                .filter(|t| !t.is_empty())
                .map(|t| t.parse().unwrap())
                .collect(),
        };
        pins.extend(
            (a..b)
                .filter(|n| !skip.contains(n))
                .map(|n| format!("{prefix}{n}")),
        );
    }
    pins
}

/// The U.2 board's pin roles against the cited table hardware/schematics/u2-pins.tsv:
/// every pin switched as 12 V or 3.3 V aux, or tied to ground, is that signal in the
/// table; it is verified by a source the table names, or, resting on one secondary
/// source, listed under "Pins on one secondary source" in the schematics README, or,
/// unverified, listed under "Unverified pins" (so a builder is told to check it). Every
/// sideband signal the table names (PRSNT#, PERST#, REFCLK, SMBus, DualPortEn#, ...)
/// passes straight through pin to pin, never onto our ground or a switch. No Python
/// needed: it reads the files.
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
    // pin -> (signal, status)
    let mut table = std::collections::BTreeMap::new();
    for l in tsv
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = l.split('\t').collect();
        assert_eq!(f.len(), 4, "not pin, signal, status, source: {l:?}");
        assert!(
            ["verified", "secondary", "unverified"].contains(&f[2]),
            "status of {}: {}",
            f[0],
            f[2]
        );
        for src in f[3].split(',') {
            assert!(
                src == "none" && f[2] == "unverified" || sources.contains(&src),
                "{}: source {src} is not cited in the table's header",
                f[0]
            );
        }
        assert!(
            table
                .insert(f[0].to_string(), (f[1].to_string(), f[2].to_string()))
                .is_none(),
            "{} twice in u2-pins.tsv",
            f[0]
        );
    }
    let section = |title: &str| -> String {
        readme
            .split(&format!("## {title}"))
            .nth(1)
            .map(|s| s.split("\n## ").next().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    let unverified_listed = section("Unverified pins");
    let secondary_listed = section("Pins on one secondary source");
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
        let (signal, status) = table
            .get(pin)
            .unwrap_or_else(|| panic!("{pin} ({role}) is not in u2-pins.tsv"));
        assert!(
            signal == role || signal.starts_with(&format!("{role} ")),
            "{pin} is {role} in the schematic but {signal} in u2-pins.tsv"
        );
        let flagged = format!("**{pin}**");
        match status.as_str() {
            "verified" => {}
            "secondary" => assert!(
                secondary_listed.contains(&flagged),
                "{pin} ({role}) rests on one secondary source and is not listed under \
                 \"Pins on one secondary source\" in hardware/schematics/README.md"
            ),
            _ => assert!(
                unverified_listed.contains(&flagged),
                "{pin} ({role}) is unverified and not listed under \"Unverified pins\" in \
                 hardware/schematics/README.md"
            ),
        }
    }
    let passed = expanded_pin_list(&py, "U2_PASS");
    let open = pin_list(&py, "U2_OPEN");
    // Each of the connector's 68 contacts (P1-P15, S1-S28, E1-E25) has exactly one role.
    let mut all: Vec<String> = roles.iter().map(|(p, _)| p.clone()).collect();
    all.extend(passed.iter().cloned());
    all.extend(open.iter().cloned());
    all.sort();
    let mut want: Vec<String> = (1..=15)
        .map(|n| format!("P{n}"))
        .chain((1..=28).map(|n| format!("S{n}")))
        .chain((1..=25).map(|n| format!("E{n}")))
        .collect();
    want.sort();
    assert_eq!(
        all, want,
        "the U.2 board does not give each of the 68 pins one role"
    );
    for (pin, (signal, status)) in &table {
        if roles.iter().any(|(p, _)| p == pin) {
            continue;
        }
        // Pins the table cannot fully vouch for may only pass through (or stay open).
        if status != "verified" {
            assert!(
                passed.contains(pin) || open.contains(pin),
                "{pin} ({signal}, {status}) neither passes through nor stays open"
            );
        }
        // A sideband signal reaches the drive unchanged. PWRDIS may instead stay open:
        // the board leaves P1-P3 open (README "Connectors"), so the host cannot switch
        // the drive off behind the rig's back; the rig's switches are the only cut.
        let power_or_ground = signal.starts_with('+') || signal.starts_with("GND");
        let reserved = signal == "reserved";
        if !power_or_ground && !reserved {
            let ok = passed.contains(pin) || signal == "PWRDIS" && open.contains(pin);
            assert!(
                ok,
                "{pin} ({signal}) is a signal and must pass straight through pin to pin"
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
