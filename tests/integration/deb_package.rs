//! The Debian package, built and installed for real: `scripts/build-deb.sh` (the static
//! binary, the man pages and completions it generates, the units, cargo-deb), then
//! `dpkg -i` into this machine's own system, and what an admin would check after it:
//! `plugpull --version`, `man plugpull-write`, bash completion, the `plugpull` user and
//! its state directory, the witness starting as that user, and `systemd-analyze verify`
//! on the installed units. `dpkg --purge` afterwards, also when a check fails.
//!
//! Why on the real system: what matters is what dpkg does with the package (maintainer
//! scripts, the user, the paths the units name), and only an install shows it.
//!
//! Needs root, dpkg and cargo-deb (.ci/run installs cargo-deb; skipped otherwise, a
//! failure with PLUGPULL_REQUIRE_ALL_TESTS=1). Refuses to run when a `plugpull` package
//! is installed already (it would replace and then purge it). Slow the first time: the
//! static release build takes minutes (tests/integration/static_binary.rs shares it).

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn sh(cmd: &str) -> (i32, String) {
    let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn have_cargo_deb() -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args(["deb", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Purges the package when dropped: the test must not leave it installed.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let (code, out) = sh("dpkg --purge plugpull");
        if code != 0 {
            eprintln!("dpkg --purge plugpull failed: {out}");
        }
    }
}

#[test]
fn the_deb_installs_with_dpkg_and_brings_what_it_promises() {
    if !common::skip_unless(common::is_root(), "needs root to install a package")
        || !common::skip_unless(
            common::have_tool("dpkg") && common::have_tool("dpkg-deb"),
            "needs dpkg",
        )
        || !common::skip_unless(
            have_cargo_deb(),
            "needs cargo-deb (cargo install cargo-deb --locked; .ci/run does)",
        )
    {
        return;
    }
    let (installed, _) = sh("dpkg-query -W -f '${Status}' plugpull | grep -q 'ok installed'");
    assert_ne!(
        installed, 0,
        "a plugpull package is installed already; this test would replace and purge it \
         (dpkg --purge plugpull first)"
    );

    // A user left by an earlier purge (Debian keeps system users) would hide whether this
    // install makes it: remove it when nothing of it is left.
    let (code, text) = sh("getent passwd plugpull");
    if code == 0 && text.contains(":/var/lib/plugpull:") && !Path::new("/var/lib/plugpull").exists()
    {
        let _ = sh("userdel plugpull; getent group plugpull && groupdel plugpull");
    }

    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(Path::new(root).join("scripts/build-deb.sh"))
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("deb"))
        .output()
        .expect("scripts/build-deb.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "build-deb.sh: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = stdout.lines().last().expect("the .deb's path").to_string();

    let _purge = Installed;
    let (code, text) = sh(&format!("dpkg -i {deb}"));
    assert_eq!(code, 0, "dpkg -i {deb}: {text}");

    // The binary, by its installed path and on PATH.
    let (code, text) = sh("/usr/bin/plugpull --version");
    assert!(code == 0 && text.starts_with("plugpull "), "{text}");
    let (_, text) = sh("file -b /usr/bin/plugpull");
    assert!(text.contains("static"), "not static: {text}");

    // Man pages: every page `plugpull man --dir` writes, installed and no other, each
    // one read through man(1) where it is installed.
    let pages_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (code, text) = sh(&format!(
        "/usr/bin/plugpull man --dir {}",
        pages_dir.path().display()
    ));
    assert_eq!(code, 0, "plugpull man --dir: {text}");
    let names = |dir: &Path, suffix: &str| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter_map(|f| f.strip_suffix(suffix).map(str::to_string))
            .filter(|p| p == "plugpull" || p.starts_with("plugpull-"))
            .collect();
        v.sort();
        v
    };
    let written = names(pages_dir.path(), ".1");
    assert!(
        written.len() > 10 && written.iter().any(|p| p == "plugpull-verify"),
        "man --dir wrote {written:?}"
    );
    let installed = names(Path::new("/usr/share/man/man1"), ".1.gz");
    assert_eq!(installed, written, "the man pages in /usr/share/man/man1");
    if common::have_tool("man") {
        for page in &written {
            // The C locale: groff writes the page's hyphens as U+2010 in UTF-8 ones.
            let (code, text) = sh(&format!(
                "LC_ALL=C MANPAGER=cat MANWIDTH=80 man {page} 2>&1"
            ));
            assert!(
                code == 0 && text.contains("NAME") && text.contains(&format!("{page}(1)")),
                "man {page}: {text}"
            );
        }
        let (code, text) = sh("MANPAGER=cat MANWIDTH=80 man plugpull-write 2>&1");
        assert!(
            code == 0 && text.contains("--witness"),
            "man plugpull-write: {text}"
        );
    }

    // Completions: bash loads them and completes the subcommands.
    for f in [
        "/usr/share/bash-completion/completions/plugpull",
        "/usr/share/zsh/vendor-completions/_plugpull",
        "/usr/share/fish/vendor_completions.d/plugpull.fish",
    ] {
        assert!(Path::new(f).exists(), "{f} missing");
    }
    let (code, text) = sh(
        "bash -c '. /usr/share/bash-completion/completions/plugpull && \
         COMP_WORDS=(plugpull ver) COMP_CWORD=1 COMP_LINE=\"plugpull ver\" COMP_POINT=12 && \
         _plugpull plugpull ver plugpull && echo \"${COMPREPLY[@]}\"'",
    );
    assert!(
        code == 0 && text.contains("verify"),
        "bash completion: {text}"
    );

    // The witness's user and state directory.
    let (code, text) = sh("getent passwd plugpull");
    assert_eq!(code, 0, "no user plugpull: {text}");
    let fields: Vec<&str> = text.trim().split(':').collect();
    assert_eq!(fields[5], "/var/lib/plugpull", "{text}");
    assert!(fields[6].ends_with("nologin"), "{text}");
    let (_, text) = sh("stat -c '%U:%G %a' /var/lib/plugpull");
    assert_eq!(text.trim(), "plugpull:plugpull 750");

    // Units: the installed files name the installed binary and pass systemd's check.
    for unit in ["plugpull-witness.service", "plugpull-agent.service"] {
        let path = format!("/usr/lib/systemd/system/{unit}");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(text.contains("ExecStart=/usr/bin/plugpull "), "{path}");
        if common::skip_unless(
            common::have_tool("systemd-analyze"),
            "systemd-analyze missing: the units are not verified (.ci/run installs systemd)",
        ) {
            // It exits 0 after a key it ignores ("Unknown key", "Failed to parse"):
            // any line it prints is a finding.
            let (code, out) = sh(&format!("systemd-analyze verify {path} 2>&1"));
            assert!(
                code == 0 && out.trim().is_empty(),
                "systemd-analyze verify {path}: exit {code}: {out}"
            );
        }
    }

    // The witness as its unit runs it: the user plugpull, the state directory.
    witness_runs_as_its_user();
    let _ = sh(
        "rm -f /var/lib/plugpull/*.acklog /var/lib/plugpull/*.journal \
         /var/lib/plugpull/*.lock",
    );

    drop(_purge);
    assert!(
        !Path::new("/usr/bin/plugpull").exists(),
        "purge left the binary"
    );
}

/// `plugpull listen` as user plugpull in /var/lib/plugpull, as plugpull-witness.service
/// starts it: it must get to "listening" (it can lock and write its directory).
fn witness_runs_as_its_user() {
    let mut child = Command::new("setpriv")
        .args([
            "--reuid=plugpull",
            "--regid=plugpull",
            "--init-groups",
            "/usr/bin/plugpull",
            "listen",
            "--bind",
            "127.0.0.1:0",
            "--dir",
            "/var/lib/plugpull",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let t0 = Instant::now();
    let mut seen = String::new();
    let listening = loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains("listening on") {
                    break true;
                }
            }
            Err(_) if t0.elapsed() > Duration::from_secs(20) => break false,
            Err(_) => {}
        }
        if let Ok(Some(_)) = child.try_wait() {
            break false;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        listening,
        "the witness did not start as user plugpull in /var/lib/plugpull:\n{seen}"
    );
}
