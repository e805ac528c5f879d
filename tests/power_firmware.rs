//! The firmware's protocol parser (hardware/firmware/plugpull_switch/pp_protocol.h),
//! compiled and run on the host with the system C compiler. Also builds the parser for
//! AVR with avr-gcc, and the whole sketch with Debian's Arduino core. A missing tool skips
//! the test with its reason printed, and fails it when PLUGPULL_REQUIRE_ALL_TESTS=1 (CI,
//! whose `.ci/run` installs the tools): see `common::skip_unless`.

mod common;

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
    for flags in [None, Some("PP_FLAGS=-DPP_SENSE=1 -DPP_PWM_GATES=1")] {
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
