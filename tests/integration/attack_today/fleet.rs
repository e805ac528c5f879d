//! `[[drives]]` campaigns given results files that are not theirs, and drive names that
//! would break "a line per drive per cycle".

use crate::common::*;
use std::path::{Path, PathBuf};

const HEAD: &str = r#"
[campaign]
cycles = 1
results = "r.jsonl"
delay = "10ms-40ms"
off = "5ms"
seed = 9

[power]
driver = "simdrive"
"#;

fn drive(name: &str) -> String {
    format!(
        "\n[[drives]]\nname = {}\n[drives.target]\nkind = \"simdrive\"\nprofile = \"honest\"\nsize = \"4M\"\n",
        toml::Value::String(name.into())
    )
}

fn write_cfg(dir: &Path, file: &str, body: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, format!("{HEAD}{body}")).unwrap();
    p
}

fn one_drive(dir: &Path) -> PathBuf {
    write_cfg(
        dir,
        "one.toml",
        "\n[target]\nkind = \"simdrive\"\nprofile = \"honest\"\nsize = \"4M\"\n",
    )
}

fn campaign(cfg: &Path, extra: &[&str]) -> Run {
    let mut a = vec!["campaign", "--config", cfg.to_str().unwrap(), "--quiet"];
    a.extend_from_slice(extra);
    run(a)
}

/// A one-drive campaign shown a fleet's results file must refuse it, for a run and for
/// `--summary` alike: summed as one drive, two drives' cuts would be one drive's verdict.
#[test]
fn attack_today_a_one_drive_campaign_refuses_a_fleets_results() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fleet = write_cfg(
        dir.path(),
        "fleet.toml",
        &(drive("candidate A") + &drive("candidate B")),
    );
    let r = campaign(&fleet, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let results = dir.path().join("r.jsonl");
    let before = std::fs::read(&results).unwrap();
    let one = one_drive(dir.path());
    let res = results.to_str().unwrap();
    for extra in [&["--results", res][..], &["--results", res, "--summary"]] {
        let r = campaign(&one, extra);
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stdout.is_empty(), "{extra:?}: {r:?}");
    }
    assert_eq!(std::fs::read(&results).unwrap(), before);
}

/// ... and the other way round: a fleet shown a one-drive campaign's results.
#[test]
fn attack_today_a_fleet_refuses_a_one_drive_campaigns_results() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let one = one_drive(dir.path());
    let results = dir.path().join("one.jsonl");
    let r = campaign(&one, &["--results", results.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let before = std::fs::read(&results).unwrap();
    let fleet = write_cfg(
        dir.path(),
        "fleet.toml",
        &(drive("candidate A") + &drive("candidate B")),
    );
    let res = results.to_str().unwrap();
    for extra in [&["--results", res][..], &["--results", res, "--summary"]] {
        let r = campaign(&fleet, extra);
        assert_eq!(r.code, 2, "{extra:?}: {r:?}");
        assert!(r.stdout.is_empty(), "{extra:?}: {r:?}");
    }
    assert_eq!(std::fs::read(&results).unwrap(), before);
}

/// Resuming with the drives reordered, renamed, added or removed is another fleet: the
/// results file is refused and left as it was (`--cycles 2` asks for more), and so is
/// its `--summary`.
#[test]
fn attack_today_a_fleet_changed_between_runs_is_refused_on_resume() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (a, b, c) = (drive("A"), drive("B"), drive("C"));
    let cfg = write_cfg(dir.path(), "fleet.toml", &(a.clone() + &b));
    let r = campaign(&cfg, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let results = dir.path().join("r.jsonl");
    let before = std::fs::read(&results).unwrap();
    for (what, body) in [
        ("reordered", b.clone() + &a),
        ("renamed", a.clone() + &drive("B2")),
        ("added", a.clone() + &b + &c),
        ("removed", a.clone()),
    ] {
        std::fs::write(&cfg, format!("{HEAD}{body}")).unwrap();
        let r = campaign(&cfg, &["--cycles", "2"]);
        assert_eq!(r.code, 2, "{what}: {r:?}");
        assert_eq!(std::fs::read(&results).unwrap(), before, "{what}");
        // `--summary` too: an added drive would be a row passing cuts it never had.
        let r = campaign(&cfg, &["--summary"]);
        assert_eq!(r.code, 2, "{what} --summary: {r:?}");
        assert!(r.stdout.is_empty(), "{what} --summary: {r:?}");
    }
}

/// The promise is a line per drive per cycle, named by drive: a name with a line break
/// (or another control character) would print a forged line, so it is refused before
/// anything is made.
#[test]
fn attack_today_a_drive_name_with_a_line_break_is_refused_before_anything_is_made() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for name in ["A\ncycle 1/1 B: 0 acked; PASS", "A\rB", "A\u{1b}[2KB"] {
        let cfg = write_cfg(dir.path(), "fleet.toml", &(drive(name) + &drive("B")));
        let r = campaign(&cfg, &[]);
        assert_eq!(r.code, 2, "{name:?}: {r:?}");
        assert!(r.stderr.contains("drives[0].name"), "{name:?}: {r:?}");
        assert!(!dir.path().join("r.jsonl").exists(), "{name:?}");
    }
}

