//! `plugpull report`, completions and man pages, through the built binary: reports made
//! from real demo runs (an honest drive that passes, a lying drive that fails) must render
//! as self-contained HTML holding the expected charts and numbers.

use plugpull::units::thousands;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_plugpull"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("running plugpull")
}

/// A real verify report from one demo cycle, saved into `dir`; returns (path, parsed).
fn demo_report(dir: &Path, profile: &str, seed: u64) -> (PathBuf, Value) {
    let out = run(&[
        "demo",
        "--profile",
        profile,
        "--seed",
        &seed.to_string(),
        "--duration",
        "1s",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("demo --json prints JSON");
    let p = dir.join(format!("{profile}-{seed}.json"));
    std::fs::write(&p, &out.stdout).unwrap();
    (p, v)
}

fn render(inputs: &[&Path], out: &Path) -> String {
    let mut args: Vec<String> = vec!["report".into()];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(["-o".into(), out.display().to_string(), "--quiet".into()]);
    let o = bin().args(&args).output().unwrap();
    assert!(
        o.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(out).unwrap()
}

/// Nothing in the page may make a browser fetch anything.
fn assert_self_contained(html: &str) {
    for bad in [
        "http://", "https://", "<script", "<link", "src=", "url(", "@import", "<iframe", "<img",
        "<object", "<embed",
    ] {
        assert!(!html.contains(bad), "the page contains {bad:?}");
    }
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
}

fn count_row(html: &str, class: &str) -> String {
    let start = html
        .find(&format!("<tr id=\"count-{class}\">"))
        .unwrap_or_else(|| panic!("no counts row for {class}"));
    let end = start + html[start..].find("</tr>").unwrap();
    html[start..end].to_string()
}

fn assert_numbers(html: &str, report: &Value) {
    for (class, n) in report["counts"].as_object().unwrap() {
        let row = count_row(html, class);
        assert!(
            row.contains(&format!(">{}</td>", thousands(n.as_u64().unwrap()))),
            "counts row for {class} does not show {n}: {row}"
        );
    }
    let acked = report["acked_records"].as_u64().unwrap();
    assert!(html.contains(&format!(
        "<div class=\"num\" id=\"num-acked\"><b>{}</b>",
        thousands(acked)
    )));
    // The writer's exact command line (from the run descriptor) is on the page.
    let cmd: Vec<&str> = report["run"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(html.contains(&cmd[1..].join(" ")), "command line missing");
}

#[test]
fn verify_json_carries_chart_data_for_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let (_, r) = demo_report(dir.path(), "lying", 11);
    let acked = r["acked_records"].as_u64().unwrap();
    let in_timeline: u64 = r["ack_timeline"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["counts"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        in_timeline, acked,
        "every ack is in exactly one timeline bucket"
    );
    let lat = &r["flush_latency"];
    assert_eq!(lat["count"].as_u64().unwrap(), acked);
    let in_buckets: u64 = lat["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(in_buckets, acked);
    assert!(lat["p50_us"].as_f64().unwrap() <= lat["p99_us"].as_f64().unwrap());
}

#[test]
fn a_passing_run_renders_green_with_charts_and_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (p, r) = demo_report(dir.path(), "honest", 3);
    assert_eq!(r["verdict"], "PASS");
    let html = render(&[&p], &dir.path().join("pass.html"));
    assert_self_contained(&html);
    assert!(html.contains("id=\"verdict\" data-verdict=\"PASS\""));
    assert!(html.contains("<svg id=\"chart-timeline\""));
    assert!(html.contains("<svg id=\"chart-latency\""));
    assert!(html.contains("class=\"bar class-intact\""));
    assert!(
        !html.contains("class=\"bar class-lost\""),
        "nothing was lost"
    );
    assert!(!html.contains("loss-window-marker"));
    assert!(
        !html.contains("id=\"chart-cycles\""),
        "one run is not a campaign"
    );
    assert!(html.contains("<table id=\"device\">"));
    assert!(html.contains("plugpull simdrive (honest)"));
    assert_numbers(&html, &r);
}

/// The device table shows a file target's identity as labelled fields, and big numbers
/// carry thousands separators, in the tiles and the tables alike.
#[test]
fn file_identities_read_as_fields_and_big_numbers_are_separated() {
    let dir = tempfile::tempdir().unwrap();
    let (p, mut r) = demo_report(dir.path(), "honest", 3);
    let file = serde_json::json!({
        "path": "/srv/plugpull.img",
        "inode": 131_077,
        "fs_dev": "8:1",
        "fsid": "3f2a9c01d4e5b6a7",
        "offset": 1_048_576,
    });
    r["device"]["file"] = file.clone();
    r["run"]["device"]["file"] = file;
    // A big run: every acknowledged record intact.
    let acked = 1_234_567u64;
    r["acked_records"] = acked.into();
    for (class, n) in r["counts"].as_object_mut().unwrap() {
        *n = if class == "intact" { acked } else { 0 }.into();
    }
    std::fs::write(&p, serde_json::to_vec(&r).unwrap()).unwrap();
    let html = render(&[&p], &dir.path().join("file.html"));
    let start = html.find("<table id=\"device\">").expect("a device table");
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    assert!(
        !table.contains("{&quot;") && !table.contains("{\""),
        "raw JSON: {table}"
    );
    for row in [
        "<tr><th>file: path</th><td>/srv/plugpull.img</td>",
        "<tr><th>file: inode</th><td>131077</td>",
        "<tr><th>file: file system device</th><td>8:1</td>",
        "<tr><th>file: file system id</th><td>3f2a9c01d4e5b6a7</td>",
        "<tr><th>file: offset</th><td>1.0 MiB (1,048,576 bytes)</td>",
        "<tr><th>size</th><td>64.0 MiB (67,108,864 bytes)</td>",
    ] {
        assert!(table.contains(row), "{row:?} not in {table}");
    }
    assert!(html.contains("<div class=\"num\" id=\"num-acked\"><b>1,234,567</b>"));
    assert!(count_row(&html, "intact").contains(">1,234,567</td>"));
}

#[test]
fn a_lying_drive_renders_red_with_the_losses_near_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (p, r) = demo_report(dir.path(), "lying", 7);
    assert_eq!(r["verdict"], "FAIL");
    let html = render(&[&p], &dir.path().join("fail.html"));
    assert_self_contained(&html);
    assert!(html.contains("id=\"verdict\" data-verdict=\"FAIL\""));
    assert!(html.contains(r["summary"].as_str().unwrap()));
    assert!(html.contains("<svg id=\"chart-timeline\""));
    assert!(
        html.contains("class=\"bar class-lost\""),
        "no bar of lost records; counts {} timeline {}",
        r["counts"],
        r["ack_timeline"]
    );
    assert!(html.contains("id=\"loss-window-marker\""));
    assert!(html.contains("<svg id=\"chart-latency\""));
    assert!(html.contains("<table id=\"findings\">"));
    let lost = r["counts"]["lost"].as_u64().unwrap();
    assert!(lost > 0);
    assert!(count_row(&html, "lost").contains(" class=\"fail\""));
    assert_numbers(&html, &r);
}

#[test]
fn several_reports_render_as_a_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let (pass, _) = demo_report(dir.path(), "honest", 5);
    let (fail, _) = demo_report(dir.path(), "lying", 5);
    // The same two as JSON lines, one wrapped the way a campaign might, plus a line that
    // is not a verify report.
    let one = |p: &Path| {
        serde_json::to_string(
            &serde_json::from_str::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap(),
        )
        .unwrap()
    };
    let jsonl = dir.path().join("campaign.jsonl");
    std::fs::write(
        &jsonl,
        format!(
            "{}\n{{\"cycle\":9,\"verify\":{}}}\n{{\"format\":\"something-else\"}}\n",
            one(&pass),
            one(&fail)
        ),
    )
    .unwrap();
    let html = render(&[&pass, &fail, &jsonl], &dir.path().join("c.html"));
    assert_self_contained(&html);
    assert!(html.contains("data-verdict=\"FAIL\""));
    assert!(html.contains("<svg id=\"chart-cycles\""));
    assert_eq!(html.matches("class=\"cycle verdict-pass\"").count(), 2);
    assert_eq!(html.matches("class=\"cycle verdict-fail\"").count(), 2);
    assert!(html.contains("<svg id=\"chart-loss-window\""));
    assert!(html.contains("cycle 9"));
    assert!(html.contains("not a plugpull verify report, skipped"));
    assert!(html.contains("4 cycles: 2 FAIL, 2 PASS"));
    // Two drives' runs: the title names no one drive their latencies would be pooled under.
    assert!(
        html.contains("<title>plugpull: 2 drives - FAIL</title>"),
        "{}",
        &html[..400]
    );
}

/// A campaign's results file, as `plugpull campaign` writes it, renders as whole as one
/// verify report: its header line is taken for what it is, the title names the drive,
/// every cycle carries its timeline, flush latencies, device and run.
#[test]
fn a_campaign_results_file_renders_whole() {
    let dir = tempfile::tempdir().unwrap();
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hardware/examples/simdrive-lying.toml"
    );
    let results = dir.path().join("lying.jsonl");
    let c = bin()
        .args(["campaign", "--config", config, "--cycles", "2", "--results"])
        .arg(&results)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        c.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&c.stderr)
    );
    let out = dir.path().join("r.html");
    let o = bin()
        .arg("report")
        .arg(&results)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("skipped"), "{stderr}");
    let html = std::fs::read_to_string(&out).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("<title>plugpull: plugpull simdrive (lying) - FAIL</title>"));
    for missing in [
        "has no ack_timeline",
        "has no flush_latency",
        "holds no device identity",
        "holds no command lines",
        "not a plugpull verify report",
    ] {
        assert!(!html.contains(missing), "{missing}");
    }
    assert!(html.contains("<svg id=\"chart-timeline\""));
    assert!(html.contains("<svg id=\"chart-latency\""));
    // Each cycle's run, its start and its writer, as the results file names them.
    let text = std::fs::read_to_string(&results).unwrap();
    for line in text.lines().skip(1) {
        let v: Value = serde_json::from_str(line).unwrap();
        let run = v["run_id"].as_str().unwrap();
        assert!(html.contains(&format!("<code>{run}</code>")), "{run}");
        assert_eq!(v["device"]["model"], "plugpull simdrive (lying)");
        assert!(v["ack_timeline"].as_array().is_some_and(|t| !t.is_empty()));
        assert!(v["flush_latency"]["count"].as_u64().is_some_and(|n| n > 0));
    }
    assert_eq!(
        html.matches("4.0 KiB records, sequential, 1 stream(s), fdatasync")
            .count(),
        2
    );
}

