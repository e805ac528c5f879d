//! The whole-host controller's agent listener and built-in witness as a QEMU lab sees
//! them (issue 13): a virtio-serial chardev CONNECTS to the controller and to the witness
//! when QEMU starts, idles while the guest boots, then carries every message the guest's
//! agent sends, one after another, on that one host connection.
//!
//! The "agent" here is this test, speaking `plugpull-agent/1` JSON lines by hand over
//! raw TCP (no FUSE, no root): the real controller binary must serve several messages on
//! one connection in order, drop garbage and half-written lines with a log line, and
//! its witness must keep an idle pre-opened connection for `[witness] handshake_timeout`.

mod common;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A campaign of one cycle whose power switch does nothing (the "host" is this test).
fn config(d: &Path, agent_port: u16, witness_port: u16, witness_extra: &str) -> PathBuf {
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
    fn finish(mut self) -> (i32, Value, String) {
        let mut child = self.0.take().unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let s = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stdout}\n{stderr}"));
        (out.status.code().unwrap_or(-1), s, stderr)
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

    // The guest boots: longer than the witness's default handshake timeout (5 s).
    std::thread::sleep(Duration::from_secs(7).saturating_sub(t0.elapsed()));
    assert!(
        !closed_by_peer(&mut witness_idle, Duration::from_millis(200)),
        "the witness dropped an idle connection before [witness] handshake_timeout"
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
        json!({"format": "plugpull-agent/1", "type": "acking", "cycle": 1, "run_id": run_id, "acked": 5}),
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
    assert_eq!(code, 0, "{s}\n{err}");
    assert_eq!(s["cycles"], 1, "{s}\n{err}");
    assert_eq!(s["passed"], 1, "{s}\n{err}");
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
