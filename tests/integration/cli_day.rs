//! Small command-line behaviours: `fetch` names both ways to say which run,
//! `listen` without `--dir` uses a fixed, documented state directory.

use crate::common;

#[test]
fn fetch_without_run_or_target_names_both() {
    let r = common::run(["fetch", "--witness", "127.0.0.1:1", "-o", "/nonexistent/x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--run"), "{r:?}");
    assert!(r.stderr.contains("--target"), "{r:?}");
}

/// `listen` without `--dir`, as an unprivileged user (uid/gid 65534) with HOME in a
/// temporary directory: it creates ~/.local/state/plugpull/witness and says so.
#[test]
fn listen_without_dir_uses_the_users_state_directory() {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = d.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let log = d.path().join("listen.log");
    let mut cmd = Command::new(common::bin());
    cmd.args(["listen", "--bind", "127.0.0.1:0"])
        .current_dir(d.path())
        .env("HOME", &home)
        .env_remove("XDG_STATE_HOME")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    if common::is_root() {
        // As root the default is /var/lib/plugpull/witness; check a user's instead.
        std::os::unix::fs::chown(&home, Some(65534), Some(65534)).unwrap();
        cmd.uid(65534).gid(65534);
    }
    let mut child = cmd.spawn().unwrap();
    let want = home.join(".local/state/plugpull/witness");
    let t0 = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("listening on") || t0.elapsed() > Duration::from_secs(20) {
            break text;
        }
        if let Ok(Some(_)) = child.try_wait() {
            break std::fs::read_to_string(&log).unwrap_or_default();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        text.contains(&format!("logs in {}", want.display())),
        "{text}"
    );
    assert!(want.is_dir(), "{} was not created", want.display());
    if common::is_root() {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&want).unwrap().uid(),
            65534,
            "run as the user"
        );
    }
    assert!(
        !d.path().join("plugpull-witness").exists(),
        "the old default in the current directory"
    );
}

/// Help that teaches, from the built binary: every subcommand's `-h` ends with examples
/// that run it; verify's usage line names both ways to give the acks.
#[test]
fn help_shows_examples_and_verify_usage_names_acks() {
    for sub in [
        "listen",
        "write",
        "verify",
        "fetch",
        "runs",
        "replay",
        "bench",
        "simdrive",
        "demo",
        "soak",
        "campaign",
        "report",
        "agent",
        "completions",
        "man",
    ] {
        let r = common::run([sub, "-h"]);
        assert_eq!(r.code, 0, "{r:?}");
        let ex = r
            .stdout
            .find("Examples:\n")
            .unwrap_or_else(|| panic!("{sub} -h has no examples: {}", r.stdout));
        assert!(
            r.stdout[ex..].contains(&format!("plugpull {sub}")),
            "{sub}: {}",
            r.stdout
        );
    }
    let r = common::run(["verify", "-h"]);
    assert!(
        r.stdout.contains("<--witness <WITNESS>|--acks <ACKS>>"),
        "{}",
        r.stdout
    );
}

/// Sizes: a negative one is refused with a message that says so (also with a space
/// before it, where a shell user types it), and SI sizes are powers of 1000.
#[test]
fn negative_sizes_are_refused_and_si_sizes_are_decimal() {
    for args in [
        [
            "write",
            "/nonexistent/t",
            "--witness",
            "127.0.0.1:1",
            "--size",
            "-5M",
        ],
        [
            "write",
            "/nonexistent/t",
            "--witness",
            "127.0.0.1:1",
            "--size=-5M",
            "-q",
        ],
    ] {
        let r = common::run(args);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("a size cannot be negative"), "{r:?}");
    }
    // 16MB is 16,000,000 bytes: not a whole number of 4 KiB records, so the region is
    // 16,000,000 rounded down, which the JSON summary reports.
    let r = common::run([
        "write",
        "/nonexistent/t",
        "--witness",
        "127.0.0.1:1",
        "--size",
        "16MB",
    ]);
    assert!(!r.stderr.contains("is not a size"), "{r:?}");
    assert!(!r.stderr.contains("unknown size unit"), "{r:?}");
}