#[test]
fn a_clean_campaign_states_the_rule_of_three() {
    let dir = tempfile::tempdir().unwrap();
    let (pass, _) = demo_report(dir.path(), "honest", 9);
    let inputs: Vec<&Path> = vec![&pass; 3];
    let html = render(&inputs, &dir.path().join("c.html"));
    assert!(html.contains("data-verdict=\"PASS\""));
    assert!(html.contains("rule of three: 3/3"));
}

#[test]
fn report_json_stdout_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = demo_report(dir.path(), "lying", 2);
    let out = dir.path().join("r.html");
    let o = run(&[
        "report",
        p.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "plugpull-report/1");
    assert_eq!(v["summary"]["verdict"], "FAIL");
    assert_eq!(v["summary"]["cycles"], 1);
    // "-o -" writes the page itself to stdout.
    let o = run(&["report", p.to_str().unwrap(), "-o", "-"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("<!DOCTYPE html>"));
    // Not a report: a clear error, exit 2, no page.
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let bad = dir.path().join("bad.html");
    let o = run(&[
        "report",
        junk.to_str().unwrap(),
        "-o",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no plugpull verify reports"));
    assert!(!bad.exists());
}

#[test]
fn report_output_through_a_symlink_or_into_a_device_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = demo_report(dir.path(), "honest", 3);
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let o = run(&["report", p.to_str().unwrap(), "-o", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symbolic link"),
        "{o:?}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // A device is not a file to replace: /dev/full would fail the old write, /dev/null
    // would swallow it; either way it is refused before anything is written.
    let o = run(&["report", p.to_str().unwrap(), "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a regular file"),
        "{o:?}"
    );
    // A regular file is replaced whole, and no temporary file is left beside it.
    let out = dir.path().join("r.html");
    std::fs::write(&out, "old").unwrap();
    let o = run(&["report", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        std::fs::read_to_string(&out)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn report_input_from_a_device_like_dev_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    // /dev/null, not /dev/zero: the same refusal, and a build without it reads nothing
    // instead of filling memory.
    let o = run(&["report", "/dev/null", "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a regular file"),
        "{o:?}"
    );
    assert!(!out.exists());
}

#[test]
fn completions_and_man_pages_come_from_the_clap_definitions() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = run(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(s.contains("plugpull"), "{shell}");
        assert!(s.contains("report") && s.contains("verify"), "{shell}");
    }
    let o = run(&["completions", "bash"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("--read-timeout"));

    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    let o = run(&["man", "--dir", man.to_str().unwrap()]);
    assert!(o.status.success());
    for page in [
        "plugpull.1",
        "plugpull-verify.1",
        "plugpull-report.1",
        "plugpull-man.1",
    ] {
        let text = std::fs::read_to_string(man.join(page)).unwrap_or_else(|_| panic!("{page}"));
        assert!(text.contains(".TH"), "{page} is roff");
    }
    let verify = std::fs::read_to_string(man.join("plugpull-verify.1")).unwrap();
    assert!(verify.contains("read\\-timeout"));
    assert!(verify.contains("\n.SH EXAMPLES\n"), "{verify}");
    for e in std::fs::read_dir(&man).unwrap() {
        let page = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(
            !page.contains(".SH EXTRA"),
            "a page with an EXTRA section: {page}"
        );
    }

    // docs/GUIDE.md lists the pages `man --dir` writes: every one of them, no other.
    let mut written: Vec<String> = std::fs::read_dir(&man)
        .unwrap()
        .map(|e| format!("man1/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    written.sort();
    let guide = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/GUIDE.md"),
    )
    .unwrap();
    let mut listed: Vec<String> = guide
        .lines()
        .filter(|l| l.starts_with("man1/") && l.ends_with(".1"))
        .map(str::to_string)
        .collect();
    listed.sort();
    assert_eq!(listed, written, "docs/GUIDE.md's man page list");
}
