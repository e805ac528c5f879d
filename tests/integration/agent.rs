//! Whole-host mode end to end, with the controller and the "host" as separate processes on
//! this machine. The host is a `plugpull simdrive` FUSE daemon (the drive) plus `plugpull
//! agent`; its "power" is a `command` switch whose script SIGKILLs both (off) and starts
//! them again on the same backing file (on: the reboot). Honest → 0 failures; lying →
//! failures; a host that never comes back → the cycle is recorded dead after the timeout.
//!
//! Needs root and /dev/fuse; without them each test prints why it was skipped (and fails
//! when PLUGPULL_REQUIRE_ALL_TESTS=1, as in CI): see `common::skip_unless`.

use crate::common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The host under test: its power script, configs and logs in one directory. Powered
/// off (everything killed, unmounted) on drop.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    /// `dead_after`: power-ons after which the host stays dark (None: always boots).
    fn new(profile: &str, dead_after: Option<u32>) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("mnt")).unwrap();
        let bin = common::bin();
        let dead = dead_after.map(|n| n.to_string()).unwrap_or("999999".into());
        let script = format!(
            r#"#!/bin/sh
# The host's power. off: SIGKILL the agent and the drive's daemon (a power cut);
# on: start the drive on the same backing file, then the agent (a reboot).
D={d}
case "$1" in
off)
  for p in agent sim; do
    [ -f $D/$p.pid ] && kill -9 $(cat $D/$p.pid) 2>/dev/null
    rm -f $D/$p.pid
  done
  umount $D/mnt 2>/dev/null || umount -l $D/mnt 2>/dev/null
  echo off > $D/power
  ;;
on)
  [ "$(cat $D/power 2>/dev/null)" = on ] && exit 0
  echo on > $D/power
  echo x >> $D/ons
  [ $(wc -l < $D/ons) -gt {dead} ] && exit 0   # the host that never comes back
  umount -l $D/mnt 2>/dev/null
  : > $D/sim.out
  {bin} simdrive $D/mnt --backing $D/backing.img --size 8M --profile {profile} --seed $(wc -l < $D/ons) > $D/sim.out 2>> $D/sim.err < /dev/null &
  echo $! > $D/sim.pid
  for i in $(seq 200); do grep -q ready $D/sim.out && break; sleep 0.05; done
  grep -q ready $D/sim.out || {{ echo "simdrive did not start" >&2; exit 1; }}
  {bin} agent --config $D/agent.toml >> $D/agent.log 2>&1 < /dev/null &
  echo $! > $D/agent.pid
  ;;
