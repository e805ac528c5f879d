//! The firmware's protocol parser (hardware/firmware/plugpull_switch/pp_protocol.h),
//! compiled and run on the host with the system C compiler; skipped with a message when
//! there is none. Also builds the parser for AVR when avr-gcc is installed.

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
    let Some(cc) = ["cc", "gcc", "clang"].into_iter().find(|c| have(c)) else {
        eprintln!(
            "SKIPPED: no C compiler (cc, gcc, clang) on this machine; the firmware parser test needs one"
        );
        return;
    };
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
    if !have("avr-gcc") {
        eprintln!("SKIPPED: avr-gcc not installed (apt-get install gcc-avr avr-libc)");
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
    if !Path::new("/usr/share/arduino/Arduino.mk").exists() || !have("make") {
        eprintln!(
            "SKIPPED: arduino-mk not installed (apt-get install arduino-mk arduino-core-avr)"
        );
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
    let b = Command::new("make").current_dir(&sketch).output().unwrap();
    assert!(
        b.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&b.stdout),
        String::from_utf8_lossy(&b.stderr)
    );
    let hex = std::fs::read_dir(sketch.join("build-uno"))
        .unwrap()
        .flatten()
        .any(|e| e.path().extension().is_some_and(|x| x == "hex"));
    assert!(hex, "no .hex image was produced");
}
