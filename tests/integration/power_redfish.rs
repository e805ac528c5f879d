//! The Redfish driver against a real emulator run locally: sushy-tools'
//! `sushy-emulator --fake` (PyPI) over HTTPS with a certificate made here by openssl and
//! Basic authentication from an htpasswd file (bcrypt, apache2-utils' htpasswd). Off,
//! on, the state read back (and read again by Python's urllib, not by the code under
//! test); the self-signed certificate refused by default and when another one is pinned,
//! taken when pinned with `ca_file` or with `tls_insecure_accept_any_certificate`; a
//! reset type the system does not allow (PowerCycle) refused before anything is sent; a
//! wrong password; a BMC with two systems.
//!
//! What the emulator cannot show (it has no SessionService, and its fake driver has no
//! PowerCycle) and hostile replies are shown by a small Python BMC over HTTPS
//! (tests/fixtures/redfish-fake-bmc.py).

use crate::common;

use plugpull::power::http_auth::Login;
use plugpull::power::http_client::Trust;
use plugpull::power::redfish::{RedfishAuth, RedfishSettings, RedfishSwitch};
use plugpull::power::switch::Scope;
use plugpull::power::{PowerConfig, PowerSwitch};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const FAKE_BMC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/redfish-fake-bmc.py"
);
/// The emulator's systems (its fake driver's config), their power state at start.
const SYSTEM_A: &str = "8cbd2c4e-3a4f-4e8f-9d0c-1a2b3c4d5e6f";
const SYSTEM_B: &str = "0f1e2d3c-4b5a-4968-8776-655443322110";

/// A server process on a loopback port, killed when dropped, with its files.
struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }
    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed certificate for 127.0.0.1 in `dir`: `{name}.pem`, `{name}-key.pem`.
/// CA:FALSE: a certificate that is its own trust anchor must not claim to be a CA, or
/// webpki refuses it as an end entity.
fn certificate(dir: &Path, name: &str) {
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=bmc.test",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(dir.join(format!("{name}-key.pem")))
        .arg("-out")
        .arg(dir.join(format!("{name}.pem"))));
}

