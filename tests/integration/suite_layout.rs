//! The integration tests stay one test binary (see main.rs): every test file in
//! tests/integration/ is a module of it, and nothing else in tests/ is a test binary of
//! its own. Cargo makes a binary of every `tests/*.rs` and `tests/*/main.rs`, each
//! linking all of plugpull again, and a file here without its `mod` line is never
//! compiled, so its tests would pass by not running.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

/// The modules main.rs declares (`mod NAME;` lines).
fn declared_modules() -> BTreeSet<String> {
    let main = fs::read_to_string(tests_dir().join("integration/main.rs")).unwrap();
    main.lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_test_file_here_is_a_module_of_the_binary() {
    let declared = declared_modules();
    assert!(declared.contains("common"), "{declared:?}");
    let mut undeclared = vec![];
    for entry in fs::read_dir(tests_dir().join("integration")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let is_module = if path.is_dir() {
            path.join("mod.rs").exists()
        } else {
            path.extension().is_some_and(|e| e == "rs") && name != "main"
        };
        if is_module && !declared.contains(&name) {
            undeclared.push(path.display().to_string());
        }
    }
    undeclared.sort();
    assert!(
        undeclared.is_empty(),
        "never compiled: add `mod NAME;` to tests/integration/main.rs for {undeclared:?}"
    );
}

#[test]
fn no_other_test_binary_in_tests() {
    let mut binaries = vec![];
    for entry in fs::read_dir(tests_dir()).unwrap() {
        let path = entry.unwrap().path();
        let own_binary = if path.is_dir() {
            path.join("main.rs").exists() && !path.ends_with("integration")
        } else {
            path.extension().is_some_and(|e| e == "rs")
        };
        if own_binary {
            binaries.push(path.display().to_string());
        }
    }
    binaries.sort();
    assert!(
        binaries.is_empty(),
        "test binaries of their own, each linking all of plugpull again: `git mv` each \
         into tests/integration/ (a directory's main.rs becoming its mod.rs) and add \
         `mod NAME;` to tests/integration/main.rs: {binaries:?}"
    );
}