/// A name with quotes and HTML is a name: it is run, printed as given and named in the
/// matrix's JSON, which `report` renders escaped.
#[test]
fn attack_today_a_drive_name_with_quotes_and_html_is_kept_and_escaped_on_the_page() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let name = "<script>\"x\"</script> & 'y'";
    let cfg = write_cfg(dir.path(), "fleet.toml", &(drive(name) + &drive("B")));
    let r = campaign(&cfg, &["--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let m: plugpull::fleet::Matrix = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m.drives[0].drive.name, name);
    let json = dir.path().join("m.json");
    std::fs::write(&json, &r.stdout).unwrap();
    let html = dir.path().join("m.html");
    let r = run([
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script"), "unescaped name on the page");
    assert!(
        page.contains("&lt;script&gt;"),
        "the name is not on the page"
    );
}

/// Drives whose every cycle ends in an error (the witness named is not there): exit 2,
/// a line per drive per cycle named by drive, and a matrix that names no drive as
/// failing and calls no cut PASS.
#[test]
fn attack_today_drives_that_error_every_cycle_exit_2_and_fail_no_drive() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dead = format!("127.0.0.1:{}", free_port());
    let body = format!(
        "\n[witness]\naddr = \"{dead}\"\n{}{}",
        drive("A"),
        drive("B")
    );
    let cfg = write_cfg(dir.path(), "fleet.toml", &body);
    let r = campaign(&cfg, &["--cycles", "2", "--json"]);
    assert_eq!(r.code, 2, "{r:?}");
    let m: plugpull::fleet::Matrix = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m.verdict(), plugpull::model::Verdict::Inconclusive);
    for d in &m.drives {
        assert_eq!(
            (d.pass, d.fail, d.cuts.len()),
            (0, 0, 2),
            "{}",
            d.drive.name
        );
        assert!(!d.plp_claim_broken);
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.path().join("r.jsonl"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named: Vec<(u64, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["cycle"].as_u64().unwrap(),
                l["drive"].as_str().unwrap(),
                l["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            (1, "A", "ERROR"),
            (1, "B", "ERROR"),
            (2, "A", "ERROR"),
            (2, "B", "ERROR")
        ]
    );
    // The same from the results file alone.
    let s = campaign(&cfg, &["--summary", "--json"]);
    assert_eq!(s.code, 2, "{s:?}");
    assert_eq!(s.stdout, r.stdout);
}

fn real(name: &str, serial: &str, channel: u32) -> String {
    format!(
        "\n[[drives]]\nname = \"{name}\"\n[drives.target]\nkind = \"device\"\nserial = \"{serial}\"\nreattach = \"none\"\n[drives.power]\ndriver = \"serial\"\nprotocol = \"ch340\"\nport = \"/dev/serial/by-id/usb-relay\"\nchannel = {channel}\n"
    )
}

fn parse(body: &str) -> Result<usize, String> {
    plugpull::campaign::fleet::parse(&format!("{HEAD}{body}"), Path::new("/tmp"))
        .map(|f| f.map_or(0, |f| f.len()))
        .map_err(|e| format!("{e:#}"))
}

/// One real drive listed twice (a copied entry) would get two writers at once, each run
/// judged against the other's records; two drives on one switch channel would cut each
/// other. Both are refused before anything is made, with the drives named.
#[test]
fn attack_today_a_serial_or_a_switch_given_twice_is_refused() {
    assert_eq!(parse(&(real("A", "S1", 1) + &real("B", "S2", 2))), Ok(2));
    let e = parse(&(real("A", "S1", 1) + &real("B", " s1 ", 2))).unwrap_err();
    assert!(e.contains("serial") && e.contains("\"A\""), "{e}");
    let e = parse(&(real("A", "S1", 1) + &real("B", "S2", 1))).unwrap_err();
    assert!(e.contains("[drives.power]") && e.contains("\"A\""), "{e}");
    // Simulated drives each have a switch of their own even when the tables match.
    let sim = |n: &str| drive(n) + "[drives.power]\ndriver = \"simdrive\"\n";
    assert_eq!(parse(&(sim("A") + &sim("B"))), Ok(2));
}

/// A drive that never comes back took the writes it had confirmed: the campaign exits 1
/// (its cycle's verdict is FAIL), so the matrix must say FAIL and name that drive, and
/// only it, not "no drive lost an acknowledged write".
#[test]
fn attack_today_a_drive_dead_after_the_cut_is_named_as_losing_writes() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let gone = drive("gone").replace("\"honest\"", "\"dead\"");
    let cfg = write_cfg(dir.path(), "fleet.toml", &(drive("ok") + &gone));
    let r = campaign(&cfg, &["--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let m: plugpull::fleet::Matrix = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m.verdict(), plugpull::model::Verdict::Fail, "{}", r.stdout);
    assert!(!m.drives[0].lost_acked_writes());
    assert!(m.drives[1].lost_acked_writes(), "{}", r.stdout);
    assert!(
        m.drives[1].sentence.contains("do not use it"),
        "{}",
        m.drives[1].sentence
    );
    let text = campaign(&cfg, &["--summary"]);
    assert_eq!(text.code, 1, "{text:?}");
    assert!(
        text.stdout.lines().next().unwrap().ends_with("FAIL"),
        "{text:?}"
    );
    let json = dir.path().join("m.json");
    std::fs::write(&json, &r.stdout).unwrap();
    let html = dir.path().join("m.html");
    let p = run([
        "report",
        json.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(p.code, 0, "{p:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-verdict=\"FAIL\""));
    assert!(page.contains("lost acknowledged writes: gone in"), "banner");
}

/// A campaign stopped between two drives' lines resumes with the drive that lacks the
/// cycle, and only it, with the seed that drive's cycle had.
#[test]
fn attack_today_a_fleet_stopped_between_two_drives_lines_resumes_with_the_other() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let cfg = write_cfg(dir.path(), "fleet.toml", &(drive("A") + &drive("B")));
    let r = campaign(&cfg, &["--cycles", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let results = dir.path().join("r.jsonl");
    let whole = std::fs::read_to_string(&results).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    assert_eq!(lines.len(), 5);
    let key = |l: &str| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        (v["cycle"].clone(), v["drive"].clone(), v["seed"].clone())
    };
    // Killed after A's line of cycle 2.
    std::fs::write(&results, lines[..4].join("\n") + "\n").unwrap();
    let r = campaign(&cfg, &["--cycles", "2"]);
    assert_eq!(r.code, 0, "{r:?}");
    let again = std::fs::read_to_string(&results).unwrap();
    let again: Vec<&str> = again.lines().collect();
    assert_eq!(again.len(), 5, "{again:?}");
    assert_eq!(&again[..4], &lines[..4]);
    assert_eq!(key(again[4]), key(lines[4]));
}
