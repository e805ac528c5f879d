//! The whole-host controller's agent listener and built-in witness as a QEMU lab sees
//! them: a virtio-serial chardev CONNECTS to the controller and to the witness
//! when QEMU starts, idles while the guest boots, then carries every message the guest's
//! agent sends, one after another, on that one host connection.
//!
//! The "agent" here is this test, speaking `plugpull-agent/1` JSON lines by hand over
//! raw TCP (no FUSE, no root): the real controller binary must serve several messages on
//! one connection in order, drop garbage and half-written lines with a log line, and
//! its witness must keep an idle pre-opened connection for `[witness] handshake_timeout`.

use crate::common;

use plugpull::wire::frame;
use plugpull::wire::msg::Msg;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A campaign of one cycle whose power switch does nothing (the "host" is this test).
fn config(d: &Path, agent_port: u16, witness_port: u16, witness_extra: &str) -> PathBuf {
    config_with(
        d,
        agent_port,
        witness_port,
        witness_extra,
        "allow_unauthenticated_agents = true",
    )
}

/// The same, with `agent_extra` in `[agent]`.
fn config_with(
    d: &Path,
    agent_port: u16,
    witness_port: u16,
    witness_extra: &str,
    agent_extra: &str,
) -> PathBuf {
    let cfg = d.join("campaign.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[campaign]
cycles = 1
results = "results.jsonl"
delay = "10ms"
off = "10ms"
seed = 3
wait_timeout = "20s"

[target]
kind = "host"

[witness]
bind = "127.0.0.1:{witness_port}"
{witness_extra}

[agent]
listen = "127.0.0.1:{agent_port}"
boot_timeout = "20s"
{agent_extra}

[power]
driver = "command"
scope = "host"
off = "true"
on = "true"
timeout = "5s"
"#
        ),
    )
    .unwrap();
    cfg
}

/// The controller, killed on drop if the test failed before it finished.
struct Controller(Option<Child>);

impl Controller {
    fn start(cfg: &Path) -> Controller {
        let child = Command::new(common::bin())
            .args(["campaign", "--json", "--config"])
            .arg(cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Controller(Some(child))
    }

    /// Waits (bounded) for the end; exit code, summary, stderr.
    fn finish(self) -> (i32, Value, String) {
        let (code, stdout, stderr) = self.finish_any();
        let s = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stdout}\n{stderr}"));
        (code, s, stderr)
    }