esac
"#,
            d = d.display()
        );
        std::fs::write(d.join("host.sh"), script).unwrap();
        Host { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn configs(&self, cycles: u64, boot_timeout: &str) -> PathBuf {
        self.configs_with(cycles, boot_timeout, common::free_port(), None)
    }

    /// The configs with the controller listening on `ap`; the agent reaches it at
    /// `agent_controller` (default: `ap` itself).
    fn configs_with(
        &self,
        cycles: u64,
        boot_timeout: &str,
        ap: u16,
        agent_controller: Option<u16>,
    ) -> PathBuf {
        let d = self.path();
        let wp = common::free_port();
        let cp = agent_controller.unwrap_or(ap);
        // The agent proves it holds the controller's key (a copy on its system disk).
        std::fs::write(d.join("agent.key"), "a test campaign's agent key\n").unwrap();
        std::fs::write(
            d.join("agent.toml"),
            format!(
                r#"controller = "127.0.0.1:{cp}"
witness = "127.0.0.1:{wp}"
state = "{d}/system-disk/agent-state.json"
controller_wait = "60s"
key_file = "{d}/agent.key"

[target]
path = "{d}/mnt/disk.img"
destroy_data = true
wait = "10s"
"#,
                d = d.display()
            ),
        )
        .unwrap();
        let cfg = d.join("campaign.toml");
        std::fs::write(
            &cfg,
            format!(
                r#"[campaign]
cycles = {cycles}
results = "results.jsonl"
delay = "20ms-100ms"
off = "100ms"
seed = 7
wait_timeout = "30s"

[target]
kind = "host"

[witness]
bind = "127.0.0.1:{wp}"

[agent]
listen = "127.0.0.1:{ap}"
boot_timeout = "{boot_timeout}"
key_file = "agent.key"

[power]
driver = "command"
scope = "host"
off = "sh {d}/host.sh off"
on = "sh {d}/host.sh on"
timeout = "20s"
"#,
                d = d.display()
            ),
        )
        .unwrap();
        cfg
    }

    /// Runs the controller to the end (bounded); returns exit code, summary, stderr.
    fn campaign(&self, cfg: &Path) -> (i32, Value, String) {
        let mut child = Command::new(common::bin())
            .args(["campaign", "--json", "--config"])
            .arg(cfg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(120) {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "controller did not finish: {}\nagent log:\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let s: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "summary is not JSON ({e}): {stdout}\n{stderr}\nagent log:\n{}",
                self.log()
            )
        });
        (out.status.code().unwrap(), s, stderr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("agent.log")).unwrap_or_default()
    }

    /// The agent's log once it holds `needle` (or after `within`): the agent runs on
    /// after the controller's last reply, writing its state file before it logs.
    fn log_once(&self, needle: &str, within: Duration) -> String {
        let t0 = Instant::now();
        loop {
            let log = self.log();
            if log.contains(needle) || t0.elapsed() > within {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn cycles(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path().join("results.jsonl"))
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg(self.path().join("host.sh"))
            .arg("off")
            .status();
    }
}

#[test]
fn honest_host_passes_every_cycle() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to run the simulated drive over FUSE",
    ) {
        return;
    }
    let h = Host::new("honest", None);
    let cfg = h.configs(3, "30s");
    let (code, s, err) = h.campaign(&cfg);
    assert_eq!(code, 0, "{err}\n{}", h.log());
    assert_eq!(s["cycles"], 3, "{s}");
    assert_eq!(s["passed"], 3, "{s}\n{err}\n{}", h.log());
    let cycles = h.cycles();
    let mut runs = std::collections::BTreeSet::new();
    for (i, c) in cycles.iter().enumerate() {
        assert_eq!(c["cycle"], i as u64 + 1);
        assert_eq!(c["verdict"], "PASS", "{c}");
        assert!(c["acked_records"].as_u64().unwrap() > 0, "{c}");
        assert!(c["cut"]["issued_ns"].as_u64().unwrap() > 0, "{c}");
        assert!(c["restore"]["issued_ns"].as_u64().unwrap() > 0, "{c}");
        assert!(c["reattach_ms"].as_f64().unwrap() > 0.0, "{c}");
        assert_eq!(c["writer_stopped"], "the host lost power");
        runs.insert(c["run_id"].as_str().unwrap().to_string());
    }
    assert_eq!(runs.len(), 3, "each cycle is its own run");
    // The agent booted four times (three reports, then "done") and verified each run.
    let log = h.log_once("nothing to write", Duration::from_secs(10));
    assert_eq!(log.matches("verifying run").count(), 3, "{log}");
    assert!(log.contains("nothing to write"), "{log}");
    // The state file lives on the "system disk" and no longer names a run.
    let st: Value = serde_json::from_str(
        &std::fs::read_to_string(h.path().join("system-disk/agent-state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(st["cycle"], 3);
    assert!(st["run_id"].is_null(), "{st}");
}

#[test]
fn lying_host_fails() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to run the simulated drive over FUSE",
    ) {
        return;
    }
    let h = Host::new("lying", None);
    let cfg = h.configs(3, "30s");
    let (code, s, err) = h.campaign(&cfg);
    assert_eq!(code, 1, "{err}\n{}", h.log());
    assert!(s["failed"].as_u64().unwrap() >= 2, "{s}\n{err}");
    assert_eq!(s["errors"], 0, "{s}\n{err}");
    for c in h.cycles().iter().filter(|c| c["verdict"] == "FAIL") {
        assert!(c["loss_window"]["records"].as_u64().unwrap() > 0, "{c}");
    }
}

