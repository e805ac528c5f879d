//! `plugpull fetch -o FILE` streams the witness's reply into FILE (memory that
//! does not grow with the run), and that changes nothing a user sees: the same bytes in
//! FILE as the whole-run path (`fetch_with_key` into a `RunLog`, then
//! `write_log_file_keyed`) for plain acks, file acks and witness events with damage; the
//! same warnings and `--json`; nothing at FILE when the fetch fails; an existing FILE
//! replaced only by a whole fetch.

use crate::common;
use common::*;
use plugpull::model::{Ack, FileName, RunLog, RunSelector, TreeSettings};
use plugpull::record::{RecordId, RunId};
use plugpull::wire::auth;
use plugpull::wire::frame::{self, Decoded};
use plugpull::wire::msg::Msg;
use plugpull::witness::client::{AckSender, ClientOptions, fetch_with_key};
use plugpull::witness::store::checker;
use plugpull::witness::store::export::write_log_file_keyed;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An ack of a device run: 4 KiB records in sequence over the test descriptor's region.
pub(crate) fn device_ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: (i * 4096) % (1 << 30),
            sectors: 8,
            write_time_ns: 1_700_000_000_000_000_000 + i * 7_919 + (i * i) % 1_000,
        },
        flushed_ns: 1_700_000_000_000_000_000 + i * 8_009 + 3_000,
    }
}

/// An ack of a tree run: a whole file, so at offset 0.
fn file_ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            offset: 0,
            ..device_ack(i).record
        },
        ..device_ack(i)
    }
}

fn name(i: u64) -> FileName {
    FileName {
        path: format!("d{}/f{i}.dat", i % 7),
        renamed_from: (i % 3 == 0).then(|| format!("d{}/.f{i}.tmp", i % 7)),
    }
}