    /// Waits (bounded) for the end without asking for a summary on stdout.
    fn finish_any(mut self) -> (i32, String, String) {
        let mut child = self.0.take().unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// Stops a controller still waiting for its host once its stderr holds each of
    /// `lines` (a dropped connection is logged after its close: the caller cannot know
    /// when), or after 20 s; returns its stderr.
    fn kill_once_logged(mut self, lines: &[&str]) -> String {
        let mut child = self.0.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut err = String::new();
        while !lines.iter().all(|l| err.contains(l)) {
            // A timeout, or the controller closed stderr: the caller's checks say what
            // is missing.
            let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            else {
                break;
            };
            err.push_str(&line);
            err.push('\n');
        }
        let _ = child.kill();
        let _ = child.wait();
        // The rest, up to the end the kill made.
        for line in rx {
            err.push_str(&line);
            err.push('\n');
        }
        err
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Connects as QEMU's chardev does, retrying while the controller starts.
fn connect(port: u16) -> TcpStream {
    let t0 = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if t0.elapsed() > Duration::from_secs(20) => panic!("connect {port}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Sends one message line and reads its one reply line (on the same connection).
fn ask(s: &mut BufReader<TcpStream>, msg: Value) -> Value {
    let mut line = msg.to_string();
    line.push('\n');
    s.get_mut().write_all(line.as_bytes()).unwrap();
    let mut reply = String::new();
    s.get_mut()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    s.read_line(&mut reply).unwrap();
    assert!(reply.ends_with('\n'), "no whole reply to {msg}: {reply:?}");
    serde_json::from_str(&reply).unwrap()
}

/// Whether the peer closed `s` (EOF or reset) rather than leaving it open and silent.
fn closed_by_peer(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 256];
    match s.read(&mut b) {
        Ok(0) => true,
        // Bytes first (the witness may send an Error frame before it closes): look again.
        Ok(_) => {
            !matches!(s.read(&mut b), Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut)
        }
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// Asks the witness on `s` for its runs; its first answer, None when it closed the
/// connection instead.
fn list_runs_on(s: &mut TcpStream) -> Option<Msg> {
    s.write_all(&Msg::ListRuns.encode()).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    loop {
        if let frame::Decoded::Frame(f) = frame::decode(&buf) {
            return Msg::decode(&f).ok();
        }
        let mut c = [0u8; 4096];
        match s.read(&mut c) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&c[..n]),
        }
    }
}

fn boot(previous: Value) -> Value {
    json!({"format": "plugpull-agent/1", "type": "boot", "host": "guest", "previous": previous})
}

/// One whole cycle on ONE connection that idled first, like a guest behind virtio-serial:
/// boot (twice: a retried message is answered again), acking, the boot report after the
/// cut; garbage and a half-written line on other connections are dropped and logged; the
/// witness keeps an idle connection past its default handshake timeout when told to.
#[test]
fn one_connection_carries_a_whole_cycle_and_idle_witness_connections_survive() {
    let d = tempfile::tempdir().unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    let cfg = config(d.path(), ap, wp, "handshake_timeout = \"30s\"");
    let ctl = Controller::start(&cfg);

    // QEMU's chardevs connect at start, long before the guest speaks.
    let mut agent = BufReader::new(connect(ap));
    let mut witness_idle = connect(wp);
    let t0 = Instant::now();

    // Garbage, and a line cut off by the end of its connection: each is dropped with a
    // log line; the controller goes on serving.
    let mut garbage = connect(ap);
    garbage.write_all(b"GET / HTTP/1.0\n").unwrap();
    assert!(
        closed_by_peer(&mut garbage, Duration::from_secs(10)),
        "garbage must be dropped"
    );
    let mut half = connect(ap);
    half.write_all(br#"{"format":"plugpull-agent/1","type":"bo"#)
        .unwrap();
    half.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(closed_by_peer(&mut half, Duration::from_secs(10)));

    // The guest boots, for twice the witness's default handshake timeout (5 s): the time
    // passing is what is tested. Then the witness answers the first request on the
    // connection opened at start, which it could not had it dropped it.
    std::thread::sleep(Duration::from_secs(10).saturating_sub(t0.elapsed()));
    let answer = list_runs_on(&mut witness_idle);
    assert!(
        matches!(answer, Some(Msg::FetchEnd { acks: 0 })),
        "the witness dropped an idle connection before [witness] handshake_timeout: {answer:?}"
    );

    let r1 = ask(&mut agent, boot(Value::Null));
    assert_eq!(r1["type"], "next", "{r1}");
    assert_eq!(r1["cycle"], 1, "{r1}");
    // The same boot again on the same connection (a guest retry): answered the same.
    let r2 = ask(&mut agent, boot(Value::Null));
    assert_eq!(r2["type"], "next", "{r2}");
    assert_eq!(r2["seed"], r1["seed"], "{r2}");

    let run_id = "00112233445566778899aabbccddeeff";
    let r3 = ask(
        &mut agent,
        json!({"format": "plugpull-agent/1", "type": "acking", "host": "guest", "cycle": 1, "run_id": run_id, "acked": 5}),
    );
    assert_eq!(r3["type"], "ok", "{r3}");
    let r4 = ask(
        &mut agent,
        boot(json!({
            "cycle": 1, "run_id": run_id, "verdict": "PASS", "summary": "all 5 acked records intact",
            "counts": {"intact": 5}, "loss_window": null, "ordering_holes": 0, "dead_device": null,
            "acked_records": 5, "last_acked": null, "reattach_ms": 3.0,
            "unsafe_shutdowns_delta": null, "error": null
        })),
    );
    assert_eq!(r4["type"], "stop", "{r4}");

    let (code, s, err) = ctl.finish();
    // The run this test made up holds no acks at the controller's witness: its PASS is
    // not recorded as said.
    assert_eq!(code, 2, "{s}\n{err}");
    assert_eq!(s["cycles"], 1, "{s}\n{err}");
    assert_eq!(
        (&s["passed"], &s["errors"]),
        (&0.into(), &1.into()),
        "{s}\n{err}"
    );
    assert!(
        err.contains("dropping an agent connection") && err.contains("GET / HTTP"),
        "garbage is logged: {err}"
    );
    assert!(
        err.contains("in the middle of a message"),
        "a half-written line is logged: {err}"
    );
}

/// Without `[witness] handshake_timeout` the built-in witness keeps its default (5 s) and
/// drops a pre-opened idle connection: the option above is what keeps it.
#[test]
fn without_handshake_timeout_the_witness_drops_idle_connections() {
    let d = tempfile::tempdir().unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    let cfg = config(d.path(), ap, wp, "");
    let _ctl = Controller::start(&cfg);
    let mut idle = connect(wp);
    assert!(
        closed_by_peer(&mut idle, Duration::from_secs(15)),
        "the default handshake timeout should drop an idle connection"
    );
}

/// A handshake_timeout with an external witness would do nothing: refused, with the
/// option to use instead.
#[test]
fn handshake_timeout_needs_the_built_in_witness() {
    use plugpull::campaign::config::Settings;
    let base = "[campaign]\ncycles = 1\nresults = \"r.jsonl\"\n[target]\nkind = \"host\"\n\
                [power]\ndriver = \"command\"\nscope = \"host\"\noff = \"x\"\non = \"y\"\n";
    let s = Settings::parse(
        &format!("{base}[witness]\nbind = \"127.0.0.1:0\"\nhandshake_timeout = \"2m\"\n"),
        Path::new("."),
    )
    .unwrap();
    assert_eq!(s.witness_handshake_timeout, Some(Duration::from_secs(120)));
    let e = Settings::parse(
        &format!("{base}[witness]\naddr = \"w:7420\"\nhandshake_timeout = \"2m\"\n"),
        Path::new("."),
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("--handshake-timeout"), "{e:#}");
    let e = Settings::parse(
        &format!("{base}[witness]\nhandshake_timeout = \"soon\"\n"),
        Path::new("."),
    )
    .unwrap_err();
    assert!(
        format!("{e:#}").contains("witness.handshake_timeout"),
        "{e:#}"
    );
}

/// The results file's cycle lines (empty when there is none).
fn cycle_lines(d: &Path) -> Vec<Value> {
    std::fs::read_to_string(d.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Sends one line and reads one reply line; `None` when the controller is not there or
/// closed the connection instead of answering.
fn try_ask(port: u16, line: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    s.write_all(format!("{line}\n").as_bytes()).ok()?;
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).ok()?;
    (!reply.is_empty()).then_some(reply)
}

/// Waits until something listens on `port` (or `within` passes).
fn wait_listening(port: u16, within: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < within {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn forged_report(host: &str, run_id: &str) -> Value {
    json!({"format": "plugpull-agent/1", "type": "boot", "host": host, "previous": {
        "cycle": 1, "run_id": run_id, "verdict": "PASS", "summary": "all 5000 acked records intact",
        "counts": {"intact": 5000}, "loss_window": null, "ordering_holes": 0, "dead_device": null,
        "acked_records": 5000, "last_acked": null, "reattach_ms": 3.0,
        "unsafe_shutdowns_delta": null, "error": null
    }})
}

/// The forgery: a peer that reaches the controller sends boot, acking, then a boot
/// report from host "attacker" with verdict PASS for a run the controller's witness
/// never saw. With the default `[agent]` (no key) the controller does not even start:
/// it names the key it needs. Nothing is recorded, let alone a PASS.
#[test]
fn forged_pass_from_an_unkeyed_peer_is_never_recorded() {
    let d = tempfile::tempdir().unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    let cfg = config_with(d.path(), ap, wp, "", "");
    let ctl = Controller::start(&cfg);
    let run_id = "00112233445566778899aabbccddeeff";
    if wait_listening(ap, Duration::from_secs(5)) {
        let boot = json!({"format": "plugpull-agent/1", "type": "boot", "host": "guest", "previous": null});
        try_ask(ap, &boot.to_string());
        let acking = json!({"format": "plugpull-agent/1", "type": "acking", "host": "guest", "cycle": 1, "run_id": run_id, "acked": 5000});
        try_ask(ap, &acking.to_string());
        try_ask(ap, &forged_report("attacker", run_id).to_string());
    }
    let (code, _, err) = ctl.finish_any();
    let lines = cycle_lines(d.path());
    assert!(
        lines.iter().all(|c| c["verdict"] != "PASS"),
        "a forged PASS was recorded: {lines:?}\n{err}"
    );
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("key_file is not set"), "{err}");
}

/// With unkeyed agents allowed (loopback), a boot report from another host than the
/// one the run was ordered to is refused and logged, and the ordered host's PASS for a
/// run its witness holds no acks for is recorded as an ERROR with the witness's count.
#[test]
fn report_from_another_host_is_refused_and_unbacked_pass_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    let cfg = config(d.path(), ap, wp, "");
    let ctl = Controller::start(&cfg);
    let mut agent = BufReader::new(connect(ap));
    let r = ask(&mut agent, boot(Value::Null));
    assert_eq!(r["type"], "next", "{r}");
    let run_id = "00112233445566778899aabbccddeeff";
    let r = ask(
        &mut agent,
        json!({"format": "plugpull-agent/1", "type": "acking", "host": "attacker", "cycle": 1, "run_id": run_id, "acked": 5}),
    );
    assert_eq!(r["type"], "refused", "an ack report from another host: {r}");
    let r = ask(
        &mut agent,
        json!({"format": "plugpull-agent/1", "type": "acking", "host": "guest", "cycle": 1, "run_id": run_id, "acked": 5}),
    );
    assert_eq!(r["type"], "ok", "{r}");
    let r = ask(&mut agent, forged_report("attacker", run_id));
    assert_eq!(r["type"], "refused", "{r}");
    let r = ask(&mut agent, forged_report("guest", run_id));
    assert_eq!(r["type"], "stop", "{r}");
    let (code, s, err) = ctl.finish();
    assert_eq!(code, 2, "{s}\n{err}");
    assert!(err.contains("refused a boot report"), "{err}");
    let l = cycle_lines(d.path());
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0]["verdict"], "ERROR", "{}", l[0]);
    assert_eq!(l[0]["agent_verdict"], "PASS", "{}", l[0]);
    assert_eq!(l[0]["acked_records"], 0, "the witness's count: {}", l[0]);
    assert!(
        l[0]["error"].as_str().unwrap().contains("holds no acks"),
        "{}",
        l[0]
    );
}

/// Unkeyed agents may be allowed only on a loopback address.
#[test]
fn unkeyed_agents_on_a_non_loopback_address_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    let cfg = config(d.path(), ap, wp, "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace(&format!("127.0.0.1:{ap}"), &format!("0.0.0.0:{ap}"));
    std::fs::write(&cfg, text).unwrap();
    let (code, _, err) = Controller::start(&cfg).finish_any();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("allow_unauthenticated_agents = true needs a loopback listen address"),
        "{err}"
    );
    assert!(cycle_lines(d.path()).is_empty());
}

/// The agent side of the keyed handshake, written out from docs/protocol.md.
struct Keyed {
    session: [u8; 32],
    seq: u64,
}

fn agent_key(secret: &str) -> [u8; 32] {
    let psk = blake3::derive_key(
        "plugpull 2025 witness pre-shared key v1",
        secret.trim().as_bytes(),
    );
    blake3::derive_key("plugpull 2025 campaign agent key v1", &psk)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

impl Keyed {
    /// Sends hello on `s`, reads the challenge; returns the session and the raw lines.
    fn handshake(s: &mut BufReader<TcpStream>, secret: &str, nonce: [u8; 16]) -> (Keyed, String) {
        let hello = json!({"format": "plugpull-agent/1", "type": "hello", "nonce": hex(&nonce)})
            .to_string();
        let c = raw_ask(s, &hello).expect("a challenge");
        let c: Value = serde_json::from_str(&c).unwrap();
        assert_eq!(c["type"], "challenge", "{c}");
        let mut h = blake3::Hasher::new_keyed(&agent_key(secret));
        h.update(b"plugpull agent session v1");
        h.update(&nonce);
        h.update(&unhex(c["nonce"].as_str().unwrap()));
        (
            Keyed {
                session: *h.finalize().as_bytes(),
                seq: 0,
            },
            hello,
        )
    }

    fn mac(&self, dir: u8, seq: u64, body: &str) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.session);
        h.update(&[dir]);
        h.update(&seq.to_le_bytes());
        h.update(body.as_bytes());
        hex(&h.finalize().as_bytes()[..16])
    }

    fn seal(&mut self, msg: &Value) -> String {
        let body = msg.to_string();
        let line = json!({"format": "plugpull-agent/1", "type": "sealed", "seq": self.seq,
            "mac": self.mac(1, self.seq, &body), "body": body});
        self.seq += 1;
        line.to_string()
    }

    /// Checks a sealed reply (sequence 0 of the controller's direction) and opens it.
    fn open(&self, line: &str, seq: u64) -> Value {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["type"], "sealed", "{v}");
        let body = v["body"].as_str().unwrap();
        assert_eq!(
            v["mac"],
            self.mac(2, seq, body),
            "the controller's MAC: {v}"
        );
        serde_json::from_str(body).unwrap()
    }
}

/// One line out, one line back; `None` if the connection was closed instead.
fn raw_ask(s: &mut BufReader<TcpStream>, line: &str) -> Option<String> {
    s.get_mut().write_all(format!("{line}\n").as_bytes()).ok()?;
    s.get_mut()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reply = String::new();
    s.read_line(&mut reply).ok()?;
    (!reply.is_empty()).then_some(reply)
}

const SECRET: &str = "a campaign's agent key, 32 bytes";

fn keyed_config(d: &Path) -> (PathBuf, u16) {
    std::fs::write(d.join("agent.key"), format!("{SECRET}\n")).unwrap();
    let (ap, wp) = (common::free_port(), common::free_port());
    (config_with(d, ap, wp, "", "key_file = \"agent.key\""), ap)
}

/// An agent with the wrong key is refused (its connection closed and logged); the right
/// key is answered, sealed under the session.
#[test]
fn agent_with_a_wrong_key_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, ap) = keyed_config(d.path());
    let ctl = Controller::start(&cfg);
    let boot_msg =
        json!({"format": "plugpull-agent/1", "type": "boot", "host": "guest", "previous": null});

    let mut s = BufReader::new(connect(ap));
    let (mut wrong, _) = Keyed::handshake(&mut s, "not the campaign's key at all", [7; 16]);
    assert_eq!(
        raw_ask(&mut s, &wrong.seal(&boot_msg)),
        None,
        "a wrong key is answered"
    );

    // Unsealed, without a hello: refused too.
    assert_eq!(try_ask(ap, &boot_msg.to_string()), None);

    let mut s = BufReader::new(connect(ap));
    let (mut good, _) = Keyed::handshake(&mut s, SECRET, [8; 16]);
    let reply = raw_ask(&mut s, &good.seal(&boot_msg)).expect("an answer to the right key");
    assert_eq!(good.open(&reply, 0)["type"], "next", "{reply}");
    drop(s);
    let err = ctl.kill_once_logged(&["MAC check failed", "an agent without a key"]);
    assert!(err.contains("MAC check failed"), "{err}");
    assert!(err.contains("an agent without a key"), "{err}");
}

