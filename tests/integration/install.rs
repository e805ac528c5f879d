//! After an install (docs/install.md), `plugpull` is a command on PATH and what the
//! program tells people to type must work as printed: the demo's closing "Same drive
//! decisions again ...: plugpull demo ..." line is run through a shell whose PATH holds
//! only the installed binary's directory (as ~/.cargo/bin after `cargo install`) and the
//! system's, and must replay the same profile and seed.
//!
//! Also that README.md and docs/GUIDE.md give the install command and say where the
//! binary lands, so the step before the demo is not left to guessing.

use crate::common;

use std::path::Path;
use std::process::Command;

const REPLAY_PREFIX: &str = "Same drive decisions again";

fn shell(cmd: &str, bin_dir: &Path) -> (i32, String, String) {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .output()
        .expect("sh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The command on the demo's closing "Same drive decisions again (...): CMD" line.
fn replay_line(stdout: &str) -> String {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(REPLAY_PREFIX))
        .unwrap_or_else(|| panic!("no replay line in:\n{stdout}"));
    line.split_once(": ")
        .map(|(_, cmd)| cmd.trim().to_string())
        .unwrap_or_else(|| panic!("no command in {line:?}"))
}

#[test]
fn the_demos_replay_line_runs_as_printed_from_path() {
    // An "installed" plugpull: the binary alone in a bin directory, like ~/.cargo/bin.
    let home = tempfile::tempdir().unwrap();
    let bin_dir = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::fs::copy(common::bin(), bin_dir.join("plugpull")).unwrap();

    let (code, first, err) = shell(
        "plugpull demo --profile lying --seed 7 --duration 1s",
        &bin_dir,
    );
    assert!(code == 0 || code == 1, "demo: exit {code}\n{first}{err}");
    let replay = replay_line(&first);
    assert!(
        replay.starts_with("plugpull demo ") && replay.contains("--seed 7"),
        "{replay}"
    );

    let (code, again, err) = shell(&replay, &bin_dir);
    assert!(
        code == 0 || code == 1,
        "the replay line {replay:?} failed: exit {code}\n{again}{err}"
    );
    assert_eq!(
        replay_line(&again),
        replay,
        "the replay names another run than it replays"
    );
    assert!(err.contains("seed 7") || again.contains("seed 7"), "{err}");
}

#[test]
fn readme_and_guide_say_how_to_install_and_where_it_lands() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for doc in ["README.md", "docs/GUIDE.md", "docs/install.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for needed in ["cargo install --locked --path .", "~/.cargo/bin"] {
            assert!(text.contains(needed), "{doc} does not say {needed:?}");
        }
    }
}