/// Sends a run of `n` acks to the witness at `addr` and waits until its log holds the
/// writer's goodbye; a tree run names the files of some stretches of acks (FileAcks
/// frames across the 4096-ack frames of the output file) and sends the rest plain.
fn send_run(w: &WitnessProc, key: Option<auth::Key>, run: RunId, n: u64, tree: bool) {
    let mut d = test_descriptor(run);
    if tree {
        d.settings.record_bytes_min = 512;
        d.settings.record_bytes_max = 1 << 20;
        d.tree = Some(TreeSettings {
            plan_version: plugpull::tree::PLAN_VERSION,
            seed: 5,
            files: n as u32,
            total_bytes: n * 4096,
            root: "plugpull-fetch-test".into(),
            flush: "fsync".into(),
        });
    }
    let opts = ClientOptions {
        key,
        ..Default::default()
    };
    let s = AckSender::connect(&w.addr, &d, opts).unwrap();
    for i in 0..n {
        if !tree {
            s.push(device_ack(i));
        } else if (1_000..5_000).contains(&(i % 6_000)) || i % 97 == 0 {
            s.push_file(file_ack(i), name(i));
        } else {
            s.push(file_ack(i));
        }
    }
    s.finish(Duration::from_secs(60)).unwrap();
    // The bye event is logged after the writer leaves.
    let log = w.dir.join(format!("{}.acklog", run.hex()));
    let t0 = Instant::now();
    while !String::from_utf8_lossy(&fs::read(&log).unwrap()).contains("\"bye\"") {
        assert!(t0.elapsed() < Duration::from_secs(60), "no bye event");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The old path's file, warnings and JSON for a run, from the library.
fn whole_run_path(addr: &str, key: Option<&auth::Key>, run: RunId, out: &Path) -> RunLog {
    let log = fetch_with_key(addr, &RunSelector::Run(run), key).unwrap();
    write_log_file_keyed(out, &log, key).unwrap();
    log
}

fn fetch_cli(addr: &str, key_file: Option<&Path>, run: &str, out: &Path, json: bool) -> Run {
    let mut args = vec![
        "fetch".to_string(),
        "--witness".into(),
        addr.into(),
        "--run".into(),
        run.into(),
        "-o".into(),
        out.to_str().unwrap().into(),
    ];
    if let Some(k) = key_file {
        args.extend(["--key-file".into(), k.to_str().unwrap().into()]);
    }
    if json {
        args.push("--json".into());
    }
    run_cli(args)
}

fn run_cli(args: Vec<String>) -> Run {
    common::run(args)
}

/// Checks `fetch -o` against the whole-run path for one run: the same bytes, the same
/// warnings and the same JSON (and the same sentence without --json). `addr` must give
/// the same reply three times (a damage event carries the time of the fetch: see
/// [`replaying_witness`]).
fn same_as_whole_run_path(
    addr: &str,
    key: Option<&auth::Key>,
    key_file: Option<&Path>,
    run: RunId,
    dir: &Path,
) -> RunLog {
    let old = dir.join(format!("{}-old.acklog", run.hex()));
    let new = dir.join(format!("{}-new.acklog", run.hex()));
    let log = whole_run_path(addr, key, run, &old);
    let damage = checker::damage_details(&log);
    let warnings: Vec<String> = damage.iter().map(|d| format!("warning: {d}")).collect();
    for json in [true, false] {
        let _ = fs::remove_file(&new);
        let r = fetch_cli(addr, key_file, &run.hex(), &new, json);
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            fs::read(&old).unwrap() == fs::read(&new).unwrap(),
            "fetch -o wrote other bytes than the whole-run path ({} and {} bytes)",
            fs::metadata(&old).unwrap().len(),
            fs::metadata(&new).unwrap().len()
        );
        let said: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(said[..warnings.len()], warnings[..], "{r:?}");
        if json {
            assert_eq!(said.len(), warnings.len(), "{r:?}");
            assert_eq!(
                r.json(),
                serde_json::json!({
                    "format": "plugpull-fetch/1",
                    "run_id": run.hex(),
                    "acks": log.acks.len(),
                    "witness_events": log.events.len(),
                    "output": new.display().to_string(),
                    "damage": damage,
                }),
            );
        } else {
            assert_eq!(
                said[warnings.len()..],
                [format!(
                    "fetched run {} ({} acks, {} witness events) into {}",
                    run,
                    plugpull::units::thousands(log.acks.len() as u64),
                    plugpull::units::thousands(log.events.len() as u64),
                    new.display()
                )],
                "{r:?}"
            );
            assert_eq!(r.stdout, "");
        }
    }
    no_temporary_beside(&new);
    log
}

/// Nothing but FILE itself (if anything) in its directory that names it: no temporary
/// left behind.
fn no_temporary_beside(file: &Path) {
    let stem = file.file_name().unwrap().to_str().unwrap().to_string();
    let left: Vec<PathBuf> = fs::read_dir(file.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n != stem && n.contains(stem.trim_end_matches(".acklog"))
        })
        .collect();
    assert!(left.is_empty(), "left beside {}: {left:?}", file.display());
}

#[test]
fn fetch_o_writes_the_bytes_of_the_whole_run_path() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let (plain, tree, damaged) = (RunId([0x31; 16]), RunId([0x32; 16]), RunId([0x33; 16]));
    send_run(&w, None, plain, 10_000, false);
    send_run(&w, None, tree, 13_000, true);
    send_run(&w, None, damaged, 20_000, false);
    // A flipped bit in the middle of a log: the witness skips the frame and names it in
    // a damage event.
    let log = w.dir.join(format!("{}.acklog", damaged.hex()));
    let len = fs::metadata(&log).unwrap().len();
    edit(&log, len / 2, 1, |b| b[0] ^= 0x10);

    let same = |run| same_as_whole_run_path(&replaying_witness(&w, run), None, None, run, d.path());
    let l = same(plain);
    assert_eq!((l.acks.len(), l.files.len()), (10_000, 0));
    let l = same(tree);
    assert_eq!(l.acks.len(), 13_000);
    assert!(l.files.len() > 8_000, "{} named files", l.files.len());
    let l = same(damaged);
    assert!(
        l.acks.len() < 20_000,
        "the damaged frame's acks are skipped"
    );
    assert!(!checker::damage_details(&l).is_empty(), "damage is named");
    assert!(
        l.events.len() >= 3,
        "connect, bye and damage: {:?}",
        l.events
    );
}

