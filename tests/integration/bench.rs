//! `plugpull bench`: the sweep's shape on a real file, the JSON format, the reading
//! against in-process devices that flush slowly or fast, one flush per write for every
//! method, failed flushes marked, and the built binary end to end.

use plugpull::bench::{
    self, BenchOptions, BenchReport as Report, Config, Progress, Table, TargetInfo,
    TargetOpener as Opener, measure::Status, reading::ReadingClass as Class,
};
use plugpull::device::identity::DeviceIdentity;
use plugpull::device::{Device, DeviceError, FileDevice, FlushMethod, open, prepare_file};
use plugpull::units::parse_size_range;
use std::io;
use std::process::Command as Proc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A small, fast configuration for in-process runs.
fn small_cfg(flush: FlushMethod, sizes: &str, time: &str) -> Config {
    let a = BenchOptions {
        flush,
        sweep_sizes: Some(parse_size_range(sizes).unwrap()),
        time_per_size: Some(plugpull::units::parse_duration(time).unwrap()),
        seed: Some(7),
        ..BenchOptions::default()
    };
    let mut cfg = Config::new(&a, 64 << 20, 512, 7);
    cfg.durability_total_bytes = 4 << 20;
    cfg.durability_max_time = Duration::from_millis(50);
    cfg
}

fn identity(rotational: bool, write_cache: &str) -> DeviceIdentity {
    DeviceIdentity {
        target: "test-device".into(),
        kind: "block".into(),
        disk: Some("testdisk".into()),
        model: Some("Test Device".into()),
        rotational: Some(rotational),
        write_cache: Some(write_cache.into()),
        fua: Some(false),
        ..Default::default()
    }
}

fn info() -> TargetInfo {
    TargetInfo {
        target: "/dev/testdisk".into(),
        bench_path: "/dev/testdisk".into(),
        is_dir: false,
    }
}

/// Counters shared by every device a [`TestOpener`] hands out.
#[derive(Default)]
struct Counts {
    writes: AtomicU64,
    flushes: AtomicU64,
    /// Writes that were not followed by a flush before the next write (flushing methods).
    unflushed_then_written: AtomicU64,
    /// Every write ('W') and every flush that reached the device ('F'), in order.
    trace: Mutex<String>,
}

impl Counts {
    fn log(&self, op: char) {
        self.trace.lock().unwrap().push(op);
    }
}

/// An in-process device: no storage, a configurable sleep per flush, and counters. Opened
/// with O_DSYNC semantics it does the flush inside each write, as the kernel does.
struct TestDevice {
    method: FlushMethod,
    flush_sleep: Duration,
    fail_flush: bool,
    counts: Arc<Counts>,
    pending: AtomicBool,
}