fn wait_listening(s: &Server, what: &str, log: &str) {
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", s.port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what} did not listen: {}",
            s.log(log)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn have_openssl() -> bool {
    Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// sushy-emulator with its fake driver, HTTPS and Basic authentication (admin/secret);
/// `systems` are the fake systems' ids, each starting Off.
fn sushy(systems: &[&str]) -> Option<Server> {
    if !common::skip_unless(
        common::have_tool("sushy-emulator")
            && have_openssl()
            && Command::new("htpasswd")
                .arg("-h")
                .stderr(Stdio::null())
                .status()
                .is_ok(),
        "needs sushy-tools (pip install sushy-tools==2.2.0), openssl and htpasswd (apache2-utils)",
    ) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificate(d, "cert");
    run(Command::new("htpasswd")
        .args(["-bBc"])
        .arg(d.join("htpasswd"))
        .args(["admin", "secret"]));
    let fake: Vec<String> = systems
        .iter()
        .enumerate()
        .map(|(i, id)| {
            format!(
                "{{'uuid': '{id}', 'name': 'fake{i}', 'power_state': 'Off', \
                 'external_notifier': False, 'nics': []}}"
            )
        })
        .collect();
    // Its own state directory: the fake driver keeps its systems in an sqlite file,
    // shared through /tmp by every emulator on the machine otherwise.
    std::fs::write(
        d.join("sushy.conf"),
        format!(
            "SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_STATE_DIR = '{}'\n\
             SUSHY_EMULATOR_FAKE_SYSTEMS = [{}]\n",
            d.join("htpasswd").display(),
            d.join("state").display(),
            fake.join(", ")
        ),
    )
    .unwrap();
    let port = common::free_port();
    let child = Command::new("sushy-emulator")
        .args(["--fake", "-i", "127.0.0.1", "-p", &port.to_string()])
        .arg("--ssl-certificate")
        .arg(d.join("cert.pem"))
        .arg("--ssl-key")
        .arg(d.join("cert-key.pem"))
        .arg("--config")
        .arg(d.join("sushy.conf"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("sushy.log")).unwrap())
        .spawn()
        .expect("sushy-emulator");
    let s = Server { child, port, dir };
    wait_listening(&s, "sushy-emulator", "sushy.log");
    Some(s)
}

/// The Python BMC (tests/fixtures/redfish-fake-bmc.py) in `mode`, with its own
/// certificate; it starts On and speaks only sessions (admin/secret).
fn fake_bmc(mode: &str) -> Option<Server> {
    if !common::skip_unless(
        common::have_tool("python3") && have_openssl(),
        "needs python3 and openssl",
    ) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    certificate(d, "cert");
    let port = common::free_port();
    let child = Command::new("python3")
        .arg(FAKE_BMC)
        .arg(port.to_string())
        .arg(d.join("cert.pem"))
        .arg(d.join("cert-key.pem"))
        .arg(d.join("requests.log"))
        .arg(mode)
        .stderr(std::fs::File::create(d.join("stderr.log")).unwrap())
        .spawn()
        .expect("python3");
    let s = Server { child, port, dir };
    wait_listening(&s, "the fake BMC", "stderr.log");
    Some(s)
}

/// The driver from a `[power]` table with `extra` lines, as a campaign makes it.
fn redfish(s: &Server, extra: &str, password: &str) -> Box<dyn PowerSwitch> {
    let text = format!(
        "[power]\ndriver = \"redfish\"\nhost = \"127.0.0.1:{}\"\nuser = \"admin\"\n\
         password = \"{password}\"\ntimeout = \"10s\"\nconfirm_timeout = \"20s\"\n{extra}\n",
        s.port
    );
    let t: toml::Table = toml::from_str(&text).unwrap();
    let cfg: PowerConfig = t["power"].clone().try_into().unwrap();
    cfg.build(None).unwrap()
}

fn pinned(s: &Server) -> String {
    format!("ca_file = \"{}\"", s.cert().display())
}

/// The driver through its Rust settings (what the config has no key for: PowerCycle).
fn settings(s: &Server, auth: RedfishAuth) -> RedfishSettings {
    RedfishSettings {
        host: format!("127.0.0.1:{}", s.port),
        system: None,
        login: Login {
            user: "admin".into(),
            password: "secret".into(),
        },
        auth,
        trust: Trust::CaFile(s.cert()),
        pulse_with_power_cycle: true,
        timeout: Duration::from_secs(10),
        confirm_timeout: Duration::from_secs(20),
        scope: Scope::Host,
    }
}

/// PowerState of `system` as Python's urllib reads it from the emulator (certificate
/// checked against the emulator's own): a witness that is not the code under test.
fn power_state_seen_by_python(s: &Server, system: &str) -> String {
    let script = "import base64, json, ssl, sys, urllib.request as u\n\
                  ctx = ssl.create_default_context(cafile=sys.argv[2])\n\
                  auth = 'Basic ' + base64.b64encode(b'admin:secret').decode()\n\
                  r = u.Request(sys.argv[1], headers={'Authorization': auth})\n\
                  print(json.load(u.urlopen(r, context=ctx))['PowerState'])\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(format!(
            "https://127.0.0.1:{}/redfish/v1/Systems/{system}",
            s.port
        ))
        .arg(s.cert())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The emulator's request log lines that post a reset.
fn resets_posted(s: &Server) -> usize {
    s.log("sushy.log")
        .lines()
        .filter(|l| l.contains("POST") && l.contains("ComputerSystem.Reset"))
        .count()
}

#[test]
fn redfish_cuts_and_restores_a_system_and_reads_its_state_back() {
    let Some(s) = sushy(&[SYSTEM_A]) else { return };
    let mut bmc = redfish(&s, &pinned(&s), "secret");
    assert!(bmc.capabilities().reports_state);
    assert!(!bmc.capabilities().native_pulse);
    assert_eq!(bmc.capabilities().scope, Scope::Host);
    // The fake system starts Off; the emulator applies a reset 1 to 11 s after it
    // answered 204, so each state below was polled for, not assumed from the 204.
    assert_eq!(bmc.state().unwrap(), Some(false));
    let on = bmc.on().unwrap();
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_A), "On");
    assert!(on.done_ns > on.issued_ns);
    assert_eq!(bmc.state().unwrap(), Some(true));
    let off = bmc.off().unwrap();
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_A), "Off");
    assert_eq!(bmc.state().unwrap(), Some(false));
    assert!(off.issued_ns > on.done_ns && off.done_ns > off.issued_ns);
    bmc.on().unwrap();
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_A), "On");
    assert_eq!(resets_posted(&s), 3, "{}", s.log("sushy.log"));

    // Any certificate, when the config says so in as many words.
    let mut any = redfish(&s, "tls_insecure_accept_any_certificate = true", "secret");
    assert_eq!(any.state().unwrap(), Some(true));
}