/// With the witness's key the end mark is signed: the same bytes again.
#[test]
fn fetch_o_with_a_key_writes_the_bytes_of_the_whole_run_path() {
    let secret = b"fetch-streamed-test-secret-0123456789";
    let w = Listen::temporary().key(secret).start();
    let key = auth::load_key(Some(&w.key_file())).unwrap().unwrap();
    let run = RunId([0x34; 16]);
    send_run(&w, Some(key.clone()), run, 9_000, true);
    let d = tempfile::tempdir().unwrap();
    // Sealed replies cannot be replayed; an undamaged run's reply is the same each time.
    same_as_whole_run_path(&w.addr, Some(&key), Some(&w.key_file()), run, d.path());
}

/// A refused run id, or a run the witness does not hold: exit non-zero with the same
/// refusal, nothing at FILE, and an existing FILE left as it was.
#[test]
fn a_refused_fetch_leaves_nothing_at_file() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let out = d.path().join("out.acklog");
    let r = fetch_cli(&w.addr, None, "nothex", &out, false);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains(
            "--run 'nothex' is not a run id: expected 32 hex digits as printed by `write`"
        ),
        "{r:?}"
    );
    assert!(!out.exists());
    let unknown = RunId([0x77; 16]).hex();
    let r = fetch_cli(&w.addr, None, &unknown, &out, false);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!("the witness at {}: ", w.addr)),
        "{r:?}"
    );
    assert!(!out.exists());
    no_temporary_beside(&out);
    fs::write(&out, b"an older fetch").unwrap();
    let r = fetch_cli(&w.addr, None, &unknown, &out, true);
    assert_ne!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "", "no JSON for a failed fetch");
    assert_eq!(fs::read(&out).unwrap(), b"an older fetch");
    no_temporary_beside(&out);
}

/// An existing FILE is replaced by a whole fetch (as before: written beside it, then
/// renamed over it).
#[test]
fn a_whole_fetch_replaces_an_existing_file() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let run = RunId([0x35; 16]);
    send_run(&w, None, run, 5_000, false);
    let out = d.path().join("out.acklog");
    fs::write(&out, b"an older fetch").unwrap();
    let r = fetch_cli(&w.addr, None, &run.hex(), &out, false);
    assert_eq!(r.code, 0, "{r:?}");
    let old = d.path().join("old.acklog");
    whole_run_path(&w.addr, None, run, &old);
    assert!(fs::read(&out).unwrap() == fs::read(&old).unwrap());
    no_temporary_beside(&out);
}

/// A witness that answers the first three fetches with the reply the witness `w` gave
/// to one fetch of `run`, byte for byte: the whole-run path and `fetch -o` then see the
/// same damage events (which carry the time of the fetch). Returns its address.
fn replaying_witness(w: &WitnessProc, run: RunId) -> String {
    let mut s = TcpStream::connect(&w.addr).unwrap();
    s.write_all(&Msg::Fetch(RunSelector::Run(run)).encode())
        .unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for _ in 0..3 {
            let (mut s, _) = l.accept().unwrap();
            read_one_frame(&mut s);
            s.write_all(&reply).unwrap();
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    addr
}

/// A witness that answers any Fetch with a run of `acks` acks in frames of 4096, then
/// (`cut`) closes the connection in the middle of the run, like a witness killed
/// mid-fetch, or ends it properly. Returns its address.
fn fake_witness(acks: u64, cut: bool) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_one_frame(&mut s);
        let d = test_descriptor(RunId([0x36; 16]));
        s.write_all(&Msg::FetchRun(d).encode()).unwrap();
        let mut first = 0;
        while first < acks {
            let n = 4096.min(acks - first);
            let a: Vec<Ack> = (first..first + n).map(device_ack).collect();
            if s.write_all(&Msg::Acks { first, acks: a }.encode()).is_err() {
                return;
            }
            first += n;
            if cut && first >= acks / 2 {
                // Half a frame, then the connection is gone.
                let f = Msg::Acks {
                    first,
                    acks: vec![device_ack(first)],
                }
                .encode();
                let _ = s.write_all(&f[..f.len() / 2]);
                let _ = s.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
        s.write_all(&Msg::FetchEnd { acks }.encode()).unwrap();
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = s.read_to_end(&mut Vec::new());
    });
    addr
}

