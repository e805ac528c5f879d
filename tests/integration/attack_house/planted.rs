//! Names another local user could plant first in a shared TMPDIR: a file or a symlink
//! at a name plugpull will make. Plugpull runs as root for real drives, and root may
//! unlink and write anything, so the name alone must never let plugpull delete, follow
//! or write into what someone else put there.

use super::names_in;
use crate::common::{bin, is_root, skip_unless};
use plugpull::verify::temp_log::TempLog;
use std::process::Command;

/// Not root's: the uid `nobody` has on most systems.
const NOBODY: u32 = 65534;

/// A temporary log whose name someone learned (a part file's creation shows it) and
/// planted a file of theirs at, before the fetch made it: dropping the log (the fetch
/// failed, verify ended) must not delete what is not plugpull's. The file is another
/// user's (chowned to nobody), as in a shared /tmp.
#[test]
fn a_file_planted_at_a_temporary_logs_name_is_not_deleted() {
    if !skip_unless(is_root(), "chown to another user needs root") {
        return;
    }
    let t = TempLog::new("attack");
    std::fs::write(&t.0, b"theirs").unwrap();
    std::os::unix::fs::chown(&t.0, Some(NOBODY), Some(NOBODY)).unwrap();
    let planted = t.0.clone();
    drop(t);
    let left = std::fs::read(&planted);
    let _ = std::fs::remove_file(&planted);
    assert_eq!(
        left.ok().as_deref(),
        Some(&b"theirs"[..]),
        "{}",
        planted.display()
    );
    // Plugpull's own file at the name is still removed when dropped.
    let t = TempLog::new("attack");
    std::fs::write(&t.0, b"ours").unwrap();
    let ours = t.0.clone();
    drop(t);
    assert!(!ours.exists(), "{}", ours.display());
}

/// `plugpull demo` stores its witness's logs in a directory named after its pid in
/// TMPDIR: a directory (or a symlink to one) planted at that name first must not be
/// used, written into, or removed with what it holds. The shell plants it at its own
/// pid, then execs the demo, which keeps that pid.
#[test]
fn a_directory_planted_at_the_demos_name_is_neither_used_nor_removed() {
    for symlink in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let plant = match symlink {
            false => {
                r#"mkdir "$TMPDIR/plugpull-demo-$$" && echo mine > "$TMPDIR/plugpull-demo-$$/planted""#
            }
            true => r#"ln -s "$1" "$TMPDIR/plugpull-demo-$$""#,
        };
        let script = format!(r#"{plant} && exec "$0" demo --duration 1s --seed 5 --json"#);
        let out = Command::new("sh")
            .args(["-c", &script, bin()])
            .arg(elsewhere.path())
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("symlink {symlink}: {stderr}");
        // The demo ran (in a directory of its own, or refused the name with an error).
        assert!(matches!(out.status.code(), Some(0) | Some(2)), "{what}");
        assert!(!stderr.contains("panicked"), "{what}");
        // Nothing written through the planted symlink.
        assert_eq!(names_in(elsewhere.path()), Vec::<String>::new(), "{what}");
        let planted: Vec<String> = names_in(tmp.path())
            .into_iter()
            .filter(|n| n.starts_with("plugpull-demo-"))
            .collect();
        if symlink {
            // The symlink itself is theirs to remove, left as it was.
            assert_eq!(planted.len(), 1, "{what}: {planted:?}");
            continue;
        }
        // The planted directory is left with exactly what was planted in it.
        let dir = planted
            .iter()
            .map(|n| tmp.path().join(n))
            .find(|p| p.join("planted").exists())
            .unwrap_or_else(|| panic!("the planted directory is gone: {planted:?}; {what}"));
        assert_eq!(names_in(&dir), ["planted"], "{what}");
        assert_eq!(std::fs::read(dir.join("planted")).unwrap(), b"mine\n");
        assert_eq!(
            planted.len(),
            1,
            "the demo left its own directory: {planted:?}"
        );
    }
}