#[test]
fn redfish_refuses_a_self_signed_certificate_unless_it_is_pinned() {
    let Some(s) = sushy(&[SYSTEM_A]) else { return };
    let e = format!("{:#}", redfish(&s, "", "secret").state().unwrap_err());
    assert!(
        e.contains("TLS certificate of 127.0.0.1")
            && e.contains("power.ca_file")
            && e.contains("tls_insecure_accept_any_certificate"),
        "{e}"
    );
    // Another certificate pinned (same name, same address, other key) is refused too.
    certificate(s.dir.path(), "other");
    let other = format!("ca_file = \"{}\"", s.dir.path().join("other.pem").display());
    let e = format!("{:#}", redfish(&s, &other, "secret").state().unwrap_err());
    assert!(e.contains("TLS certificate of 127.0.0.1"), "{e}");
    // A ca_file without a certificate in it is said so.
    let empty = s.dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let t: toml::Table = toml::from_str(&format!(
        "[power]\ndriver = \"redfish\"\nhost = \"127.0.0.1:{}\"\nuser = \"a\"\npassword = \"b\"\n\
         ca_file = \"{}\"\n",
        s.port,
        empty.display()
    ))
    .unwrap();
    let cfg: PowerConfig = t["power"].clone().try_into().unwrap();
    let e = format!("{:#}", cfg.build(None).err().unwrap());
    assert!(
        e.contains("empty.pem") && e.contains("BEGIN CERTIFICATE"),
        "{e}"
    );
    assert_eq!(resets_posted(&s), 0);
}

#[test]
fn redfish_refuses_a_reset_type_the_system_does_not_allow_and_a_wrong_password() {
    let Some(s) = sushy(&[SYSTEM_A]) else { return };
    let mut bmc = RedfishSwitch::new(settings(&s, RedfishAuth::Basic)).unwrap();
    assert!(bmc.capabilities().native_pulse);
    let e = format!("{:#}", bmc.pulse(Duration::from_secs(1)).unwrap_err());
    assert!(
        e.contains("does not allow ResetType PowerCycle")
            && e.contains("ForceOff")
            && e.contains(&format!("/redfish/v1/Systems/{SYSTEM_A}"))
            && e.contains("nothing was sent"),
        "{e}"
    );
    assert_eq!(resets_posted(&s), 0, "{}", s.log("sushy.log"));
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_A), "Off");

    let mut bad = redfish(&s, &pinned(&s), "wrong");
    let e = format!("{:#}", bad.off().unwrap_err());
    assert!(
        e.contains("refused user 'admin'")
            && e.contains("Basic")
            && e.contains("401")
            && e.contains("power.password"),
        "{e}"
    );
    assert_eq!(resets_posted(&s), 0);
}