/// A serial port as a QEMU guest's agent has it (virtio-serial, the lab): ONE upstream
/// connection to the controller, opened before the host boots and kept for the whole
/// test, and a local listener for the agent whose connections take turns on it, their
/// bytes back to back (the port cannot tell the controller a connection ended).
/// Returns the local port; the relay lives as long as the test process.
fn serial_port_relay(controller: u16) -> u16 {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::{Arc, Mutex};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let up = loop {
            match TcpStream::connect(("127.0.0.1", controller)) {
                Ok(s) => break s,
                Err(_) if t0.elapsed() < Duration::from_secs(30) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("the relay cannot reach the controller: {e}"),
            }
        };
        // Whatever comes up goes to the agent connection of the moment.
        let current: Arc<Mutex<Option<TcpStream>>> = Arc::default();
        let (mut up_r, cur) = (up.try_clone().unwrap(), current.clone());
        std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = up_r.read(&mut b) {
                if let Some(d) = cur.lock().unwrap().as_mut() {
                    let _ = d.write_all(&b[..n]);
                }
            }
        });
        let mut up_w = up;
        for d in l.incoming().flatten() {
            *current.lock().unwrap() = Some(d.try_clone().unwrap());
            let mut d = d;
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = d.read(&mut b) {
                up_w.write_all(&b[..n]).unwrap();
            }
            *current.lock().unwrap() = None;
        }
    });
    port
}

/// The real agent, every message of every boot through one pre-opened connection: the
/// controller answers each in order and the campaign runs as with a connection per
/// message.
#[test]
fn agents_sharing_one_preopened_connection_run_a_campaign() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to run the simulated drive over FUSE",
    ) {
        return;
    }
    let h = Host::new("honest", None);
    let ap = common::free_port();
    let relay = serial_port_relay(ap);
    let cfg = h.configs_with(2, "30s", ap, Some(relay));
    let (code, s, err) = h.campaign(&cfg);
    assert_eq!(code, 0, "{err}\n{}", h.log());
    assert_eq!(s["passed"], 2, "{s}\n{err}\n{}", h.log());
    assert!(!err.contains("dropping an agent connection"), "{err}");
    // Two reports and the final boot, plus two acking messages: all on one connection.
    assert_eq!(h.log().matches("verifying run").count(), 2, "{}", h.log());
}

#[test]
fn host_that_never_comes_back_is_marked_dead() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to run the simulated drive over FUSE",
    ) {
        return;
    }
    // Power-on 1 starts the campaign, 2 follows cycle 1's cut, 3 (after cycle 2) finds
    // nothing: the host stays dark.
    let h = Host::new("honest", Some(2));
    let cfg = h.configs(5, "3s");
    let (code, s, err) = h.campaign(&cfg);
    assert_eq!(code, 1, "{err}");
    assert_eq!(s["cycles"], 2, "{s}\n{err}");
    assert_eq!(s["passed"], 1, "{s}");
    assert_eq!(s["dead_device_cycles"], 1, "{s}");
    let c = &h.cycles()[1];
    assert_eq!(c["verdict"], "FAIL");
    assert!(
        c["dead_device"]
            .as_str()
            .unwrap()
            .contains("did not report within 3s"),
        "{c}"
    );
    assert!(err.contains("the host is gone"), "{err}");
    // The dead cycle's time, on the controller's clock, from its cut: never short of the
    // boot timeout (a host is not given up early), and far short of the 30 s
    // wait_timeout that a wait not restarted at the cut would run out on; the slack is
    // for a loaded machine's cut and power commands.
    let ms = c["cycle_ms"].as_f64().unwrap();
    assert!((3_000.0..15_000.0).contains(&ms), "{c}");
}