/// A captured hello and sealed boot report, replayed on a new connection (the
/// controller's challenge differs) or again on the same one (its number is taken), are
/// refused.
#[test]
fn replayed_agent_frames_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (cfg, ap) = keyed_config(d.path());
    let ctl = Controller::start(&cfg);
    let boot_msg =
        json!({"format": "plugpull-agent/1", "type": "boot", "host": "guest", "previous": null});
    let mut s = BufReader::new(connect(ap));
    let (mut good, hello) = Keyed::handshake(&mut s, SECRET, [9; 16]);
    let sealed = good.seal(&boot_msg);
    let reply = raw_ask(&mut s, &sealed).expect("answered");
    assert_eq!(good.open(&reply, 0)["type"], "next");
    // Again on the same connection: number 0 was used.
    assert_eq!(
        raw_ask(&mut s, &sealed),
        None,
        "replayed within a connection"
    );

    let mut s2 = BufReader::new(connect(ap));
    raw_ask(&mut s2, &hello).expect("a fresh challenge");
    assert_eq!(
        raw_ask(&mut s2, &sealed),
        None,
        "replayed on another connection"
    );
    let err = ctl.kill_once_logged(&["replayed, dropped or reordered", "MAC check failed"]);
    assert!(err.contains("replayed, dropped or reordered"), "{err}");
    assert!(err.contains("MAC check failed"), "{err}");
}