/// A witness that answers one Fetch with `run`'s descriptor and 3 frames of acks, then
/// sends nothing more and keeps the connection open for two minutes (a witness that hung
/// mid-fetch). Returns its address.
pub(crate) fn stalling_witness(run: RunId) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        read_one_frame(&mut s);
        s.write_all(&Msg::FetchRun(test_descriptor(run)).encode())
            .unwrap();
        for k in 0..3u64 {
            let first = 1 + k * 4096;
            let acks: Vec<Ack> = (first..first + 4096).map(device_ack).collect();
            let _ = s.write_all(&Msg::Acks { first, acks }.encode());
        }
        std::thread::sleep(Duration::from_secs(120));
        drop(s);
    });
    addr
}

pub(crate) fn read_one_frame(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Decoded::Frame(_) = frame::decode(&buf) {
            return;
        }
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "the fetcher sent no whole frame");
        buf.extend_from_slice(&b[..n]);
    }
}

#[test]
fn a_witness_gone_mid_fetch_leaves_nothing_at_file() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.acklog");
    for existing in [false, true] {
        if existing {
            fs::write(&out, b"an older fetch").unwrap();
        }
        let addr = fake_witness(40_000, true);
        let r = run_cli(vec![
            "fetch".into(),
            "--witness".into(),
            addr.clone(),
            "--run".into(),
            RunId([0x36; 16]).hex(),
            "-o".into(),
            out.to_str().unwrap().into(),
        ]);
        assert_ne!(r.code, 0, "{r:?}");
        assert!(
            r.stderr
                .contains("the witness closed the connection in the middle of a frame"),
            "{r:?}"
        );
        if existing {
            assert_eq!(fs::read(&out).unwrap(), b"an older fetch");
        } else {
            assert!(!out.exists());
        }
        no_temporary_beside(&out);
    }
}

/// The names in `dir`, sorted, with what each is (file contents or link target).
fn dir_listing(dir: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let n = p.file_name().unwrap().to_str().unwrap().to_string();
            let what = match fs::read_link(&p) {
                Ok(t) => format!("-> {}", t.display()),
                Err(_) => String::from_utf8_lossy(&fs::read(&p).unwrap()).into_owned(),
            };
            (n, what)
        })
        .collect();
    v.sort();
    v
}

