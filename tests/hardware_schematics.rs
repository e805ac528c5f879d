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
