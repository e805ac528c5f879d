//! The verdict in plain words, end to end through the built binary: the demo's
//! text ends with the plain sentence, the JSON report carries it as `plain`, the HTML
//! report shows it under the banner with the meaning of ordering holes, and `verify
//! --help` explains every class.

use crate::common;

#[test]
fn a_lying_drive_is_explained_in_plain_words_in_text_json_and_html() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let args = [
        "demo",
        "--profile",
        "lying",
        "--seed",
        "3",
        "--duration",
        "1s",
    ];
    let json = common::run(args.iter().chain(&["--json"]));
    assert_eq!(json.code, 1, "{json:?}");
    let v = json.json();
    let plain = v["plain"].as_str().expect("a plain field").to_string();
    assert!(plain.starts_with("This drive lost "), "{plain}");
    assert!(
        plain.contains("writes it had confirmed as saved"),
        "{plain}"
    );
    assert!(
        plain.contains("A database on this drive can lose committed transactions."),
        "{plain}"
    );

    let text = common::run(args);
    assert_eq!(text.code, 1, "{text:?}");
    let verdict_at = text.stdout.find("VERDICT: FAIL").expect("a verdict line");
    let after: Vec<&str> = text.stdout[verdict_at..].lines().collect();
    assert!(
        after[1].starts_with("In plain words: This drive lost "),
        "{text:?}"
    );
    // The legend explains the failing classes that are present, after the counts.
    assert!(
        text.stdout
            .contains("    lost: a write confirmed as saved is gone"),
        "{text:?}"
    );

    let report = d.path().join("lying.json");
    std::fs::write(&report, &json.stdout).unwrap();
    let html_path = d.path().join("r.html");
    let r = common::run([
        "report".as_ref(),
        report.as_os_str(),
        "-o".as_ref(),
        html_path.as_os_str(),
        "--quiet".as_ref(),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    let at = html
        .find("<p class=\"plain\" id=\"plain\">")
        .expect("the plain sentence");
    assert!(
        html[at..].contains("This drive lost "),
        "{}",
        &html[at..at + 300]
    );
    if v["ordering_holes"]["count"].as_u64().unwrap_or(0) > 0 {
        assert!(html.contains("id=\"holes-meaning\""));
    }
}

#[test]
fn an_honest_drive_kept_every_write() {
    let r = common::run([
        "demo",
        "--profile",
        "honest",
        "--seed",
        "1",
        "--duration",
        "1s",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let last = r
        .stdout
        .lines()
        .find(|l| l.starts_with("In plain words: "))
        .expect("a plain line");
    assert!(
        last.starts_with("In plain words: This drive kept every write it confirmed as saved ("),
        "{last}"
    );
    assert!(last.ends_with(" writes) through this power cut."), "{last}");
}

#[test]
fn verify_help_explains_every_class_and_ordering_holes() {
    let r = common::run(["verify", "--help"]);
    assert_eq!(r.code, 0);
    for word in [
        "superseded ",
        "lost ",
        "stale ",
        "shorn ",
        "corrupt ",
        "misdirected ",
        "unreadable ",
        "ordering holes:",
    ] {
        assert!(
            r.stdout.contains(&format!("  {word}")),
            "{word:?} in\n{}",
            r.stdout
        );
    }
    assert!(r.stdout.contains("130"), "the exit codes list 130");
}

/// A run of 16 records over 8 MiB whose sixth record is gone (zeros where it was): the
/// witness, the target.
fn a_run_with_a_lost_record(dir: &std::path::Path) -> (common::WitnessProc, std::path::PathBuf) {
    let w = common::WitnessProc::start(&dir.join("w"));
    let t = dir.join("t.img");
    let wr = common::write(&w, &t, &["--size", "8M", "--count", "16"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    common::edit(&t, 5 * 4096, 4096, |b| b.fill(0));
    (w, t)
}

const ELSEWHERE: &str = "--scan-region reads the whole region";

/// Verify reads only the records' own blocks: a lost write may have landed where it did
/// not read, and the words say how to look. With --scan-region it read everything, so
/// they do not.
#[test]
fn a_lost_write_points_to_scan_region_unless_the_region_was_read() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (w, t) = a_run_with_a_lost_record(d.path());
    let v = common::verify(&w, &t, &[]);
    assert_eq!(v.code, 1, "{v:?}");
    let j = v.json();
    assert_eq!(j["counts"]["lost"], 1, "{v:?}");
    let plain = j["plain"].as_str().unwrap();
    assert!(
        plain.contains("A lost write may have been written elsewhere on the drive"),
        "{plain}"
    );
    assert!(plain.contains(ELSEWHERE), "{plain}");
    let whole = common::verify(&w, &t, &["--scan-region"]);
    assert_eq!(whole.code, 1, "{whole:?}");
    let j = whole.json();
    assert_eq!(j["counts"]["lost"], 1, "{whole:?}");
    assert!(j["bytes_read"].as_u64().unwrap() >= 8 << 20, "{whole:?}");
    let plain = j["plain"].as_str().unwrap();
    assert!(!plain.contains(ELSEWHERE), "{plain}");
}

/// `--rehearsal` says there was no cut on purpose: a FAIL then does not add that no
/// power cut was seen. Without it, the same FAIL does.
#[test]
fn a_rehearsal_that_fails_does_not_add_that_no_cut_was_seen() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (w, t) = a_run_with_a_lost_record(d.path());
    let no_cut = "no power cut was seen";
    let rehearsal = common::verify(&w, &t, &[]);
    assert_eq!(rehearsal.code, 1, "{rehearsal:?}");
    let summary = rehearsal.json()["summary"].as_str().unwrap().to_string();
    assert!(
        summary.starts_with("1 of 16 acknowledged records did not survive intact"),
        "{summary}"
    );
    assert!(!summary.contains(no_cut), "{summary}");
    let plain = rehearsal.json()["plain"].as_str().unwrap().to_string();
    assert!(!plain.contains("power went out"), "{plain}");
    let after_a_cut = common::verify_as_after_a_cut(&w, &t, &[]);
    assert_eq!(after_a_cut.code, 1, "{after_a_cut:?}");
    let summary = after_a_cut.json()["summary"].as_str().unwrap().to_string();
    assert!(summary.contains(no_cut), "{summary}");
}