#[test]
fn redfish_on_a_bmc_with_two_systems_cuts_the_one_named() {
    let Some(s) = sushy(&[SYSTEM_A, SYSTEM_B]) else {
        return;
    };
    let e = format!(
        "{:#}",
        redfish(&s, &pinned(&s), "secret").off().unwrap_err()
    );
    assert!(
        e.contains("several systems")
            && e.contains(SYSTEM_A)
            && e.contains(SYSTEM_B)
            && e.contains("power.system"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        redfish(&s, &format!("{}\nsystem = \"nope\"", pinned(&s)), "secret")
            .off()
            .unwrap_err()
    );
    assert!(
        e.contains("no system 'nope'") && e.contains(SYSTEM_B),
        "{e}"
    );
    assert_eq!(resets_posted(&s), 0);

    let mut b = redfish(
        &s,
        &format!("{}\nsystem = \"{SYSTEM_B}\"", pinned(&s)),
        "secret",
    );
    b.on().unwrap();
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_B), "On");
    assert_eq!(power_state_seen_by_python(&s, SYSTEM_A), "Off");
    assert!(b.describe().contains(SYSTEM_B), "{}", b.describe());
}

/// Two trust settings at once are a contradiction, and an unknown login kind is named,
/// when the table is read.
#[test]
fn redfish_takes_one_trust_setting_and_a_known_login() {
    for (extra, want) in [
        (
            "ca_file = \"bmc.pem\"\ntls_insecure_accept_any_certificate = true",
            "contradict",
        ),
        ("auth = \"digest\"", "power.auth 'digest' is unknown"),
    ] {
        let t: toml::Table = toml::from_str(&format!(
            "[power]\ndriver = \"redfish\"\nhost = \"bmc\"\nuser = \"u\"\npassword = \"p\"\n{extra}\n"
        ))
        .unwrap();
        let cfg: PowerConfig = t["power"].clone().try_into().unwrap();
        let e = format!("{:#}", cfg.build(None).err().unwrap());
        assert!(e.contains(want), "{e}");
    }
}

fn requests(s: &Server) -> Vec<String> {
    s.log("requests.log").lines().map(str::to_string).collect()
}

#[test]
fn redfish_session_login_is_made_used_and_deleted() {
    let Some(s) = fake_bmc("normal") else { return };
    {
        let mut bmc = redfish(&s, &format!("{}\nauth = \"session\"", pinned(&s)), "secret");
        bmc.off().unwrap();
        assert_eq!(bmc.state().unwrap(), Some(false));
        bmc.on().unwrap();
        assert_eq!(bmc.state().unwrap(), Some(true));
    }
    let lines = requests(&s);
    let seen = lines.join("\n");
    assert_eq!(
        lines.first().map(String::as_str),
        Some("POST /redfish/v1/SessionService/Sessions -"),
        "{seen}"
    );
    assert!(
        lines[1..].iter().all(|l| l.ends_with(" tok1")),
        "every request after the login carries its token: {seen}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("ComputerSystem.Reset"))
            .count(),
        2,
        "{seen}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("DELETE /redfish/v1/SessionService/Sessions/tok1 tok1"),
        "the session is deleted when the driver is dropped: {seen}"
    );

    let e = format!(
        "{:#}",
        redfish(&s, &format!("{}\nauth = \"session\"", pinned(&s)), "wrong")
            .state()
            .unwrap_err()
    );
    assert!(
        e.contains("401") && e.contains("Redfish session") && e.contains("power.password"),
        "{e}"
    );
}

/// The BMC expires the session after three requests: it is made again, once, and the
/// exchange that was refused is sent again with the new token.
#[test]
fn redfish_session_expired_by_the_bmc_is_made_again() {
    let Some(s) = fake_bmc("expire") else { return };
    {
        let mut bmc = redfish(&s, &format!("{}\nauth = \"session\"", pinned(&s)), "secret");
        bmc.off().unwrap();
        assert_eq!(bmc.state().unwrap(), Some(false));
    }
    let lines = requests(&s);
    let seen = lines.join("\n");
    let logins: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("POST /redfish/v1/SessionService/Sessions "))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(logins.len(), 2, "{seen}");
    // The refused request (tok1), the login, the same request again with tok2.
    let refused = &lines[logins[1] - 1];
    assert!(refused.ends_with(" tok1"), "{seen}");
    let again = &lines[logins[1] + 1];
    assert_eq!(
        again.trim_end_matches(" tok2"),
        refused.trim_end_matches(" tok1"),
        "{seen}"
    );
    assert_eq!(
        lines.last().map(String::as_str),
        Some("DELETE /redfish/v1/SessionService/Sessions/tok2 tok2"),
        "{seen}"
    );
}