/// A file someone left at the name the temporary file once had (NAME.tmp beside NAME)
/// is neither truncated nor removed by a whole fetch.
#[test]
fn fetch_o_leaves_a_file_at_the_old_temporary_name_untouched() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.acklog");
    let planted = d.path().join("out.acklog.tmp");
    fs::write(&planted, b"someone else's file").unwrap();
    let r = run_cli(vec![
        "fetch".into(),
        "--witness".into(),
        fake_witness(5_000, false),
        "--run".into(),
        RunId([0x36; 16]).hex(),
        "-o".into(),
        out.to_str().unwrap().into(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(fs::read(&planted).unwrap(), b"someone else's file");
    assert!(fs::symlink_metadata(&out).unwrap().is_file());
    let log = plugpull::witness::store::reader::read_log_file(&out).unwrap();
    assert_eq!(log.acks.len(), 5_000);
}

/// A symlink planted at the old temporary name is not followed: its target keeps its
/// bytes, and NAME is a regular file holding the log.
#[test]
fn fetch_o_does_not_follow_a_symlink_at_the_old_temporary_name() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.acklog");
    let victim = d.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, d.path().join("out.acklog.tmp")).unwrap();
    let r = run_cli(vec![
        "fetch".into(),
        "--witness".into(),
        fake_witness(5_000, false),
        "--run".into(),
        RunId([0x36; 16]).hex(),
        "-o".into(),
        out.to_str().unwrap().into(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert!(
        fs::symlink_metadata(&out).unwrap().is_file(),
        "NAME is no link"
    );
}

/// A fetch that fails half way leaves the directory exactly as it was: no temporary,
/// and a file at the old temporary name neither emptied nor removed.
#[test]
fn a_failed_fetch_leaves_no_temporary_and_nothing_else_changed() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out.acklog");
    fs::write(d.path().join("out.acklog.tmp"), b"someone else's file").unwrap();
    fs::write(&out, b"an older fetch").unwrap();
    let before = dir_listing(d.path());
    let r = run_cli(vec![
        "fetch".into(),
        "--witness".into(),
        fake_witness(40_000, true),
        "--run".into(),
        RunId([0x36; 16]).hex(),
        "-o".into(),
        out.to_str().unwrap().into(),
    ]);
    assert_ne!(r.code, 0, "{r:?}");
    assert_eq!(dir_listing(d.path()), before);
}

/// Peak RSS in KiB of `plugpull ARGS` (from wait4's rusage), and its exit code,
/// measured from a small process of its own: this test binary run again for
/// [`peak_rss_measured_from_a_small_process`] alone. Why: Linux starts a child's
/// `ru_maxrss` at the peak RSS of the image it replaced at exec, which for a child of
/// this process is this process, holding the memory of every test running beside.
pub(crate) fn peak_rss_kib(args: &[&str], stderr: &Path) -> (i64, i32) {
    peak_rss_kib_to(args, Path::new("/dev/null"), stderr)
}

/// [`peak_rss_kib`], the command's stdout kept in `stdout`.
pub(crate) fn peak_rss_kib_to(args: &[&str], stdout: &Path, stderr: &Path) -> (i64, i32) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fetch_streamed::peak_rss_measured_from_a_small_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PEAK_RSS_ARGS, args.join("\n"))
        .env(PEAK_RSS_STDERR, stderr)
        .env(PEAK_RSS_STDOUT, stdout)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // (libtest may have written "test NAME ... " on the same line first)
    let line = text
        .lines()
        .find_map(|l| l.split_once("peak-rss-kib ").map(|(_, v)| v));
    let Some((rss, code)) = line.and_then(|l| l.split_once(' ')) else {
        panic!(
            "no peak-rss-kib line from the measuring process:\n{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    (rss.parse().unwrap(), code.parse().unwrap())
}

/// What [`peak_rss_kib`] hands its measuring process: the arguments, one per line, and
/// where the command's stderr and stdout go.
const PEAK_RSS_ARGS: &str = "PLUGPULL_TEST_PEAK_RSS_ARGS";
const PEAK_RSS_STDERR: &str = "PLUGPULL_TEST_PEAK_RSS_STDERR";
const PEAK_RSS_STDOUT: &str = "PLUGPULL_TEST_PEAK_RSS_STDOUT";

/// The measuring half of [`peak_rss_kib`], in a process that runs nothing else: runs
/// `plugpull` with the arguments it was handed and prints `peak-rss-kib KIB CODE`. Run
/// without them (by hand, or with `--ignored`) it checks the measurement instead:
/// `plugpull --version`, measured through [`peak_rss_kib`], must peak far below the
/// 40 MiB bound of the test that uses it, whatever the calling process holds.
#[test]
#[ignore = "the measuring process of peak_rss_kib, which runs it alone"]
fn peak_rss_measured_from_a_small_process() {
    let Ok(args) = std::env::var(PEAK_RSS_ARGS) else {
        let (rss, code) = peak_rss_kib(&["--version"], Path::new("/dev/null"));
        assert_eq!(code, 0);
        assert!(rss < 20 << 10, "plugpull --version peaked at {rss} KiB");
        return;
    };
    let stderr = std::env::var_os(PEAK_RSS_STDERR).unwrap();
    let stdout = std::env::var_os(PEAK_RSS_STDOUT).unwrap_or_else(|| "/dev/null".into());
    // wait4 reaps the child; std's `wait` would not give its rusage.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(bin())
        .args(args.split('\n'))
        .stdout(fs::File::create(stdout).unwrap())
        .stderr(fs::File::create(stderr).unwrap())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: a zeroed rusage is valid; wait4 reaps our own child by its pid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(pid, child.id() as i32);
    println!(
        "peak-rss-kib {} {}",
        ru.ru_maxrss,
        libc::WEXITSTATUS(status)
    );
}

/// The memory promise for `fetch -o`: its memory does not grow with the run. A run
/// of 2 M acks is 80 MB as `Ack`s (what the whole-run path held, and more with the
/// vector's doubling); streamed, `fetch -o` stays near its fixed buffers.
#[test]
fn fetch_o_memory_does_not_grow_with_the_run() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("big.acklog");
    let err = d.path().join("stderr");
    let acks = 2_000_000;
    let addr = fake_witness(acks, false);
    let run = RunId([0x36; 16]).hex();
    let (rss, code) = peak_rss_kib(
        &[
            "fetch",
            "--witness",
            &addr,
            "--run",
            &run,
            "-o",
            out.to_str().unwrap(),
            "--json",
        ],
        &err,
    );
    let said = fs::read_to_string(&err).unwrap();
    assert_eq!(code, 0, "{said}");
    eprintln!("fetch -o of {acks} acks: peak RSS {rss} KiB");
    assert!(
        rss < 40 << 10,
        "fetch -o of {acks} acks peaked at {rss} KiB: it holds the run"
    );
    let log = plugpull::witness::store::reader::read_log_file(&out).unwrap();
    assert_eq!(log.acks.len() as u64, acks);
    assert_eq!(log.acks[1_234_567], device_ack(1_234_567));
}

/// `fetch -o NAME` replaces only a regular file: a symlink at NAME (to a user's file) or
/// a FIFO there is refused, left as it was, and no temporary file is left behind.
#[test]
fn fetch_o_onto_a_symlink_or_a_fifo_is_refused_and_left_alone() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let link = d.path().join("link.acklog");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = d.path().join("fifo.acklog");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for (name, out) in [("symlink", &link), ("fifo", &fifo)] {
        let r = run_cli(vec![
            "fetch".into(),
            "--witness".into(),
            fake_witness(1_000, false),
            "--run".into(),
            RunId([0x37; 16]).hex(),
            "-o".into(),
            out.to_str().unwrap().into(),
        ]);
        assert_eq!(r.code, 2, "{name}: {r:?}");
        use std::os::unix::fs::FileTypeExt;
        let t = fs::symlink_metadata(out).unwrap().file_type();
        assert!(t.is_symlink() || t.is_fifo(), "{name}: replaced by {t:?}");
        no_temporary_beside(out);
    }
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
}

