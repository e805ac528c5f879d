//! The verdict says only what the evidence shows: runs are ordered by the witness's
//! clock, a later run's records supersede an earlier run's, a log fetched while its
//! writer ran cannot give PASS, and neither can a run the power never cut.
//!
//! Each test is named after the attack it repeats; each failed on the plugpull before
//! these rules (it judged the older run, called superseded records stale, gave PASS).

use crate::common;
use common::*;
use plugpull::model::{Ack, RunDescriptor};
use plugpull::record::{RecordId, RunId};
use plugpull::witness::client::{AckSender, ClientOptions};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn json_of(r: &Run) -> serde_json::Value {
    r.json()
}

/// The one run id a `write --json` reported.
fn run_id_of(wr: &Run) -> String {
    wr.json()["run_id"].as_str().expect("run_id").to_string()
}

/// Waits (bounded) until the witness logged how run `run`'s writer ended.
fn wait_for_end(w: &WitnessProc, run: &str) {
    let r = RunId::parse(run).unwrap();
    let t0 = Instant::now();
    loop {
        let log = plugpull::witness::client::fetch(&w.addr, &plugpull::model::RunSelector::Run(r))
            .unwrap();
        if log
            .events
            .iter()
            .any(|e| ["bye", "disconnect", "error"].contains(&e.kind.as_str()))
        {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no end event for {run}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A host whose clock is an hour behind (no RTC battery after the cut) starts a second
/// run on the same drive; the drive loses all of it. The default verify must judge the
/// run the witness heard of last (FAIL), not the one whose writer clock is newest
/// (which passed).
#[test]
fn the_default_verify_judges_the_run_the_witness_heard_of_last_not_the_newest_writer_clock() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = write(&w, &t, &["--size", "8M", "--count", "1000"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    let first = run_id_of(&wr);
    wait_for_end(&w, &first);
    // Run 2: its descriptor says it started an hour before run 1; the drive kept none
    // of its 1,500 acknowledged records (only acks reach the witness here).
    let mut d2: RunDescriptor = test_descriptor(RunId::random());
    d2.device = plugpull::device::identity::identify(&t);
    d2.settings.region_bytes = 8 << 20;
    let behind = chrono::Utc::now() - chrono::Duration::hours(1);
    d2.started_at = behind.to_rfc3339();
    let s = AckSender::connect(&w.addr, &d2, ClientOptions::default()).unwrap();
    for i in 0..1500u64 {
        s.push(Ack {
            record: RecordId {
                stream: 0,
                seq: i,
                offset: (i % 2048) * 4096,
                sectors: 8,
                write_time_ns: 1_000 + i,
            },
            flushed_ns: 2_000 + i,
        });
    }
    let st = s.finish(Duration::from_secs(30)).unwrap();
    assert_eq!(st.durable, 1500);
    wait_for_end(&w, &d2.run_id.hex());

    let v = verify(&w, &t, &[]);
    let j = json_of(&v);
    assert_eq!(
        j["run"]["run_id"],
        d2.run_id.hex(),
        "judged the wrong run: {v:?}"
    );
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(j["verdict"], "FAIL");
    // Run 1's 1,000 records where run 2's first 1,000 should be; nothing at the rest.
    assert_eq!(
        (j["counts"]["stale"].as_u64(), j["counts"]["lost"].as_u64()),
        (Some(1000), Some(500)),
        "{}",
        j["counts"]
    );

    // `runs` lists the run the witness heard of last first, whatever its writer's clock.
    let r = run(["runs", "--witness", &w.addr, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .or(list.as_array())
        .expect("a list of runs")
        .iter()
        .map(|x| x["run_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(ids, [d2.run_id.hex(), first], "{list}");
}

/// Run D1 fills 8 MiB; a second run then writes 10 records at 4 MiB. D1's records
/// there were superseded by the later run, not lost: an honest drive passes.
#[test]
fn an_honest_drive_is_not_accused_after_a_later_run() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let d1 = write(&w, &t, &["--size", "8M", "--count", "2048"]);
    assert_eq!(d1.code, 0, "{d1:?}");
    let d1 = run_id_of(&d1);
    wait_for_end(&w, &d1);
    let later = write(&w, &t, &["--offset", "4M", "--size", "1M", "--count", "10"]);
    assert_eq!(later.code, 0, "{later:?}");
    let v = verify(&w, &t, &["--run", &d1]);
    let j = json_of(&v);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["counts"]["stale"], 0, "{}", j["counts"]);
    assert_eq!(j["counts"]["superseded"], 10, "{}", j["counts"]);
    assert_eq!(j["superseded_by_runs"][0], run_id_of(&later), "{j}");

    // A run not known to come later (another witness's, say) is still stale data: the
    // same medium judged from a log file that names no later run.
    let log = d.path().join("d1.acklog");
    fetch_to(&w.addr, &d1, &log);
    let mut file = plugpull::witness::store::reader::read_log_file(&log).unwrap();
    file.events
        .retain(|e| e.kind != plugpull::model::LATER_RUN_EVENT);
    let bare = d.path().join("bare.acklog");
    plugpull::witness::store::export::write_log_file(&bare, &file).unwrap();
    let v = run([
        "verify",
        t.to_str().unwrap(),
        "--acks",
        bare.to_str().unwrap(),
        "--rehearsal",
        "--json",
    ]);
    assert_eq!(v.code, 1, "{v:?}");
    assert_eq!(v.json()["counts"]["stale"], 10);
}

/// A log fetched while the writer still runs holds a prefix of the acks; judged after
/// the writer went on, every record in it reads "superseded". It must not PASS.
#[test]
fn a_log_fetched_while_the_writer_runs_is_inconclusive() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let mut writer = background_writer(&w, &t, "1M", &[]);
    wait_for_durable_acks(&w, 2000, &mut writer);
    let run_id = only_run(&w);
    let early = d.path().join("early.acklog");
    fetch_to(&w.addr, &run_id, &early);
    // The writer goes on well past the fetched acks, then its host loses power.
    let fetched = plugpull::witness::store::reader::read_log_file(&early)
        .unwrap()
        .acks
        .len();
    wait_for_durable_acks(&w, fetched as u64 + 5000, &mut writer);
    writer.kill().unwrap();
    writer.wait().unwrap();
    for extra in [&[][..], &["--rehearsal"][..]] {
        let mut args = vec![
            "verify",
            t.to_str().unwrap(),
            "--acks",
            early.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("--json");
        let v = run(args);
        let j = json_of(&v);
        assert_eq!(v.code, 3, "{extra:?}: {v:?}");
        assert_eq!(j["verdict"], "INCONCLUSIVE");
        assert_eq!(
            j["writer_end"]["how"], "still-connected",
            "{}",
            j["writer_end"]
        );
        assert_eq!(j["ack_log"]["whole"], false);
    }
}

/// `write --duration 3s` ends by itself; a verify afterwards must not say the drive kept
/// its writes "through this power cut": there was none. `--rehearsal` asks for the
/// verdict on the data alone, and its words do not claim a cut either.
#[test]
fn no_pass_through_a_power_cut_when_the_writer_finished() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let wr = write(&w, &t, &["--size", "8M", "--duration", "3s"]);
    assert_eq!(wr.code, 0, "{wr:?}");
    wait_for_end(&w, &run_id_of(&wr));
    let v = verify_as_after_a_cut(&w, &t, &[]);
    let j = json_of(&v);
    assert_eq!(v.code, 3, "{v:?}");
    assert_eq!(j["verdict"], "INCONCLUSIVE");
    assert_eq!(j["writer_end"]["how"], "finished");
    assert_eq!(j["writer_end"]["cut_evidence"], false);
    let summary = j["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("no power cut during writing"),
        "{summary}"
    );
    assert!(
        !j["plain"].as_str().unwrap().contains("power cut."),
        "{}",
        j["plain"]
    );

    let v = verify(&w, &t, &[]);
    let j = json_of(&v);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(j["verdict"], "PASS");
    assert_eq!(j["writer_end"]["rehearsal"], true);
    let plain = j["plain"].as_str().unwrap();
    assert!(!plain.contains("through this power cut"), "{plain}");
    assert!(plain.contains("rehearsal"), "{plain}");
}

/// The same for a writer stopped by SIGTERM before the power went, and for one killed
/// (SIGKILL) on a host that kept running: its kernel closed the connection, which a host
/// without power cannot do. Neither is a power cut.
#[test]
fn a_stopped_or_killed_writer_is_no_power_cut() {
    let d = tempfile::tempdir().unwrap();
    for (sig, how, code) in [("TERM", "stopped", 3), ("KILL", "closed", 3)] {
        let t = d.path().join(format!("{how}.img"));
        let w = WitnessProc::start(&d.path().join(format!("w-{how}")));
        let mut writer = background_writer(&w, &t, "4M", &[]);
        wait_for_durable_acks(&w, 500, &mut writer);
        signal(&writer, sig);
        writer.wait().unwrap();
        let run_id = only_run(&w);
        wait_for_end(&w, &run_id);
        let v = verify_as_after_a_cut(&w, &t, &[]);
        let j = json_of(&v);
        assert_eq!(j["writer_end"]["how"], how, "{v:?}");
        assert_eq!(v.code, code, "{sig}: {v:?}");
    }
}

/// The same prefix of a log without the witness's word that the writer was connected (a
/// copy taken from the witness directory, an older witness): the medium shows records
/// of the run far past the last ack, more than the writer could have had unacknowledged
/// (`--max-unconfirmed 64`), so the log cannot be complete either.
#[test]
fn a_log_the_medium_outruns_is_inconclusive() {
    let d = tempfile::tempdir().unwrap();
    let w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let mut writer = background_writer(&w, &t, "4M", &["--max-unconfirmed", "64"]);
    wait_for_durable_acks(&w, 2000, &mut writer);
    let run_id = only_run(&w);
    let early = d.path().join("early.acklog");
    fetch_to(&w.addr, &run_id, &early);
    let mut log = plugpull::witness::store::reader::read_log_file(&early).unwrap();
    wait_for_durable_acks(&w, log.acks.len() as u64 + 1500, &mut writer);
    writer.kill().unwrap();
    writer.wait().unwrap();
    log.events
        .retain(|e| e.kind != plugpull::model::WRITER_CONNECTED_EVENT);
    let bare = d.path().join("bare.acklog");
    plugpull::witness::store::export::write_log_file(&bare, &log).unwrap();
    let v = run([
        "verify",
        t.to_str().unwrap(),
        "--acks",
        bare.to_str().unwrap(),
        "--rehearsal",
        "--json",
    ]);
    let j = v.json();
    assert_eq!(v.code, 3, "{v:?}");
    assert_eq!(j["verdict"], "INCONCLUSIVE");
    assert_eq!(j["ack_log"]["whole"], false);
    let why = j["ack_log"]["wholeness"].as_str().unwrap();
    assert!(
        why.contains("past the stream's last acknowledged record"),
        "{why}"
    );

    // The whole log of the same run, after the kill, is complete: no such evidence.
    let whole = d.path().join("whole.acklog");
    fetch_to(&w.addr, &run_id, &whole);
    let v = run([
        "verify",
        t.to_str().unwrap(),
        "--acks",
        whole.to_str().unwrap(),
        "--rehearsal",
        "--json",
    ]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(v.json()["ack_log"]["whole"], true);
}

/// Starts `plugpull write TARGET --size SIZE EXTRA...` in the background, for at most
/// a minute.
fn background_writer(
    w: &WitnessProc,
    t: &std::path::Path,
    size: &str,
    extra: &[&str],
) -> std::process::Child {
    Command::new(bin())
        .args([
            "write",
            t.to_str().unwrap(),
            "--witness",
            &w.addr,
            "--size",
            size,
        ])
        .args(["--duration", "60s", "--quiet"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The one run id in the witness's directory.
fn only_run(w: &WitnessProc) -> String {
    std::fs::read_dir(&w.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find_map(|e| {
            e.file_name()
                .into_string()
                .ok()?
                .strip_suffix(".acklog")
                .map(String::from)
        })
        .unwrap()
}

/// Sends `signal` (a name for kill(1): "STOP", "TERM", "KILL") to `child`.
fn signal(child: &std::process::Child, signal: &str) {
    let st = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

/// SIGSTOP: the writer's host "loses power" as far as the network can tell, it falls
/// silent without closing anything.
fn freeze(child: &std::process::Child) {
    signal(child, "STOP");
}

/// A host that loses power falls silent; the witness notices after its idle timeout. A
/// run begun on the same drive in between (a fast reboot) came after the cut: its
/// records supersede the first run's, and the first run passes with cut evidence.
#[test]
fn a_later_run_begun_before_the_witness_noticed_the_cut_is_not_stale() {
    let d = tempfile::tempdir().unwrap();
    let w = Listen::new(&d.path().join("w"))
        .args(["--idle-timeout", "3s"])
        .start();
    let t = d.path().join("target.img");
    let mut a = background_writer(&w, &t, "4M", &[]);
    wait_for_durable_acks(&w, 2000, &mut a);
    let run_a = only_run(&w);
    freeze(&a);
    let b = write(&w, &t, &["--size", "4M", "--count", "300"]);
    assert_eq!(b.code, 0, "{b:?}");
    wait_for_end(&w, &run_a);
    a.kill().unwrap();
    a.wait().unwrap();
    let v = verify_as_after_a_cut(&w, &t, &["--run", &run_a]);
    let j = v.json();
    assert_eq!(j["writer_end"]["how"], "vanished", "{v:?}");
    assert_eq!(v.code, 0, "{v:?}");
    assert_eq!(j["counts"]["stale"], 0, "{}", j["counts"]);
    assert_eq!(j["superseded_by_runs"][0], run_id_of(&b), "{j}");
}

/// The witness restarts while a writer is connected (and that writer's host then loses
/// power); a later run follows. The restart ends the first run's connection in its log,
/// so the later run's records supersede it, and nothing claims a cut the witness did not
/// see: INCONCLUSIVE, never FAIL.
#[test]
fn a_witness_restart_during_a_run_neither_accuses_the_drive_nor_proves_a_cut() {
    let d = tempfile::tempdir().unwrap();
    let mut w = WitnessProc::start(&d.path().join("w"));
    let t = d.path().join("target.img");
    let mut a = background_writer(&w, &t, "4M", &[]);
    wait_for_durable_acks(&w, 2000, &mut a);
    let run_a = only_run(&w);
    freeze(&a);
    w.restart();
    a.kill().unwrap();
    a.wait().unwrap();
    let b = write(&w, &t, &["--size", "4M", "--count", "300"]);
    assert_eq!(b.code, 0, "{b:?}");
    let v = verify_as_after_a_cut(&w, &t, &["--run", &run_a]);
    let j = v.json();
    assert_eq!(j["counts"]["stale"], 0, "{v:?}");
    assert_eq!(j["writer_end"]["how"], "unknown", "{}", j["writer_end"]);
    assert_eq!(v.code, 3, "{v:?}");
}

/// Run A is cut (falls silent), then writes to the same file under another name (a hard
/// link) begin a later run: the same medium, so its records supersede A's, not stale.
/// And a later run that overwrote every record of A leaves nothing of A to check: no
/// PASS on zero records read back.
#[test]
fn a_later_run_under_another_name_supersedes_and_nothing_checked_is_no_pass() {
    let d = tempfile::tempdir().unwrap();
    let w = Listen::new(&d.path().join("w"))
        .args(["--idle-timeout", "3s"])
        .start();
    let t = d.path().join("target.img");
    let mut a = background_writer(&w, &t, "4M", &[]);
    wait_for_durable_acks(&w, 1500, &mut a);
    let run_a = only_run(&w);
    freeze(&a);
    wait_for_end(&w, &run_a);
    a.kill().unwrap();
    a.wait().unwrap();
    let alias = d.path().join("alias.img");
    std::fs::hard_link(&t, &alias).unwrap();
    let alias_s = alias.to_str().unwrap();
    let b = write(
        &w,
        &alias,
        &[
            "--size",
            "4M",
            "--count",
            "16",
            "--destroy-data-on",
            alias_s,
        ],
    );
    assert_eq!(b.code, 0, "{b:?}");
    let v = verify_as_after_a_cut(&w, &t, &["--run", &run_a]);
    let j = v.json();
    assert_eq!(j["counts"]["stale"], 0, "{v:?}");
    assert_eq!(j["superseded_by_runs"][0], run_id_of(&b), "{j}");
    assert_eq!(v.code, 0, "{v:?}");

    // Every place of the 4 MiB region rewritten by one more run: nothing of A is left.
    let c = write(
        &w,
        &alias,
        &[
            "--size",
            "4M",
            "--count",
            "1024",
            "--destroy-data-on",
            alias_s,
        ],
    );
    assert_eq!(c.code, 0, "{c:?}");
    let v = verify_as_after_a_cut(&w, &t, &["--run", &run_a]);
    let j = v.json();
    assert_eq!(j["counts"]["intact"], 0, "{v:?}");
    assert_eq!(v.code, 3, "{v:?}");
    assert!(
        j["summary"].as_str().unwrap().starts_with("none of the"),
        "{}",
        j["summary"]
    );
}