impl Device for TestDevice {
    fn size_bytes(&self) -> u64 {
        1 << 30
    }
    fn logical_block_bytes(&self) -> u32 {
        512
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<()> {
        self.counts.writes.fetch_add(1, SeqCst);
        self.counts.log('W');
        match self.method {
            FlushMethod::Dsync => self.do_flush(),
            FlushMethod::None => Ok(()),
            _ => {
                if self.pending.swap(true, SeqCst) {
                    self.counts.unflushed_then_written.fetch_add(1, SeqCst);
                }
                Ok(())
            }
        }
    }
    fn flush(&self) -> io::Result<()> {
        match self.method {
            // Like FileDevice: with O_DSYNC the flush was in the write; "none" never flushes.
            FlushMethod::Dsync | FlushMethod::None => Ok(()),
            _ => {
                self.pending.store(false, SeqCst);
                self.do_flush()
            }
        }
    }
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> io::Result<()> {
        Ok(())
    }
}

impl TestDevice {
    fn do_flush(&self) -> io::Result<()> {
        if self.fail_flush {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.counts.flushes.fetch_add(1, SeqCst);
        self.counts.log('F');
        if !self.flush_sleep.is_zero() {
            std::thread::sleep(self.flush_sleep);
        }
        Ok(())
    }
}

struct TestOpener {
    flush_sleep: Duration,
    fail_flush: bool,
    /// Counters per opened device, with the method it was opened for.
    opened: Mutex<Vec<(FlushMethod, Arc<Counts>)>>,
}

impl TestOpener {
    fn new(flush_sleep: Duration) -> TestOpener {
        TestOpener {
            flush_sleep,
            fail_flush: false,
            opened: Mutex::new(vec![]),
        }
    }
}

impl Opener for TestOpener {
    fn open(&self, method: FlushMethod) -> Result<Box<dyn Device>, DeviceError> {
        let counts = Arc::new(Counts::default());
        self.opened.lock().unwrap().push((method, counts.clone()));
        Ok(Box::new(TestDevice {
            method,
            flush_sleep: self.flush_sleep,
            fail_flush: self.fail_flush,
            counts,
            pending: AtomicBool::new(false),
        }))
    }
}

fn run(opener: &TestOpener, id: &DeviceIdentity, cfg: &Config) -> Report {
    bench::run_with(opener, id, cfg, &info(), &Progress::hidden()).unwrap()
}

#[test]
fn sweep_on_a_file_has_one_row_per_size_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let cfg = {
        let mut c = small_cfg(FlushMethod::Fdatasync, "512-8M", "10ms");
        c.region_bytes = 16 << 20;
        c
    };
    prepare_file(&path, cfg.region_offset_bytes + cfg.region_bytes).unwrap();
    // O_DIRECT where the file system allows it (tmpfs before Linux 6.6 does not).
    let open = |direct| match open::open_once(
        &path,
        open::Flags {
            direct,
            dsync: false,
        },
    )? {
        open::Opened::Existing(t) => FileDevice::from_target(t, FlushMethod::Fdatasync),
        open::Opened::Missing(p) => panic!("{} is missing", p.display()),
    };
    let dev = open(true).or_else(|_| open(false)).unwrap();
    let rows = bench::sweep::run(&dev, &cfg, &Progress::hidden()).unwrap();
    let sizes: Vec<u64> = rows.iter().map(|r| r.size_bytes).collect();
    let want: Vec<u64> = (0..15).map(|i| 512u64 << i).collect();
    assert_eq!(sizes, want, "512 B doubling to 8 MiB, in order");
    assert_eq!(*sizes.last().unwrap(), 8 << 20);
    for r in &rows {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert!(r.ios >= cfg.min_ios, "{r:?}");
        let l = &r.latency;
        assert!(l.latency_us_min <= l.latency_us_p50 && l.latency_us_p50 <= l.latency_us_p99);
        assert!(l.latency_us_p99 <= l.latency_us_p999 && l.latency_us_p999 <= l.latency_us_max);
        assert!(r.throughput_mb_per_s > 0.0);
    }
}

#[test]
fn slow_flush_shows_the_ms_floor_and_fast_flush_does_not() {
    let cfg = small_cfg(FlushMethod::Fdatasync, "4k-16k", "40ms");
    let id = identity(false, "write back");

    let slow = run(&TestOpener::new(Duration::from_millis(5)), &id, &cfg);
    assert_eq!(slow.sweep.len(), 3);
    for r in &slow.sweep {
        assert!(r.latency.latency_us_p50 >= 5000.0, "{r:?}");
        assert!(r.ios_per_s <= 200.0, "{r:?}");
    }
    let fdatasync = slow
        .methods
        .iter()
        .find(|m| m.method == FlushMethod::Fdatasync)
        .unwrap();
    assert!(fdatasync.latency_us_p50 >= 5000.0);
    let none = slow
        .methods
        .iter()
        .find(|m| m.method == FlushMethod::None)
        .unwrap();
    assert!(none.latency_us_p50 < 1000.0, "the reference does not flush");
    assert_eq!(slow.reading.class, Class::FlushFloor);
    assert!(slow.reading.flush_latency_us_p50.unwrap() >= 5000.0);
    // The floor the reading names is the measured one, as the tables print it (µs) and
    // in the unit people read it in (ms), with the row it comes from.
    let p50 = slow.reading.flush_latency_us_p50.unwrap();
    let takes = format!(
        "A write+flush takes {} µs ({}; the sweep's p50 at ",
        plugpull::bench::reading::figure(p50),
        plugpull::units::fmt_duration_us(p50)
    );
    assert!(
        slow.reading.summary.starts_with(&takes),
        "{takes:?}: {}",
        slow.reading.summary
    );
    assert!(takes.contains(" ms; "), "a 5 ms floor reads in ms: {takes}");
    // And that figure is the p50 cell of the sweep table's row the summary names.
    let size = slow.reading.summary[takes.len()..]
        .split(',')
        .next()
        .unwrap();
    let text = plugpull::bench::output::text(&slow);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{size} ")))
        .unwrap_or_else(|| panic!("a {size} sweep row: {text}"))
        .split_whitespace()
        .collect();
    // size (2 words), ios, mean, p50, ...
    assert_eq!(row[4], plugpull::bench::reading::figure(p50), "{text}");

    let fast = run(&TestOpener::new(Duration::ZERO), &id, &cfg);
    for r in &fast.sweep {
        assert!(r.latency.latency_us_p50 < 100.0, "{r:?}");
    }
    assert_eq!(fast.reading.class, Class::FastFlush);
    assert!(fast.reading.summary.contains("power-loss protection"));
    let cmds = fast.reading.power_cut_test.join("\n");
    assert!(cmds.contains("plugpull write /dev/testdisk --witness HOST:7420"));
    assert!(cmds.contains("plugpull verify /dev/testdisk --witness HOST:7420"));
    assert_ne!(slow.reading.summary, fast.reading.summary);
}

#[test]
fn reading_follows_rotation_and_write_through() {
    let cfg = small_cfg(FlushMethod::Fdatasync, "4k-4k", "40ms");
    // 10 ms per flush = 100/s: a 7,200 rpm disk could do that honestly.
    let spinning = identity(true, "write back");
    let r = run(&TestOpener::new(Duration::from_millis(10)), &spinning, &cfg);
    assert_eq!(r.reading.class, Class::RotatingPlausible);
    // Thousands per second from a spinning disk: a cache is answering.
    let r = run(&TestOpener::new(Duration::ZERO), &spinning, &cfg);
    assert_eq!(r.reading.class, Class::RotatingTooFast);
    assert!(r.reading.summary.contains("rpm/60"));
    // Write-through: the kernel sends no flushes, and the reading says so.
    let wt = identity(false, "write through");
    let r = run(&TestOpener::new(Duration::ZERO), &wt, &cfg);
    assert_eq!(r.reading.class, Class::WriteThrough);
    assert!(r.reading.summary.contains("send no flush"));
}

#[test]
fn every_method_flushes_exactly_once_per_write() {
    let cfg = small_cfg(FlushMethod::Fdatasync, "4k-4k", "20ms");
    let id = identity(false, "write back");

    // The flush-method table: one device per method.
    let opener = TestOpener::new(Duration::ZERO);
    let pb = Progress::hidden();
    let rows = bench::methods::run(&opener, &cfg, &pb).unwrap();
    let opened = opener.opened.lock().unwrap();
    assert_eq!(opened.len(), 4);
    for (row, (method, counts)) in rows.iter().zip(opened.iter()) {
        assert_eq!(row.method, *method);
        let w = counts.writes.load(SeqCst);
        let f = counts.flushes.load(SeqCst);
        assert_eq!(w, row.ops, "{method:?}: every write counted in ops");
        assert!(w >= cfg.min_ios);
        if *method == FlushMethod::None {
            assert_eq!(f, 0, "the reference never flushes");
        } else {
            assert_eq!(f, w, "{method:?}: one flush per write");
            assert_eq!(counts.unflushed_then_written.load(SeqCst), 0, "{method:?}");
        }
    }
    drop(opened);

    // The sweep with each flushing method.
    for method in [
        FlushMethod::Fdatasync,
        FlushMethod::Fsync,
        FlushMethod::Dsync,
    ] {
        let mut c = cfg.clone();
        c.sweep_flush = method;
        c.sweep_min_bytes = 512;
        c.sweep_max_bytes = 4096;
        let opener = TestOpener::new(Duration::ZERO);
        let dev = opener.open(method).unwrap();
        let rows = bench::sweep::run(dev.as_ref(), &c, &pb).unwrap();
        assert_eq!(rows.len(), 4);
        let ios: u64 = rows.iter().map(|r| r.ios).sum();
        let opened = opener.opened.lock().unwrap();
        let counts = &opened[0].1;
        assert_eq!(counts.writes.load(SeqCst), ios, "{method:?}");
        assert_eq!(counts.flushes.load(SeqCst), ios, "{method:?}");
        assert_eq!(counts.unflushed_then_written.load(SeqCst), 0, "{method:?}");
    }

    // And a whole run: the durability rows flush per record only where they say so.
    let opener = TestOpener::new(Duration::ZERO);
    let report = run(&opener, &id, &cfg);
    assert!(report.all_ok());
    let d = report
        .durability
        .as_ref()
        .expect("the run has a durability table");
    let opened = opener.opened.lock().unwrap();
    // Opened in order: the sweep's device, one per method, then the durability table's.
    let (method, counts) = &opened[1 + rows.len()];
    assert_eq!(*method, d.flush_method);
    let trace = counts.trace.lock().unwrap().clone();
    assert_eq!(
        trace,
        durability_trace(d),
        "the durability table's writes and flushes"
    );
}

/// The writes and flushes the durability table's rows say they did: each mode starts
/// with a flush that empties the cache, then no-flush writes its records, flush-at-end
/// writes them and flushes once, and flush-every-record flushes after each one.
fn durability_trace(d: &bench::durability::Durability) -> String {
    use bench::durability::FlushMode;
    let mut want = String::new();
    for row in &d.rows {
        assert_eq!(row.bytes % d.record_bytes, 0, "{row:?}");
        let records = (row.bytes / d.record_bytes) as usize;
        assert!(records > 0, "{row:?}");
        want.push('F');
        match row.mode {
            FlushMode::NoFlush => want.push_str(&"W".repeat(records)),
            FlushMode::FlushAtEnd => want.push_str(&format!("{}F", "W".repeat(records))),
            FlushMode::FlushEveryRecord => want.push_str(&"WF".repeat(records)),
        }
    }
    want
}

#[test]
fn a_failing_flush_marks_rows_and_never_drops_them() {
    let cfg = small_cfg(FlushMethod::Fdatasync, "512-4k", "20ms");
    let mut opener = TestOpener::new(Duration::ZERO);
    opener.fail_flush = true;
    let r = run(&opener, &identity(false, "write back"), &cfg);
    assert_eq!(r.sweep.len(), 4, "every size keeps its row");
    for row in &r.sweep {
        assert_eq!(row.status, Status::FlushFailed);
        assert!(row.error.as_deref().unwrap().contains("flush"), "{row:?}");
    }
    for m in &r.methods {
        let want = match m.method {
            FlushMethod::None => Status::Ok,
            // With O_DSYNC the flush is part of the write, so the write fails.
            FlushMethod::Dsync => Status::WriteFailed,
            _ => Status::FlushFailed,
        };
        assert_eq!(m.status, want, "{m:?}");
    }
    assert_eq!(r.reading.class, Class::FlushFailed);
    assert!(!r.all_ok());
    let text = bench::output::text(&r);
    let notes: Vec<String> = sweep_rows(&text).into_iter().map(|r| r.1).collect();
    assert_eq!(notes, vec!["FLUSH FAILED"; 4], "{text}");
}

/// The documented JSON keys (docs/bench.md). Changing any of them is a format change.
fn check_json_keys(v: &serde_json::Value, with_iops: bool) {
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let sorted = |a: &[&str]| {
        let mut v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        v.sort();
        v
    };
    assert_eq!(v["format"], "plugpull-bench/1");
    assert_eq!(
        keys(v),
        sorted(&[
            "format",
            "tool_version",
            "started_at",
            "target",
            "bench_path",
            "device",
            "settings",
            "sweep",
            "methods",
            "durability",
            "iops",
            "reading"
        ])
    );
    for k in [
        "kind",
        "model",
        "serial",
        "write_cache",
        "fua",
        "rotational",
    ] {
        assert!(v["device"].get(k).is_some(), "device.{k}");
    }
    assert_eq!(
        keys(&v["settings"]),
        sorted(&[
            "flush_method",
            "direct",
            "quick",
            "region_offset_bytes",
            "region_bytes",
            "time_per_size_s",
            "method_time_s",
            "iops_threads",
            "seed"
        ])
    );
    let sweep = v["sweep"].as_array().unwrap();
    assert!(!sweep.is_empty());
    assert_eq!(
        keys(&sweep[0]),
        sorted(&[
            "size_bytes",
            "ios",
            "elapsed_s",
            "latency_us_min",
            "latency_us_mean",
            "latency_us_p50",
            "latency_us_p99",
            "latency_us_p999",
            "latency_us_max",
            "ios_per_s",
            "throughput_mb_per_s",
            "status",
            "error"
        ])
    );
    let methods = v["methods"].as_array().unwrap();
    let names: Vec<&str> = methods
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dsync", "fdatasync", "fsync", "none"]);
    assert_eq!(
        keys(&methods[0]),
        sorted(&[
            "method",
            "write_bytes",
            "ops",
            "elapsed_s",
            "ops_per_s",
            "latency_us_per_op",
            "latency_us_p50",
            "latency_us_p99",
            "status",
            "error"
        ])
    );
    assert_eq!(
        keys(&v["durability"]),
        sorted(&["flush_method", "record_bytes", "rows"])
    );
    let modes: Vec<&str> = v["durability"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["no_flush", "flush_at_end", "flush_every_record"]);
    assert_eq!(
        keys(&v["durability"]["rows"][0]),
        sorted(&[
            "mode",
            "bytes",
            "elapsed_s",
            "throughput_mb_per_s",
            "ratio_to_no_flush",
            "status",
            "error"
        ])
    );
    if with_iops {
        let rows = v["iops"].as_array().unwrap();
        assert_eq!(
            keys(&rows[0]),
            sorted(&[
                "op",
                "pattern",
                "block_bytes",
                "threads",
                "ios",
                "elapsed_s",
                "ios_per_s",
                "throughput_mb_per_s",
                "latency_us_min",
                "latency_us_avg",
                "latency_us_max",
                "status",
                "error"
            ])
        );
    } else {
        assert!(v["iops"].is_null());
    }
    assert_eq!(
        keys(&v["reading"]),
        sorted(&[
            "class",
            "flush_latency_us_p50",
            "flushes_per_s",
            "summary",
            "notes",
            "power_cut_test"
        ])
    );
}

#[test]
fn json_is_versioned_and_has_the_documented_keys() {
    let mut cfg = small_cfg(FlushMethod::Fdatasync, "4k-8k", "10ms");
    cfg.iops = Some(bench::config::IopsConfig {
        block_sizes: vec![4096, 65536],
        ops: vec![bench::config::Op::Read, bench::config::Op::Write],
        patterns: vec![
            bench::config::Pattern::Sequential,
            bench::config::Pattern::Random,
        ],
        threads: 2,
        time_per_cell: Duration::from_millis(10),
    });
    let r = run(
        &TestOpener::new(Duration::ZERO),
        &identity(false, "write back"),
        &cfg,
    );
    let v = serde_json::to_value(&r).unwrap();
    check_json_keys(&v, true);
    let iops = v["iops"].as_array().unwrap();
    assert_eq!(
        iops.len(),
        2 * 2 * 2,
        "read/write x sequential/random x sizes"
    );
    assert_eq!(iops[0]["threads"], 2);
    // The keys the docs name are in docs/bench.md.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/bench.md"))
        .expect("docs/bench.md");
    for k in [
        "plugpull-bench/1",
        "latency_us_p999",
        "ratio_to_no_flush",
        "latency_us_per_op",
        "flush_latency_us_p50",
        "power_cut_test",
        "flush_failed",
        "fast_flush",
        "flush_floor",
        "write_through",
    ] {
        assert!(doc.contains(k), "docs/bench.md does not mention {k}");
    }
}

fn plugpull() -> Proc {
    Proc::new(env!("CARGO_BIN_EXE_plugpull"))
}

#[test]
fn binary_quick_json_on_a_temp_dir() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let out = plugpull()
        .args(["bench", "--quick", "--json", "--in-file"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    // --json keeps stderr for warnings and errors: no progress lines.
    assert!(stderr.lines().all(|l| row_done(l).is_none()), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_json_keys(&v, false);
    // --quick is short because of the times and region it sets, which the report states;
    // the run's wall-clock time on a loaded machine would say little about either.
    let s = &v["settings"];
    assert_eq!(s["quick"], true, "{s}");
    assert_eq!(s["time_per_size_s"], 0.15, "{s}");
    assert_eq!(s["method_time_s"], 0.25, "{s}");
    assert_eq!(s["region_bytes"], 128 << 20, "{s}");
    let sweep = v["sweep"].as_array().unwrap();
    assert!(sweep.len() >= 5);
    // And each row keeps to that time on bench's own clock: it writes for at least its
    // time, and past its minimum of 3 writes it starts none after the time is up, so it
    // ends within one write (its slowest) of it; 0.5 s covers the process being
    // descheduled around the last write.
    for row in sweep {
        let elapsed = row["elapsed_s"].as_f64().unwrap();
        assert!(elapsed >= 0.15, "{row}");
        let slowest = row["latency_us_max"].as_f64().unwrap() / 1e6;
        if row["ios"].as_u64().unwrap() > 3 {
            assert!(elapsed < 0.15 + slowest + 0.5, "{row}");
        }
    }
    assert!(
        !dir.path().join("plugpull-bench.tmp").exists(),
        "bench removes its own file from a directory"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn binary_refuses_a_foreign_file_and_reuses_its_own() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let foreign = dir.path().join("precious.db");
    std::fs::write(&foreign, b"someone's data").unwrap();
    let out = plugpull()
        .args(["bench", "--quiet"])
        .arg(&foreign)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing"));
    assert_eq!(std::fs::read(&foreign).unwrap(), b"someone's data");

    // A new file path is created, and a second run accepts it as plugpull's.
    let own = dir.path().join("bench.img");
    for _ in 0..2 {
        let out = plugpull()
            .args([
                "bench",
                "--quiet",
                "--size",
                "16M",
                "--sweep-sizes",
                "4k-8k",
                "--time-per-size",
                "20ms",
            ])
            .arg(&own)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let sizes: Vec<String> = sweep_rows(&text).into_iter().map(|r| r.0).collect();
        assert_eq!(sizes, ["4.0 KiB", "8.0 KiB"], "{text}");
        assert!(text.contains("plugpull write"), "{text}");
    }
    assert!(own.exists(), "a file target is kept");
}

#[test]
fn only_runs_the_tables_asked_for() {
    let a = BenchOptions {
        only: vec![Table::Iops],
        block_sizes: vec![4 << 10],
        time_per_size: Some(Duration::from_millis(10)),
        ..BenchOptions::default()
    };
    let cfg = Config::new(&a, 64 << 20, 512, 1);
    assert!(!cfg.run_sweep && !cfg.run_methods && !cfg.run_durability);
    let r = run(
        &TestOpener::new(Duration::ZERO),
        &identity(false, "write back"),
        &cfg,
    );
    assert!(r.sweep.is_empty() && r.methods.is_empty());
    assert!(r.durability.is_none());
    assert_eq!(r.iops.as_ref().unwrap().len(), 4);
    assert_eq!(r.reading.class, Class::NoFlushMeasured);
    let v = serde_json::to_value(&r).unwrap();
    assert!(v["durability"].is_null());
    assert_eq!(v["sweep"], serde_json::json!([]));

    // Without --only: the three flush tables, and the IOPS table only with --iops.
    let cfg = Config::new(&BenchOptions::default(), 64 << 20, 512, 1);
    assert!(cfg.run_sweep && cfg.run_methods && cfg.run_durability && cfg.iops.is_none());
    let iops = BenchOptions {
        iops: true,
        ..BenchOptions::default()
    };
    let cfg = Config::new(&iops, 64 << 20, 512, 1);
    assert!(cfg.iops.is_some());
}

#[test]
fn binary_ctrl_c_prints_partial_tables_and_removes_its_file() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut child = plugpull()
        .args([
            "bench",
            "--in-file",
            "--size",
            "16M",
            "--time-per-size",
            "1s",
        ])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The sweep alone takes 15 s (15 sizes, 1 s each): interrupt it once its first row
    // is done, which bench says on stderr (no terminal there: a line per finished row).
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr_reader = {
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut all = String::new();
            for line in io::BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
            all
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let first = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) => {
                if let Some(done) = row_done(&l) {
                    break done;
                }
            }
            Err(e) => panic!("bench never finished its first sweep row in 120 s: {e}"),
        }
    };
    assert_eq!(first.1, 1, "the first line is the first row's: {first:?}");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = stderr_reader.join().unwrap();
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(
        stderr.lines().last(),
        Some("plugpull: error: interrupted: the tables above are partial"),
        "{stderr}"
    );
    let done: Vec<(String, u64, u64)> = stderr.lines().filter_map(row_done).collect();
    let rows_done: Vec<&str> = done.iter().map(|d| d.0.as_str()).collect();
    let numbers: Vec<u64> = done.iter().map(|d| d.1).collect();
    assert_eq!(
        numbers,
        (1..=done.len() as u64).collect::<Vec<_>>(),
        "{stderr}"
    );
    let steps = first.2;
    assert!(done.iter().all(|d| d.2 == steps), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = sweep_rows(&stdout);
    let sizes: Vec<&str> = table.iter().map(|r| r.0.as_str()).collect();
    // The table has the rows done, then at most the row Ctrl-C cut short (it shows what
    // that row measured); nothing after it, and no row of a table after the sweep.
    assert!(
        sizes.len() <= rows_done.len() + 1 && sizes.starts_with(&rows_done),
        "rows done {rows_done:?}, rows printed {sizes:?}: {stdout}"
    );
    assert!(!stdout.contains("\nFlush methods:"), "{stdout}");
    assert!(
        !stdout.contains("Durability cost"),
        "no durability table, not even its header: {stdout}"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "bench's own file is removed"
    );
}

/// `plugpull bench: sweep SIZE done (row N of M)`: (SIZE, N, M).
fn row_done(line: &str) -> Option<(String, u64, u64)> {
    let rest = line.strip_prefix("plugpull bench: sweep ")?;
    let (size, rest) = rest.split_once(" done (row ")?;
    let (n, m) = rest.strip_suffix(')')?.split_once(" of ")?;
    Some((size.to_string(), n.parse().ok()?, m.parse().ok()?))
}

/// The rows of the text sweep table: (size, note), e.g. ("4.0 KiB", "FLUSH FAILED").
fn sweep_rows(text: &str) -> Vec<(String, String)> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("Sync-write sweep:"))
        .skip(1);
    let header = lines.next().expect("a sweep table");
    assert!(header.trim_start().starts_with("size "), "{text}");
    lines
        .take_while(|l| !l.is_empty())
        .filter(|l| !l.starts_with("  ! "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // size (2 words), ios, mean, p50, p99, p99.9, max, IO/s, MB/s, note
            (w[..2].join(" "), w[10..].join(" "))
        })
        .collect()
}