/// A witness that answers its first `busy` fetches that it is serving its most fetches,
/// as the witness does, then serves `run` with 100 acks. Returns its address.
fn busy_witness(run: RunId, busy: usize) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for k in 0.. {
            let Ok((mut s, _)) = l.accept() else { return };
            read_one_frame(&mut s);
            if k < busy {
                let message = format!(
                    "{} (16) already; try again in a moment",
                    plugpull::wire::msg::FETCHES_BUSY
                );
                let _ = s.write_all(&Msg::Error { message }.encode());
                continue;
            }
            s.write_all(&Msg::FetchRun(test_descriptor(run)).encode())
                .unwrap();
            let acks: Vec<Ack> = (0..100).map(device_ack).collect();
            s.write_all(&Msg::Acks { first: 0, acks }.encode()).unwrap();
            s.write_all(&Msg::FetchEnd { acks: 100 }.encode()).unwrap();
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    addr
}

/// A cycle's fetch (campaign, fleet, agent, demo) waits while the witness is serving its
/// most fetches, as when a fleet's drives verify together, instead of recording the
/// drive's cycle as an error; past its wait, the witness's answer is the error.
#[test]
fn a_cycle_fetch_waits_while_the_witness_is_busy() {
    use plugpull::cycle::fetched::fetch_run_waiting;
    use plugpull::witness::client::error::ClientError;
    let run = RunId([0x42; 16]);
    let f = fetch_run_waiting(&busy_witness(run, 3), run, Duration::from_secs(30)).unwrap();
    assert_eq!(f.acks, 100);
    match fetch_run_waiting(
        &busy_witness(run, usize::MAX),
        run,
        Duration::from_millis(500),
    ) {
        Err(e @ ClientError::WitnessBusy { .. }) => {
            assert!(e.to_string().contains("try again in a moment"), "{e}")
        }
        Err(e) => panic!("{e:#}"),
        Ok(_) => panic!("a witness that is always busy served the run"),
    }
}