/// PowerCycle where the system allows it: the off is proven by PowerState leaving On,
/// the on by it coming back (the fake BMC holds Off for 1.5 s).
#[test]
fn redfish_power_cycle_is_confirmed_off_then_on() {
    let Some(s) = fake_bmc("normal") else { return };
    let mut bmc = RedfishSwitch::new(settings(&s, RedfishAuth::Session)).unwrap();
    let (off, on) = bmc.pulse(Duration::from_secs(1)).unwrap();
    assert!(off.done_ns >= off.issued_ns && on.done_ns > off.done_ns);
    let dark = Duration::from_nanos(on.done_ns - off.done_ns);
    assert!(dark >= Duration::from_millis(1000), "{dark:?}");
    assert_eq!(bmc.state().unwrap(), Some(true));
    let resets = requests(&s)
        .iter()
        .filter(|l| l.contains("ComputerSystem.Reset"))
        .count();
    assert_eq!(resets, 1, "one PowerCycle, not an off and an on");
}

/// Hostile replies from the system collection, each a clear error within the timeout.
#[test]
fn redfish_hostile_replies_are_clear_errors() {
    for (mode, want) in [
        ("html", vec!["did not answer JSON", "<!DOCTYPE html>"]),
        (
            "redirect",
            vec!["answered 302", "elsewhere.invalid", "does not follow"],
        ),
        ("huge", vec!["passes 65536 bytes"]),
        ("slow", vec!["did not answer within 2s"]),
    ] {
        let Some(s) = fake_bmc(mode) else { return };
        let mut set = settings(&s, RedfishAuth::Session);
        set.timeout = Duration::from_secs(2);
        let mut bmc = RedfishSwitch::new(set).unwrap();
        let t0 = Instant::now();
        let e = format!("{:#}", bmc.off().unwrap_err());
        assert!(want.iter().all(|w| e.contains(w)), "{mode}: {e}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{mode}: {:?}",
            t0.elapsed()
        );
        let lines = requests(&s);
        assert!(
            !lines.iter().any(|l| l.contains("ComputerSystem.Reset")),
            "{mode}: {lines:?}"
        );
    }
}

/// The example campaign loads with its `ca_file` taken relative to the campaign file,
/// and the same `[power]` in a drive-only campaign is refused: the BMC cuts the host.
#[test]
fn a_redfish_campaign_is_whole_host_and_its_ca_file_is_beside_it() {
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/hardware/examples/redfish.toml"
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let host = dir.path().join("host.toml");
    std::fs::write(&host, &example).unwrap();
    let s = plugpull::campaign::config::Settings::load(&host).unwrap();
    match &s.file.power {
        PowerConfig::Redfish { ca_file, .. } => {
            assert_eq!(
                ca_file.as_deref(),
                Some(dir.path().join("bmc.pem").as_path())
            )
        }
        other => panic!("{other:?}"),
    }
    let drive = dir.path().join("drive.toml");
    std::fs::write(
        &drive,
        example.replace(
            "[target]\nkind = \"host\"",
            "[target]\nkind = \"device\"\nserial = \"S4EVNX0N123456\"",
        ),
    )
    .unwrap();
    let err = plugpull::campaign::config::Settings::load(&drive).unwrap_err();
    let mut e = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        e += &format!(": {c}");
        cause = c.source();
    }
    assert!(
        e.contains("drive.toml") && e.contains("redfish cuts the whole host"),
        "{e}"
    );
}
