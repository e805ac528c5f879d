//! The self-contained binary for the host under test (`scripts/build-static.sh`): it is
//! static (`file`, `ldd`), stripped with its debug info kept beside it, runs
//! `plugpull --version`, and, as root, runs in an empty chroot (nothing but the binary
//! and three files in /etc) where it still reaches a witness by address, by
//! "localhost", by an /etc/hosts name and by a DNS name (a tiny DNS server on
//! 127.0.0.1:53 answers it).
//!
//! Why the chroot: a live USB system or a minimal install has no Rust and maybe not
//! the libraries we link; a static glibc binary may still try to load NSS modules for
//! name lookups, and only a root with nothing in it shows it does not need them.
//!
//! Slow the first time: the static release build takes minutes on 2 cores (cargo reuses
//! it afterwards, and tests/integration/deb_package.rs shares it).

use crate::common;

use common::WitnessProc;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn build(out: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-static.sh");
    let run = Command::new(script)
        .arg(out)
        .output()
        .expect("scripts/build-static.sh");
    assert!(
        run.status.success(),
        "build-static.sh failed:\n{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    out.join("plugpull")
}

fn output(cmd: &mut Command) -> (i32, String) {
    let out = cmd.output().expect("run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_static_binary_is_static_stripped_and_runs_with_nothing_installed() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("static");
    let bin = build(&out);

    let (_, kind) = output(Command::new("file").arg("-b").arg(&bin));
    assert!(
        kind.contains("statically linked") || kind.contains("static-pie linked"),
        "file says: {kind}"
    );
    let (_, ldd) = output(Command::new("ldd").arg(&bin));
    assert!(
        ldd.contains("not a dynamic executable") || ldd.contains("statically linked"),
        "ldd says: {ldd}"
    );
    let (code, version) = output(Command::new(&bin).arg("--version"));
    assert!(
        code == 0 && version.starts_with("plugpull "),
        "--version: {version}"
    );

    // Stripped: no DWARF in the binary, all of it in plugpull.debug, linked by name.
    let (_, sections) = output(Command::new("readelf").arg("-S").arg(&bin));
    assert!(!sections.contains(".debug_info"), "not stripped");
    assert!(
        sections.contains(".gnu_debuglink"),
        "no link to its debug file"
    );
    let (_, debug_sections) = output(
        Command::new("readelf")
            .arg("-S")
            .arg(out.join("plugpull.debug")),
    );
    assert!(
        debug_sections.contains(".debug_info"),
        "plugpull.debug has no debug info"
    );
    let size = std::fs::metadata(&bin).unwrap().len();
    assert!(
        size < 16 << 20,
        "{size} bytes: not what a stripped build weighs"
    );
    // docs/install.md says what it weighs ("a static binary (8.4 MB)"): within 15%.
    let install =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/install.md"))
            .unwrap();
    let said_mb: f64 = install
        .split_once("a static binary (")
        .and_then(|(_, rest)| rest.split_once(" MB)"))
        .and_then(|(n, _)| n.parse().ok())
        .expect("docs/install.md names the static binary's size as \"a static binary (N MB)\"");
    let mb = size as f64 / 1e6;
    assert!(
        (mb - said_mb).abs() <= said_mb * 0.15,
        "the static binary weighs {mb:.1} MB; docs/install.md says {said_mb} MB: update it"
    );

    if !common::skip_unless(common::is_root(), "needs root for chroot") {
        return;
    }
    resolves_the_witness_in_an_empty_root(&bin);
}

/// Answers every A query with 127.0.0.1 and every other query with no answer, until
/// `stop` (or 60 s). The smallest DNS server glibc's resolver accepts.
fn dns_server(sock: UdpSocket, stop: Arc<AtomicBool>) {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let q = &buf[..n];
        if n < 17 {
            continue;
        }
        // The question: labels up to the zero byte, then type and class.
        let mut i = 12;
        while i < n && q[i] != 0 {
            i += q[i] as usize + 1;
        }
        if i + 5 > n {
            continue;
        }
        let question = &q[12..i + 5];
        let is_a = q[i + 1] == 0 && q[i + 2] == 1;
        let mut r = Vec::with_capacity(64);
        r.extend_from_slice(&q[..2]); // id
        r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, is_a as u8, 0, 0, 0, 0]);
        r.extend_from_slice(question);
        if is_a {
            // Name by pointer to offset 12, type A, class IN, TTL 60, 4 bytes.
            r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
        }
        let _ = sock.send_to(&r, peer);
    }
}

fn resolves_the_witness_in_an_empty_root(bin: &Path) {
    let root = tempfile::tempdir().unwrap();
    let etc = root.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    std::fs::copy(bin, root.path().join("plugpull")).unwrap();
    std::fs::write(
        etc.join("hosts"),
        "127.0.0.1 localhost\n127.0.0.1 witness-box\n",
    )
    .unwrap();
    std::fs::write(etc.join("nsswitch.conf"), "hosts: files dns\n").unwrap();
    std::fs::write(etc.join("resolv.conf"), "nameserver 127.0.0.1\n").unwrap();
    let entries: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert_eq!(entries.len(), 2, "the root holds the binary and etc/ only");

    // A run on the witness to fetch: a few records from the test build's writer.
    let dir = tempfile::tempdir().unwrap();
    let witness = WitnessProc::start(&dir.path().join("witness"));
    let target = dir.path().join("target.img");
    let w = common::write(&witness, &target, &["--size", "1M", "--count", "8"]);
    assert_eq!(w.code, 0, "{w:?}");
    let run = w.json()["run_id"].as_str().unwrap_or_default().to_string();
    let port = witness.addr.rsplit(':').next().unwrap().to_string();

    let dns = UdpSocket::bind("127.0.0.1:53").ok();
    let stop = Arc::new(AtomicBool::new(false));
    let mut names = vec!["127.0.0.1", "localhost", "witness-box"];
    let server = dns.map(|sock| {
        names.push("witness.plugpull.test");
        let stop = stop.clone();
        std::thread::spawn(move || dns_server(sock, stop))
    });
    common::skip_unless(
        server.is_some(),
        "127.0.0.1:53 is taken: the DNS lookup in the chroot is not checked",
    );

    let mut failures = vec![];
    for name in &names {
        let (code, text) = output(Command::new("chroot").arg(root.path()).args([
            "/plugpull",
            "fetch",
            "--witness",
            &format!("{name}:{port}"),
            "--run",
            &run,
            "-o",
            "/acks",
        ]));
        if code != 0 || !text.contains("fetched run") {
            failures.push(format!("{name}: exit {code}: {text}"));
        }
        let _ = std::fs::remove_file(root.path().join("acks"));
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = server {
        s.join().unwrap();
    }
    assert!(
        failures.is_empty(),
        "the static binary in an empty root could not reach the witness:\n{}",
        failures.join("\n")
    );
}