/// Proof of the cut and a ramp sweep in whole-host mode: a `command` switch with a `ramp`
/// command (a programmable supply) and a `trace` command (a script that reads the rail,
/// here the synthetic traces of tests/fixtures/fall-traces/). Cycle 1 is an ordinary cut
/// whose rail fell: PASS. Cycle 2 ramps over 5 ms and its rail stuck at 11.4 V: CUT NOT
/// PROVEN, never a PASS, and the campaign exits 3.
#[test]
fn whole_host_sweeps_fall_times_and_marks_unproven_cuts() {
    if !common::skip_unless(
        common::can_mount_fuse(),
        "needs root and /dev/fuse to run the simulated drive over FUSE",
    ) {
        return;
    }
    let h = Host::new("honest", None);
    let d = h.path();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fall-traces");
    // Each cut appends its fall time to `cuts`; the trace of the n-th cut is the fast
    // fall for odd n, the stuck rail for even n.
    std::fs::write(
        d.join("rig.sh"),
        format!(
            r#"#!/bin/sh
D={d}
case "$1" in
cut) echo "$2" >> $D/cuts; sh $D/host.sh off ;;
trace) if [ $(( $(wc -l < $D/cuts) % 2 )) = 1 ]; then cat {f}/12v-fast.trace; else cat {f}/12v-stuck.trace; fi ;;
esac
"#,
            d = d.display(),
            f = fixtures.display()
        ),
    )
    .unwrap();
    let cfg = h.configs(2, "30s");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text
        .replace("seed = 7\n", "seed = 7\nfall_times = [\"0ms\", \"5ms\"]\n")
        .replace(
            &format!("off = \"sh {}/host.sh off\"", d.display()),
            &format!(
                "off = \"sh {d}/rig.sh cut 0\"\nramp = \"sh {d}/rig.sh cut {{ms}}\"\ntrace = \"sh {d}/rig.sh trace\"",
                d = d.display()
            ),
        );
    std::fs::write(&cfg, text).unwrap();
    let (code, s, err) = h.campaign(&cfg);
    assert_eq!(code, 3, "{s}\n{err}\n{}", h.log());
    assert_eq!(s["cycles"], 2, "{s}\n{err}");
    assert_eq!(s["passed"], 1, "{s}\n{err}");
    assert_eq!(s["cut_not_proven"], 1, "{s}\n{err}");
    let groups = s["by_fall_time"].as_array().expect("by_fall_time");
    assert_eq!(groups.len(), 2, "{s}");
    assert_eq!(groups[1]["fall_time_ms"], 5.0, "{s}");
    assert_eq!(groups[1]["cut_not_proven"], 1, "{s}");
    let cycles = h.cycles();
    assert_eq!(cycles[0]["fall_time_ms"], 0.0, "{}", cycles[0]);
    assert_eq!(cycles[0]["verdict"], "PASS", "{}", cycles[0]);
    assert_eq!(cycles[0]["cut_proven"], true, "{}", cycles[0]);
    assert!(
        cycles[0]["fall"]["to_10_us"].as_f64().unwrap() > 0.0,
        "{}",
        cycles[0]
    );
    assert_eq!(cycles[1]["fall_time_ms"], 5.0, "{}", cycles[1]);
    assert_eq!(cycles[1]["cut_proven"], false, "{}", cycles[1]);
    assert_eq!(cycles[1]["verdict"], "INCONCLUSIVE", "{}", cycles[1]);
    assert_eq!(cycles[1]["verify_verdict"], "PASS", "{}", cycles[1]);
    assert!(
        cycles[1]["summary"]
            .as_str()
            .unwrap()
            .starts_with("cut not proven: rail 1 fell only to 11.40 V"),
        "{}",
        cycles[1]
    );
    // The ramp command got the fall time: cycle 1 cut at once, cycle 2 over 5 ms.
    let cuts = std::fs::read_to_string(d.join("cuts")).unwrap();
    assert_eq!(
        cuts.lines().take(2).collect::<Vec<_>>(),
        ["0", "5"],
        "{cuts}"
    );
}

