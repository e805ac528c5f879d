//! The firmware's protocol parser (hardware/firmware/plugpull_switch/pp_protocol.h),
//! compiled and run on the host with the system C compiler. Also builds the parser for
//! AVR with avr-gcc, and the whole sketch with Debian's Arduino core. A missing tool skips
//! the test with its reason printed, and fails it when PLUGPULL_REQUIRE_ALL_TESTS=1 (CI,
//! whose `.ci/run` installs the tools): see `common::skip_unless`.

use crate::common;

use std::path::Path;
use std::process::Command;

fn have(cc: &str) -> bool {
    Command::new(cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn firmware_protocol_parser_passes_its_host_unit_test() {
    let fw = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/firmware");
    let cc = ["cc", "gcc", "clang"].into_iter().find(|c| have(c));
    if !common::skip_unless(
        cc.is_some(),
        "no C compiler (cc, gcc, clang); install one (apt-get install gcc)",
    ) {
        return;
    }
    let cc = cc.unwrap();
    let out = tempfile::tempdir().unwrap();
    let exe = out.path().join("test_protocol");
    let b = Command::new(cc)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(fw.join("plugpull_switch"))
        .arg(fw.join("test/test_protocol.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let r = Command::new(&exe).output().unwrap();
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success() && text.contains("0 failed"), "{text}");
}

#[test]
fn firmware_parser_builds_for_avr_when_avr_gcc_is_installed() {
    if !common::skip_unless(
        have("avr-gcc"),
        "avr-gcc not installed (apt-get install gcc-avr avr-libc)",
    ) {
        return;
    }
    let fw = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/firmware");
    let out = tempfile::tempdir().unwrap();
    let b = Command::new("avr-gcc")
        .args(["-mmcu=atmega328p", "-Os", "-Wall", "-Werror", "-I"])
        .arg(fw.join("plugpull_switch"))
        .arg(fw.join("test/avr_smoke.c"))
        .arg("-o")
        .arg(out.path().join("avr_smoke.elf"))
        .output()
        .unwrap();
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
}

#[test]
fn whole_sketch_builds_with_debians_arduino_core_when_installed() {
    if !common::skip_unless(
        Path::new("/usr/share/arduino/Arduino.mk").exists() && have("make"),
        "arduino-mk or make not installed (apt-get install make arduino-mk arduino-core-avr)",
    ) {
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware/firmware/plugpull_switch");
    // Build out of tree: copy the sketch so the checkout stays clean.
    let dir = tempfile::tempdir().unwrap();
    let sketch = dir.path().join("plugpull_switch");
    std::fs::create_dir(&sketch).unwrap();
    for f in ["plugpull_switch.ino", "pp_protocol.h", "Makefile"] {
        std::fs::copy(src.join(f), sketch.join(f)).unwrap();
    }
    // The default build (version 1 wiring) and a version 2 rig's: rail sensing on A0/A1
    // and the gates on PWM pins for ramps (hardware/firmware/PROTOCOL.md).
    // And one build per interposer board (its rail table, hardware/schematics/).
    for flags in [
        None,
        Some("PP_FLAGS=-DPP_SENSE=1 -DPP_PWM_GATES=1"),
        Some("PP_FLAGS=-DPP_BOARD=PP_BOARD_SATA"),
        Some("PP_FLAGS=-DPP_BOARD=PP_BOARD_M2"),
        Some("PP_FLAGS=-DPP_BOARD=PP_BOARD_U2"),
    ] {
        let _ = std::fs::remove_dir_all(sketch.join("build-uno"));
        let mut make = Command::new("make");
        make.current_dir(&sketch);
        if let Some(f) = flags {
            make.arg(f);
        }
        let b = make.output().unwrap();
        assert!(
            b.status.success(),
            "{flags:?}\n{}\n{}",
            String::from_utf8_lossy(&b.stdout),
            String::from_utf8_lossy(&b.stderr)
        );
        let hex = std::fs::read_dir(sketch.join("build-uno"))
            .unwrap()
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "hex"));
        assert!(hex, "no .hex image was produced ({flags:?})");
    }
}

/// The firmware's rail table for each interposer board is the board's schematic: the
/// channel count, the nominal voltage of each channel (the 100% of the fall times) and the
/// controller pins, as hardware/schematics/ says (README table and CHANNEL_PINS). A 3.3 V
/// rail judged against 12 V would count a rail stuck at 1 V as a proven cut.
#[test]
fn firmware_board_tables_match_the_interposer_schematics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("hardware");
    let sketch =
        std::fs::read_to_string(root.join("firmware/plugpull_switch/plugpull_switch.ino")).unwrap();
    let readme = std::fs::read_to_string(root.join("schematics/README.md")).unwrap();
    let py = std::fs::read_to_string(root.join("schematics/interposers.py")).unwrap();
    // CHANNEL_PINS = {1: ("D9", "A0"), 2: ("D10", "A1"), 3: ("D3", "A2")}
    let pins_line = py
        .lines()
        .find(|l| l.starts_with("CHANNEL_PINS"))
        .expect("CHANNEL_PINS in interposers.py");
    let quoted: Vec<&str> = pins_line.split('"').skip(1).step_by(2).collect();
    let gates: Vec<String> = quoted
        .iter()
        .step_by(2)
        .map(|d| d[1..].to_string())
        .collect();
    let senses: Vec<String> = quoted
        .iter()
        .skip(1)
        .step_by(2)
        .map(|a| a.to_string())
        .collect();
    for (board, row) in [("SATA", "| SATA |"), ("M2", "| M.2"), ("U2", "| U.2")] {
        // "| SATA | 12 V (1), 5 V (2), 3.3 V (3); ..." -> [12000, 5000, 3300]
        let cells = readme
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no {row} row in schematics/README.md"));
        let rails = cells.split('|').nth(2).unwrap().split(';').next().unwrap();
        let mut nominal_mv = vec![];
        for (ch, part) in rails.split(',').enumerate() {
            let volts: f64 = part.trim().split(' ').next().unwrap().parse().unwrap();
            assert!(part.contains(&format!("({})", ch + 1)), "{board}: {rails}");
            nominal_mv.push((volts * 1000.0).round() as u32);
        }
        let block = sketch
            .split(&format!("PP_BOARD == PP_BOARD_{board}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no PP_BOARD_{board} block in the sketch"))
            .split("#e")
            .next()
            .unwrap();
        let define = |name: &str| -> Vec<String> {
            let l = block
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{board}: no {name}"));
            let inner = l.split('{').nth(1).map(|x| x.trim_end_matches('}'));
            match inner {
                Some(list) => list.split(',').map(|x| x.trim().to_string()).collect(),
                None => vec![l.rsplit(' ').next().unwrap().to_string()],
            }
        };
        let n = nominal_mv.len();
        assert_eq!(define("PP_CHANNELS"), [n.to_string()], "{board}");
        let want_mv: Vec<String> = nominal_mv.iter().map(|v| v.to_string()).collect();
        assert_eq!(
            define("PP_NOMINAL_MV"),
            want_mv,
            "{board}: nominal voltages"
        );
        assert_eq!(define("PP_GATE_PINS"), gates[..n], "{board}: gate pins");
        assert_eq!(define("PP_SENSE_PINS"), senses[..n], "{board}: sense pins");
        // Full scale: 5 V times the divider, 20 V for a 12 V rail, 10 V below that.
        let full: Vec<String> = nominal_mv
            .iter()
            .map(|&mv| if mv > 5000 { "20000" } else { "10000" }.to_string())
            .collect();
        assert_eq!(define("PP_FULL_MV"), full, "{board}: dividers");
    }
}
