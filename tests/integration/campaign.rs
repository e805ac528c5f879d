//! Drive-only campaigns on the in-process simulated drive, through the built binary:
//! 50 unattended cycles honest (0 failures, upper bound printed) and lying (failures in
//! nearly every cycle); a controller killed mid-campaign and resumed loses no finished
//! cycle's result.

use crate::common;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most 50 simulated cycles may take (see the tests that use it).
const CYCLES_DO_NOT_WAIT_OUT_TIMEOUTS: Duration = Duration::from_secs(300);

fn config(dir: &Path, profile: &str, cycles: u64) -> std::path::PathBuf {
    let p = dir.join(format!("{profile}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"
[campaign]
cycles = {cycles}
results = "{profile}.jsonl"
delay = "10ms-60ms"
off = "5ms"
seed = 42

[target]
kind = "simdrive"
profile = "{profile}"
size = "8M"

[power]
driver = "simdrive"
"#
        ),
    )
    .unwrap();
    p
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run(cfg: &Path) -> (i32, Value, String) {
    let out = Command::new(common::bin())
        .args(["campaign", "--json", "--config"])
        .arg(cfg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let summary: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "summary is not JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code().unwrap(),
        summary,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn honest_50_cycles_pass_with_upper_bound() {
    let d = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let (code, s, err) = run(&config(d.path(), "honest", 50));
    // Not a speed test: far above 50 cycles on a loaded machine (seconds), far below
    // 50 cycles each waiting out a cut's or a verify's timeout (minutes each).
    assert!(
        t0.elapsed() < CYCLES_DO_NOT_WAIT_OUT_TIMEOUTS,
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(s["cycles"], 50);
    assert_eq!(s["failed"], 0, "{s}");
    assert_eq!(s["passed"], 50, "{s}");
    let ub = s["failure_rate_upper_95"].as_f64().unwrap();
    // Exact: 1 - 0.05^(1/50) = 0.0582; rule of three: 0.06.
    assert!((ub - 0.0582).abs() < 1e-3, "upper bound {ub}");
    // The plain sentence is in the JSON too, not only in the text.
    let plain = s["plain"].as_str().unwrap_or_default();
    assert_eq!(
        plain,
        "This drive kept every write it confirmed as saved through all 50 power cuts that \
         were checked. That still allows it to lose data in up to 5.8% of power cuts (95% \
         confidence); more cuts narrow this.",
        "{s}"
    );
    let l = lines(&d.path().join("honest.jsonl"));
    assert_eq!(l.len(), 51, "header + 50 cycles");
    for (i, c) in l[1..].iter().enumerate() {
        assert_eq!(c["cycle"], i as u64 + 1);
        assert_eq!(c["verdict"], "PASS", "{c}");
        assert!(c["acked_records"].as_u64().unwrap() > 0, "{c}");
        assert!(c["cut"]["issued_ns"].as_u64().unwrap() > 0);
        assert!(c["last_acked"]["seq"].as_u64().is_some());
    }
    // The text summary prints the bound too.
    let out = Command::new(common::bin())
        .args(["campaign", "--summary", "--config"])
        .arg(d.path().join("honest.toml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("95% upper bound 5.82%"), "{text}");
    assert!(text.contains(&format!("In plain words: {plain}")), "{text}");
}

#[test]
fn lying_50_cycles_fail_nearly_every_cycle() {
    let d = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let (code, s, err) = run(&config(d.path(), "lying", 50));
    // Not a speed test: far above 50 cycles on a loaded machine (seconds), far below
    // 50 cycles each waiting out a cut's or a verify's timeout (minutes each).
    assert!(
        t0.elapsed() < CYCLES_DO_NOT_WAIT_OUT_TIMEOUTS,
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(code, 1, "{err}");
    assert!(s["failed"].as_u64().unwrap() >= 45, "{s}");
    assert!(s["loss_window_ms"]["p50"].as_f64().unwrap() > 0.0, "{s}");
    let failed = s["failed"].as_u64().unwrap();
    let judged = failed + s["passed"].as_u64().unwrap();
    let plain = s["plain"].as_str().unwrap_or_default();
    let lost = format!(
        "This drive lost writes it had confirmed as saved in {failed} of {judged} power cuts ("
    );
    assert!(plain.starts_with(&lost), "{lost:?}: {s}");
    assert!(
        plain.ends_with("A database on this drive can lose committed transactions."),
        "{s}"
    );
    let l = lines(&d.path().join("lying.jsonl"));
    let failing: Vec<_> = l[1..].iter().filter(|c| c["verdict"] == "FAIL").collect();
    assert!(
        failing
            .iter()
            .all(|c| c["loss_window"]["records"].as_u64().unwrap() > 0)
    );
}

#[test]
fn killed_controller_resumes_without_losing_a_cycle() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "honest", 50);
    let results = d.path().join("honest.jsonl");
    let mut child = Command::new(common::bin())
        .args(["campaign", "--quiet", "--config"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        let n = std::fs::read_to_string(&results)
            .map(|s| s.lines().count())
            .unwrap_or(0);
        if n >= 11 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "campaign made no progress"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL, mid-cycle
    child.wait().unwrap();
    let before = std::fs::read_to_string(&results).unwrap();
    let complete: Vec<&str> = before
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok())
        .collect();
    assert!(
        complete.len() >= 11 && complete.len() < 51,
        "killed too late: {}",
        complete.len()
    );

    let (code, s, err) = run(&cfg);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("resuming"), "{err}");
    assert_eq!(s["cycles"], 50, "{s}");
    let after = std::fs::read_to_string(&results).unwrap();
    // Every line finished before the kill is still there, byte for byte.
    for (a, b) in complete.iter().zip(after.lines()) {
        assert_eq!(a, &b);
    }
    let l = lines(&results);
    let nums: Vec<u64> = l[1..]
        .iter()
        .map(|c| c["cycle"].as_u64().unwrap())
        .collect();
    assert_eq!(nums, (1..=50).collect::<Vec<_>>());
    // A different config must not silently continue this file.
    let other = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("off = \"5ms\"", "off = \"6ms\"");
    std::fs::write(&cfg, other).unwrap();
    let out = Command::new(common::bin())
        .args(["campaign", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("different configuration"));
}

/// A campaign on the simulated drive fed with fall traces, sweeping two fall times:
/// cycles 1..6 get traces fast, stuck, fast, fast, stuck, fast (round robin over three)
/// and fall times 0, 20, 0, 20, 0, 20 ms (round robin over two). The stuck rail never
/// fell: its cycles are "cut not proven", never PASS, though verify found nothing lost.
#[test]
fn cuts_whose_rail_never_fell_are_not_proven_and_a_ramp_sweep_reports_per_fall_time() {
    let d = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fall-traces");
    let (fast, stuck) = (fx.join("12v-fast.trace"), fx.join("12v-stuck.trace"));
    let cfg = d.path().join("ramp.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[campaign]
cycles = 6
results = "ramp.jsonl"
delay = "10ms-40ms"
off = "5ms"
seed = 7
fall_times = ["0ms", "20ms"]
cut_proof_threshold = 0.10

[target]
kind = "simdrive"
profile = "honest"
size = "8M"

[power]
driver = "simdrive"
traces = [{fast:?}, {stuck:?}, {fast:?}]
"#
        ),
    )
    .unwrap();
    let (code, s, err) = run(&cfg);
    // Nothing failed, but unproven cuts make the campaign inconclusive, not a pass.
    assert_eq!(code, 3, "{s}\n{err}");
    assert_eq!(
        (&s["passed"], &s["cut_not_proven"], &s["failed"]),
        (&4.into(), &2.into(), &0.into()),
        "{s}"
    );
    let l = lines(&d.path().join("ramp.jsonl"));
    for c in &l[1..] {
        let n = c["cycle"].as_u64().unwrap();
        let stuck = n == 2 || n == 5;
        assert_eq!(c["cut_proven"], !stuck, "cycle {n}: {c}");
        assert_eq!(
            c["fall_time_ms"],
            if n % 2 == 1 { 0.0 } else { 20.0 },
            "{c}"
        );
        if stuck {
            assert_eq!(c["verdict"], "INCONCLUSIVE", "never PASS: {c}");
            assert_eq!(c["verify_verdict"], "PASS", "{c}");
            assert!(
                c["summary"].as_str().unwrap().starts_with("cut not proven"),
                "{c}"
            );
            assert_eq!(c["fall"]["to_50_us"], Value::Null, "{c}");
        } else {
            assert_eq!(c["verdict"], "PASS", "{c}");
            let t50 = c["fall"]["to_50_us"].as_f64().unwrap();
            assert!((600.0..800.0).contains(&t50), "tau ln 2 = 693 µs: {c}");
        }
    }
    assert!(err.contains("CUT-NOT-PROVEN"), "{err}");
    let g = s["by_fall_time"].as_array().unwrap();
    assert_eq!(g.len(), 2, "{s}");
    assert_eq!(
        (&g[0]["fall_time_ms"], &g[0]["cycles"]),
        (&0.0.into(), &3.into())
    );
    assert_eq!(
        (&g[0]["passed"], &g[0]["cut_not_proven"]),
        (&2.into(), &1.into())
    );
    assert_eq!(
        (&g[1]["fall_time_ms"], &g[1]["passed"]),
        (&20.0.into(), &2.into())
    );
    assert_eq!(g[1]["cut_not_proven"], 1);
    // The text summary says it too.
    let out = Command::new(common::bin())
        .args(["campaign", "--summary", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 cut not proven"), "{text}");
    assert!(text.contains("fall time"), "{text}");
    // The plain sentence does not lump the unproven cuts in with cuts that gave no answer.
    assert!(
        text.contains("2 more cuts did not prove the power fell"),
        "{text}"
    );
    // The HTML report of the results file plots every cycle's fall and marks the two.
    let html = d.path().join("ramp.html");
    let out = Command::new(common::bin())
        .arg("report")
        .arg(d.path().join("ramp.jsonl"))
        .arg("-o")
        .arg(&html)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"chart-falls\""), "no fall chart");
    let chart = &page[page.find("id=\"chart-falls\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("<polyline").count(), 6, "one line per cycle");
    assert_eq!(
        chart.matches("stroke=\"#f9a825\"").count(),
        2,
        "the two unproven"
    );
    assert_eq!(page.matches("NOT PROVEN").count(), 2);
    assert!(
        page.contains("cut not proven"),
        "the cycles' own summaries say why"
    );
}

/// A switch that says it cut and did nothing: a relay on the wrong rail, a `command`
/// driver whose `off` is `true`. It cannot say whether power is on.
struct DoesNothing;

impl plugpull::power::PowerSwitch for DoesNothing {
    fn describe(&self) -> String {
        "a switch that does nothing".into()
    }
    fn capabilities(&self) -> plugpull::power::Capabilities {
        plugpull::power::Capabilities {
            scope: plugpull::power::Scope::Drive,
            precise_timing: false,
            reports_state: false,
            native_pulse: false,
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<plugpull::power::SwitchTiming, plugpull::power::PowerError> {
        Ok(plugpull::power::SwitchTiming::around(|| Ok::<_, plugpull::power::PowerError>(()))?.0)
    }
    fn on(&mut self) -> Result<plugpull::power::SwitchTiming, plugpull::power::PowerError> {
        self.off()
    }
}

/// A drive-only cycle on the in-process simulated drive, once with a switch that does
/// nothing and once with the simulated drive's own switch. The first drive kept every
/// acknowledged record because it never lost power: CUT-NOT-PROVEN, never PASS. The
/// real cut is proven, and the result says by what.
#[test]
fn drive_only_cut_that_did_nothing_is_not_proven() {
    use plugpull::campaign::config::Settings;
    use plugpull::campaign::run_cycle;
    use plugpull::campaign::target::Target;
    use plugpull::sim::{Profile, SimDrive};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path(), "honest", 1);
    let s = Settings::load(&cfg).unwrap();
    let w = plugpull::witness::server::Witness::start(
        "127.0.0.1:0",
        &d.path().join("w"),
        s.witness_options(),
    )
    .unwrap();
    let addr = w.addr.to_string();
    let drive = |seed| {
        Arc::new(SimDrive::create(8 << 20, Profile::parse("honest").unwrap(), seed, None).unwrap())
    };

    let sim = drive(1);
    let mut target = Target::Sim {
        drive: sim.clone(),
        profile: "honest".into(),
    };
    let r = run_cycle(1, 42, &s, &mut target, &mut DoesNothing, &addr);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(r.status(), "CUT-NOT-PROVEN", "{j}");
    assert_ne!(j["verdict"], "PASS", "{j}");
    assert_eq!(j["cut_proven"], false, "{j}");
    assert_eq!(
        j["verify_verdict"], "PASS",
        "verify found nothing lost: {j}"
    );
    assert!(
        j["summary"]
            .as_str()
            .unwrap()
            .contains("nothing shows the drive lost power"),
        "{j}"
    );

    let sim = drive(2);
    let mut power = s
        .file
        .power
        .build(Some(sim.clone() as Arc<dyn plugpull::power::sim::Cuttable>))
        .unwrap();
    let mut target = Target::Sim {
        drive: sim,
        profile: "honest".into(),
    };
    let r = run_cycle(2, 42, &s, &mut target, power.as_mut(), &addr);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(r.status(), "PASS", "{j}");
    assert_eq!(j["cut_proven"], true, "{j}");
    let ev: Vec<&str> = j["cut_evidence"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    assert!(ev.contains(&"writer-lost-drive"), "{j}");
    assert!(ev.contains(&"switch-reports-off"), "{j}");
    w.shutdown();
}

/// The example campaign files write their results outside the source tree (they are
/// also installed read-only under /usr/share): a relative `results` would land beside
/// the file. A relative path in a file of one's own is still relative to that file.
#[test]
fn example_campaigns_write_results_outside_the_source_tree() {
    use plugpull::campaign::config::Settings;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for e in std::fs::read_dir(root.join("hardware/examples")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "toml") {
            continue;
        }
        let all = plugpull::campaign::fleet::load_all(&p)
            .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        for s in all {
            assert!(
                s.results.is_absolute() && !s.results.starts_with(root),
                "{}: results go to {}",
                p.display(),
                s.results.display()
            );
        }
        seen += 1;
    }
    assert!(seen >= 9, "only {seen} example files");
    let d = tempfile::tempdir().unwrap();
    let own = config(d.path(), "honest", 1);
    let s = Settings::load(&own).unwrap();
    assert_eq!(s.results, d.path().join("honest.jsonl"));
}

/// The campaign commands of docs/campaign.md and docs/GUIDE.md, run as written (the
/// lines of the block that names `simdrive-lying.toml`) in a directory of the user's
/// own: each exits as its `# exit N` comment says, and everything they write lands in
/// that directory, nothing beside the shipped example files.
#[test]
fn the_documented_example_campaigns_run_as_written_and_write_where_they_are_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(root.join("hardware/examples"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let shipped = examples();
    for doc in ["docs/campaign.md", "docs/GUIDE.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let block = text
            .split("```")
            .skip(1)
            .step_by(2)
            .find(|b| b.contains("hardware/examples/simdrive-lying.toml"))
            .unwrap_or_else(|| panic!("{doc}: no block runs simdrive-lying.toml"));
        let commands: Vec<&str> = block
            .lines()
            .filter(|l| l.starts_with("plugpull "))
            .collect();
        assert!(commands.len() >= 3, "{doc}: {block}");
        let cwd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        // "From a clone of the repository": the relative path resolves as in a clone.
        std::os::unix::fs::symlink(root.join("hardware"), cwd.path().join("hardware")).unwrap();
        let bin_dir = Path::new(common::bin()).parent().unwrap().to_path_buf();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
        for line in &commands {
            let want: i32 = line
                .split_once("# exit ")
                .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
                .map_or(0, |n| n.parse().unwrap());
            let out = Command::new("sh")
                .args(["-c", line])
                .current_dir(cwd.path())
                .env("PATH", &path)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(want),
                "{doc}: `{line}`\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut made: Vec<String> = std::fs::read_dir(cwd.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "hardware")
            .collect();
        made.sort();
        assert_eq!(
            made,
            [
                "honest.jsonl",
                "honest.witness",
                "lying.html",
                "lying.jsonl",
                "lying.witness"
            ],
            "{doc}"
        );
        let honest = lines(&cwd.path().join("honest.jsonl"));
        let lying = lines(&cwd.path().join("lying.jsonl"));
        // The header line, then one line per cycle (--cycles 20 in both commands).
        assert_eq!((honest.len(), lying.len()), (21, 21), "{doc}");
        assert_eq!(
            examples(),
            shipped,
            "{doc} wrote beside the shipped examples"
        );
    }
}