/// A whole-host switch that cannot ramp is refused when the campaign starts, naming the
/// switch and what can ramp.
#[test]
fn whole_host_fall_times_need_a_switch_that_ramps() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[campaign]\ncycles = 1\nresults = \"r.jsonl\"\nfall_times = [\"0ms\", \"10ms\"]\n\
         [target]\nkind = \"host\"\n[witness]\nbind = \"127.0.0.1:0\"\n\
         [agent]\nlisten = \"127.0.0.1:0\"\n\
         [power]\ndriver = \"command\"\nscope = \"host\"\noff = \"true\"\non = \"true\"\n",
    )
    .unwrap();
    let out = Command::new(common::bin())
        .args(["campaign", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot ramp a rail down"), "{err}");
    assert!(err.contains("power.ramp"), "{err}");
}

#[test]
fn host_examples_parse_and_wrong_switches_are_refused() {
    use plugpull::campaign::agent::AgentConfig;
    use plugpull::campaign::config::Settings;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = Settings::load(&root.join("hardware/examples/host-shelly.toml")).unwrap();
    assert_eq!(s.file.target.kind, "host");
    assert_eq!(s.boot_timeout, Duration::from_secs(600));
    let a = AgentConfig::load(&root.join("hardware/systemd/agent.toml.example")).unwrap();
    assert_eq!(a.controller, "192.168.1.10:7421");

    let base = "[campaign]\ncycles = 1\nresults = \"r.jsonl\"\n[target]\nkind = \"host\"\n";
    let e = Settings::parse(
        &format!("{base}[power]\ndriver = \"simdrive\"\n"),
        Path::new("."),
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("cuts a whole host"), "{e:#}");
    let e = Settings::parse(
        &format!(
            "{base}[power]\ndriver = \"command\"\nscope = \"drive\"\noff = \"x\"\non = \"y\"\n"
        ),
        Path::new("."),
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("power.scope = \"host\""), "{e:#}");

    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("agent.toml");
    std::fs::write(
        &p,
        "controller = \"a:1\"\nwitness = \"b:2\"\nstate = \"s\"\n[target]\n",
    )
    .unwrap();
    let e = AgentConfig::load(&p).unwrap_err();
    assert!(format!("{e:#}").contains("exactly one of serial"), "{e:#}");
}

#[test]
fn agent_state_survives_as_whole_file() {
    use plugpull::campaign::agent::{AgentState, STATE_FORMAT, read_state, write_state};
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("var/lib/plugpull/agent-state.json");
    assert!(read_state(&p).unwrap().is_none());
    let s = AgentState {
        format: STATE_FORMAT.into(),
        cycle: 4,
        run_id: Some("00112233445566778899aabbccddeeff".into()),
        witness: "w:1".into(),
        target: "/dev/x".into(),
        started_at: "now".into(),
        unsafe_shutdowns_before: Some(9),
        health_before: None,
    };
    write_state(&p, &s).unwrap();
    let back = read_state(&p).unwrap().unwrap();
    assert_eq!(back.cycle, 4);
    assert_eq!(back.run_id, s.run_id);
    assert!(!p.with_extension("tmp").exists());
    std::fs::write(&p, "{torn").unwrap();
    let e = read_state(&p).unwrap_err();
    assert!(
        format!("{e:#}").contains("remove it to start afresh"),
        "{e:#}"
    );
}

#[test]
fn agent_state_tmp_symlink_to_a_users_file_is_not_followed() {
    use plugpull::campaign::agent::{AgentState, STATE_FORMAT, read_state, write_state};
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("agent-state.json");
    let victim = d.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    // The fixed temporary name an older build used, planted as a link.
    std::os::unix::fs::symlink(&victim, p.with_extension("tmp")).unwrap();
    let s = AgentState {
        format: STATE_FORMAT.into(),
        cycle: 1,
        run_id: None,
        witness: "w:1".into(),
        target: "/dev/x".into(),
        started_at: "now".into(),
        unsafe_shutdowns_before: None,
        health_before: None,
    };
    let _ = write_state(&p, &s);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(read_state(&p).unwrap().unwrap().cycle, 1);
    // The state file itself as a link: refused, the file it names untouched.
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink(&victim, &p).unwrap();
    let e = write_state(&p, &s).unwrap_err();
    assert!(format!("{e}").contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}
