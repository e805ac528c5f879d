//! Each power driver against a stand-in for its switch: `command` against a shell script,
//! `http` against a local server implementing the Shelly Gen1, Gen2 and Tasmota
//! endpoints, `serial` against a pseudo-terminal speaking the firmware protocol and the
//! CH340 frames. Plus the TOML `[power]` table for every driver.

use plugpull::power::http::{Flavor, HttpSwitch};
use plugpull::power::serial::{Protocol, SerialSwitch};
use plugpull::power::{PowerConfig, PowerSwitch, Scope, command::CommandSwitch};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn command_driver_runs_the_script_and_reads_state() {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join("state");
    let script = d.path().join("relay.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n off) echo off > {s};;\n on) echo on > {s};;\n state) cat {s};;\n *) echo \"bad arg\" >&2; exit 3;;\nesac\n",
            s = state.display()
        ),
    )
    .unwrap();
    let sh = |a: &str| format!("sh {} {a}", script.display());
    let mut sw = CommandSwitch {
        off: sh("off"),
        on: sh("on"),
        state: Some(sh("state")),
        timeout: Duration::from_secs(5),
        scope: Scope::Drive,
        trace: None,
        ramp: None,
        ramp_ms: 0,
    };
    let off = sw.off().unwrap();
    assert!(off.done_ns >= off.issued_ns && off.issued_ns > 0);
    assert_eq!(sw.state().unwrap(), Some(false));
    sw.on().unwrap();
    assert_eq!(sw.state().unwrap(), Some(true));
    assert!(sw.capabilities().reports_state);

    // A failing command says what failed, with its stderr.
    let mut bad = CommandSwitch {
        off: sh("explode"),
        on: sh("on"),
        state: None,
        timeout: Duration::from_secs(5),
        scope: Scope::Drive,
        trace: None,
        ramp: None,
        ramp_ms: 0,
    };
    let e = format!("{:#}", bad.off().unwrap_err());
    assert!(e.contains("bad arg") && e.contains("explode"), "{e}");
    assert_eq!(bad.state().unwrap(), None);

    // A hung command is killed at the timeout, and the error says so.
    let mut hung = CommandSwitch {
        off: "sleep 60".into(),
        on: "true".into(),
        state: None,
        timeout: Duration::from_millis(300),
        scope: Scope::Drive,
        trace: None,
        ramp: None,
        ramp_ms: 0,
    };
    let t0 = Instant::now();
    let e = format!("{:#}", hung.off().unwrap_err());
    assert!(
        e.starts_with("`sleep 60` did not finish within 300ms and was killed"),
        "{e}"
    );
    // Killed, not waited for: an error raised only once the command ends, or a kill that
    // leaves `sleep` holding the pipes open, takes the command's 60 s. 20 s is a third of
    // that and far above the 300 ms timeout on any load.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

/// `power.ramp`: a fall time other than zero makes the next cuts run the ramp command
/// with `{ms}` filled in; zero goes back to `off`; a switch without `ramp` refuses.
#[test]
fn a_command_switch_ramps_with_its_ramp_command() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("log");
    let mut sw = CommandSwitch {
        off: format!("echo off >> {}", log.display()),
        on: "true".into(),
        state: None,
        timeout: Duration::from_secs(5),
        scope: Scope::Host,
        trace: None,
        ramp: Some(format!("echo ramp {{ms}} >> {}", log.display())),
        ramp_ms: 0,
    };
    assert!(sw.capabilities().ramp);
    sw.off().unwrap();
    sw.set_fall_time(Duration::from_millis(250)).unwrap();
    sw.off().unwrap();
    sw.set_fall_time(Duration::from_micros(300)).unwrap();
    sw.off().unwrap();
    sw.set_fall_time(Duration::ZERO).unwrap();
    sw.off().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        ["off", "ramp 250", "ramp 1", "off"]
    );
    sw.ramp = None;
    assert!(!sw.capabilities().ramp);
    let e = sw.set_fall_time(Duration::from_millis(10)).unwrap_err();
    assert!(e.to_string().contains("power.ramp"), "{e}");
    sw.set_fall_time(Duration::ZERO).unwrap();
}

#[test]
fn a_command_switch_reports_the_fall_its_trace_command_prints() {
    let mut sw = CommandSwitch {
        off: "true".into(),
        on: "true".into(),
        state: None,
        timeout: Duration::from_secs(5),
        scope: Scope::Drive,
        trace: Some(
            "echo scope says:; echo 'TRACE 1 hz=10000 nominal_mv=5000 off=1 mv=5000,2000,400,0'"
                .into(),
        ),
        ramp: None,
        ramp_ms: 0,
    };
    assert!(sw.capabilities().fall_trace);
    sw.off().unwrap();
    let t = sw.last_fall().unwrap().unwrap();
    assert_eq!((t.nominal_mv, t.samples_mv.len()), (5000, 4));
    sw.trace = Some("echo nothing".into());
    let e = sw.last_fall().unwrap_err();
    let why = std::error::Error::source(&e).unwrap().to_string();
    assert!(
        e.to_string().contains("echo nothing") && why.contains("TRACE"),
        "{e}: {why}"
    );
}

/// A switch on loopback that speaks the Shelly Gen1, Gen2 and Tasmota APIs.
struct FakePlug {
    addr: String,
    on: Arc<Mutex<bool>>,
    requests: Arc<Mutex<Vec<String>>>,
}

fn fake_plug(user_pass_b64: Option<&'static str>) -> FakePlug {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let on = Arc::new(Mutex::new(true));
    let requests = Arc::new(Mutex::new(vec![]));
    let (on2, req2) = (on.clone(), requests.clone());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let mut auth_ok = user_pass_b64.is_none();
            let mut len = 0usize;
            loop {
                let mut h = String::new();
                r.read_line(&mut h).unwrap();
                if h.trim().is_empty() {
                    break;
                }
                if let Some(b) = user_pass_b64 {
                    // Header names are case-insensitive (ureq sends them lowercase).
                    let (name, value) = h.trim().split_once(':').unwrap_or(("", ""));
                    if name.eq_ignore_ascii_case("authorization")
                        && value.trim() == format!("Basic {b}")
                    {
                        auth_ok = true;
                    }
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0u8; len];
            r.read_exact(&mut body).unwrap();
            let mut parts = line.split_whitespace();
            let (method, path) = (
                parts.next().unwrap().to_string(),
                parts.next().unwrap().to_string(),
            );
            req2.lock().unwrap().push(format!(
                "{method} {path} {}",
                String::from_utf8_lossy(&body)
            ));
            let (status, reply) = if !auth_ok {
                (401, String::from("{}"))
            } else {
                let mut st = on2.lock().unwrap();
                match path.as_str() {
                    "/relay/0?turn=off" => {
                        *st = false;
                        (200, format!("{{\"ison\":{}}}", *st))
                    }
                    "/relay/0?turn=on" => {
                        *st = true;
                        (200, format!("{{\"ison\":{}}}", *st))
                    }
                    "/relay/0" => (200, format!("{{\"ison\":{}}}", *st)),
                    "/rpc/Switch.Set?id=0&on=false" => {
                        let was = *st;
                        *st = false;
                        (200, format!("{{\"was_on\":{was}}}"))
                    }
                    "/rpc/Switch.Set?id=0&on=true" => {
                        let was = *st;
                        *st = true;
                        (200, format!("{{\"was_on\":{was}}}"))
                    }
                    "/rpc/Switch.GetStatus?id=0" => {
                        (200, format!("{{\"id\":0,\"output\":{}}}", *st))
                    }
                    "/cm?cmnd=Power%20Off" => {
                        *st = false;
                        (200, "{\"POWER\":\"OFF\"}".into())
                    }
                    "/cm?cmnd=Power%20On" => {
                        *st = true;
                        (200, "{\"POWER\":\"ON\"}".into())
                    }
                    "/cm?cmnd=Power" => (
                        200,
                        format!("{{\"POWER\":\"{}\"}}", if *st { "ON" } else { "OFF" }),
                    ),
                    "/stuck?turn=off" => (200, "{\"ison\":true}".into()),
                    "/generic" if method == "POST" => {
                        *st = String::from_utf8_lossy(&body).contains("\"on\":true");
                        (200, "ok".into())
                    }
                    _ => (404, "not found".into()),
                }
            };
            let challenge = if status == 401 {
                "WWW-Authenticate: Basic realm=\"plug\"\r\n"
            } else {
                ""
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\n{challenge}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    FakePlug { addr, on, requests }
}

fn http(flavor: Flavor, addr: &str) -> HttpSwitch {
    let mut sw = HttpSwitch::new(flavor, addr, Scope::Host);
    sw.timeout = Duration::from_secs(5);
    sw
}

#[test]
fn http_driver_speaks_shelly_gen1_gen2_and_tasmota() {
    for flavor in [Flavor::ShellyGen1, Flavor::ShellyGen2, Flavor::Tasmota] {
        let plug = fake_plug(None);
        let mut sw = http(flavor.clone(), &plug.addr);
        assert_eq!(sw.state().unwrap(), Some(true), "{flavor:?}");
        sw.off().unwrap();
        assert!(!*plug.on.lock().unwrap(), "{flavor:?}");
        assert_eq!(sw.state().unwrap(), Some(false));
        sw.on().unwrap();
        assert!(*plug.on.lock().unwrap());
        assert_eq!(sw.state().unwrap(), Some(true));
        let reqs = plug.requests.lock().unwrap().clone();
        let expect_off = match flavor {
            Flavor::ShellyGen1 => "GET /relay/0?turn=off",
            Flavor::ShellyGen2 => "GET /rpc/Switch.Set?id=0&on=false",
            _ => "GET /cm?cmnd=Power%20Off",
        };
        assert!(reqs.iter().any(|r| r.starts_with(expect_off)), "{reqs:?}");
    }
}

#[test]
fn http_driver_generic_post_auth_and_errors() {
    let plug = fake_plug(None);
    let mut sw = http(
        Flavor::Generic {
            off: "POST /generic".into(),
            on: "POST /generic".into(),
            body_off: Some("{\"on\":false}".into()),
            body_on: Some("{\"on\":true}".into()),
        },
        &plug.addr,
    );
    sw.off().unwrap();
    assert!(!*plug.on.lock().unwrap());
    sw.on().unwrap();
    assert!(*plug.on.lock().unwrap());
    assert_eq!(sw.state().unwrap(), None);

    // A request the switch does not know: the status and body are in the error.
    let mut stuck = http(
        Flavor::Generic {
            off: "GET /nothing".into(),
            on: "GET /nothing".into(),
            body_off: None,
            body_on: None,
        },
        &plug.addr,
    );
    let e = format!("{:#}", stuck.off().unwrap_err());
    assert!(e.contains("404"), "{e}");

    // Basic auth: refused without, accepted with.
    let locked = fake_plug(Some("YWRtaW46c2VjcmV0"));
    let mut sw = http(Flavor::ShellyGen1, &locked.addr);
    let e = format!("{:#}", sw.off().unwrap_err());
    assert!(e.contains("power.user"), "{e}");
    sw.auth = Some(("admin".into(), "secret".into()));
    sw.off().unwrap();
    assert!(!*locked.on.lock().unwrap());

    // Nobody listening: a clear error, quickly.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut gone = http(Flavor::Tasmota, &format!("127.0.0.1:{port}"));
    let e = format!("{:#}", gone.off().unwrap_err());
    assert!(e.contains("is it on the network"), "{e}");
}

/// A pseudo-terminal: (master, slave path).
fn pty() -> (std::fs::File, String) {
    let (mut m, mut s) = (0, 0);
    // SAFETY: openpty fills two fds; name, termios and winsize pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // ttyname_r, not ttyname: tests run in parallel and ttyname's static buffer is shared,
    // so a test could be handed another test's slave.
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: ttyname_r writes a NUL-terminated name of at most buf.len() bytes into buf.
    let rc = unsafe { libc::ttyname_r(s, buf.as_mut_ptr(), buf.len()) };
    assert_eq!(
        rc,
        0,
        "ttyname_r: {}",
        std::io::Error::from_raw_os_error(rc)
    );
    // SAFETY: ttyname_r succeeded, so buf holds a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    // Keep the slave open in the test so the master does not see a hang-up between opens.
    std::mem::forget(unsafe { OwnedFd::from_raw_fd(s) });
    // SAFETY: m is a fresh fd we own.
    (unsafe { std::fs::File::from_raw_fd(m) }, name)
}

/// The firmware protocol, as hardware/firmware/PROTOCOL.md defines it, on the master side.
fn fake_firmware(master: std::fs::File) -> Arc<Mutex<Vec<bool>>> {
    let rails = Arc::new(Mutex::new(vec![true, true])); // powers up with rails ON
    let r2 = rails.clone();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut w = master.try_clone().unwrap();
        let us = || t0.elapsed().as_micros() as u64;
        writeln!(w, "plugpull_switch booting").unwrap();
        let mut rd = BufReader::new(master);
        let mut line = String::new();
        while rd.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let ch = |i: usize| {
                words
                    .get(i)
                    .and_then(|c| c.parse::<usize>().ok())
                    .filter(|c| (1..=2).contains(c))
            };
            let reply = match words.as_slice() {
                ["PING"] => format!("OK {} PONG plugpull_switch/1 channels=2", us()),
                ["STATE?"] => {
                    let r = r2.lock().unwrap();
                    format!(
                        "OK {} STATE 1={} 2={}",
                        us(),
                        if r[0] { "ON" } else { "OFF" },
                        if r[1] { "ON" } else { "OFF" }
                    )
                }
                ["OFF", _] | ["ON", _] if ch(1).is_some() => {
                    r2.lock().unwrap()[ch(1).unwrap() - 1] = words[0] == "ON";
                    format!("OK {} {} {}", us(), words[0], words[1])
                }
                ["PULSE", _, ms] if ch(1).is_some() => {
                    let c = ch(1).unwrap();
                    let ms: u64 = ms.parse().unwrap();
                    r2.lock().unwrap()[c - 1] = false;
                    writeln!(w, "OK {} PULSE {c} {ms}", us()).unwrap();
                    std::thread::sleep(Duration::from_millis(ms));
                    r2.lock().unwrap()[c - 1] = true;
                    format!("EVT {} ON {c}", us())
                }
                _ => format!("ERR {} unknown command", us()),
            };
            writeln!(w, "{reply}").unwrap();
            line.clear();
        }
    });
    rails
}

#[test]
fn serial_driver_speaks_the_firmware_protocol_over_a_pty() {
    let (master, slave) = pty();
    let rails = fake_firmware(master);
    let mut sw = SerialSwitch::open(
        &slave,
        115200,
        Protocol::Plugpull,
        1,
        Duration::from_secs(3),
    )
    .unwrap();
    assert!(
        sw.describe().contains("PONG plugpull_switch/1"),
        "{}",
        sw.describe()
    );
    assert_eq!(sw.state().unwrap(), Some(true));
    let off = sw.off().unwrap();
    assert!(off.switch_us.is_some());
    assert_eq!(*rails.lock().unwrap(), vec![false, true]);
    assert_eq!(sw.state().unwrap(), Some(false));
    let on = sw.on().unwrap();
    assert!(on.switch_us.unwrap() >= off.switch_us.unwrap());
    assert_eq!(sw.state().unwrap(), Some(true));
    // A pulse timed by the board: OK at the cut, EVT when the rail is back.
    let (a, b) = sw.pulse(Duration::from_millis(150)).unwrap();
    let board_off_us = b.switch_us.unwrap() - a.switch_us.unwrap();
    assert!(
        board_off_us >= 150_000,
        "board reported {board_off_us} µs off"
    );
    assert_eq!(*rails.lock().unwrap(), vec![true, true]);
    assert!(sw.capabilities().native_pulse && sw.capabilities().precise_timing);
}

/// A board that answers each request line with the lines `respond` returns, one request
/// at a time like the firmware's loop.
fn scripted_board(
    master: std::fs::File,
    mut respond: impl FnMut(&str) -> Vec<String> + Send + 'static,
) {
    std::thread::spawn(move || {
        let mut w = master.try_clone().unwrap();
        let mut rd = BufReader::new(master);
        let mut line = String::new();
        while rd.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            for reply in respond(line.trim()) {
                if writeln!(w, "{reply}").is_err() {
                    return;
                }
            }
            line.clear();
        }
    });
}

#[test]
fn serial_driver_takes_no_late_reply_for_the_answer_to_the_next_command() {
    let (master, slave) = pty();
    let mut first_request = true;
    let mut rail_on = true;
    // A reply held back until the driver gave up waiting and sent its next request.
    let mut held: Option<String> = None;
    scripted_board(master, move |request| {
        let mut out: Vec<String> = held.take().into_iter().collect();
        // The boot banner, echoed back by the port before it was raw, is refused ahead of
        // the first reply: one reply more than the driver asked for.
        if std::mem::take(&mut first_request) {
            out.push("ERR 10 unknown command".into());
        }
        match request {
            "PING" => out.push("OK 20 PONG plugpull_switch/1 channels=2".into()),
            "STATE?" => out.push(format!(
                "OK 30 STATE 1={} 2=ON",
                if rail_on { "ON" } else { "OFF" }
            )),
            // Confirmed late.
            "OFF 1" => {
                rail_on = false;
                held = Some("OK 40 OFF 1".into());
            }
            // Refused late.
            "ON 1" => held = Some("ERR 50 relay stuck".into()),
            _ => out.push("ERR 60 unknown command".into()),
        }
        out
    });
    let timeout = Duration::from_millis(300);
    let mut sw = SerialSwitch::open(&slave, 115200, Protocol::Plugpull, 1, timeout).unwrap();
    // The PONG to the PING repeated after the banner's ERR is not the answer to STATE?.
    assert_eq!(sw.state().unwrap(), Some(true));
    let e = sw.off().unwrap_err().to_string();
    assert!(e.contains("no reply"), "{e}");
    // Nor is the late confirmation of OFF.
    assert_eq!(sw.state().unwrap(), Some(false));
    let e = sw.on().unwrap_err().to_string();
    assert!(e.contains("no reply"), "{e}");
    // Nor is the late refusal of ON a refusal of STATE?.
    assert_eq!(sw.state().unwrap(), Some(false));
}

#[test]
fn a_version_1_board_reports_no_trace_and_refuses_ramps() {
    let (master, slave) = pty();
    fake_firmware(master);
    let mut sw = SerialSwitch::open(
        &slave,
        115200,
        Protocol::Plugpull,
        1,
        Duration::from_secs(3),
    )
    .unwrap();
    let caps = sw.capabilities();
    assert!(!caps.ramp && !caps.fall_trace);
    sw.off().unwrap();
    assert_eq!(sw.last_fall().unwrap(), None);
    sw.set_fall_time(Duration::ZERO).unwrap();
    let e = sw.set_fall_time(Duration::from_millis(50)).unwrap_err();
    assert!(e.to_string().contains("cannot ramp"), "{e}");
    // Still cuts with OFF.
    sw.on().unwrap();
}

#[test]
fn a_version_2_board_ramps_and_reports_the_fall_trace() {
    let (master, slave) = pty();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    scripted_board(master, move |request| {
        s2.lock().unwrap().push(request.to_string());
        let words: Vec<&str> = request.split_whitespace().collect();
        vec![match words.as_slice() {
            ["PING"] => "OK 1 PONG plugpull_switch/2 channels=2 features=trace,ramp".into(),
            ["RAMP", ch, ms] => format!("OK 2 RAMP {ch} {ms}"),
            ["OFF", ch] | ["ON", ch] => format!("OK 3 {} {ch}", words[0]),
            ["TRACE?", "1"] => {
                "OK 4 TRACE 1 hz=20000 nominal_mv=12000 off=2 mv=12000,12000,9000,6000,3000,1000,0,0,0,0".into()
            }
            _ => "ERR 9 unknown command".into(),
        }]
    });
    let mut sw = SerialSwitch::open(
        &slave,
        115200,
        Protocol::Plugpull,
        1,
        Duration::from_secs(3),
    )
    .unwrap();
    assert!(sw.capabilities().ramp && sw.capabilities().fall_trace);
    sw.set_fall_time(Duration::from_millis(40)).unwrap();
    sw.off().unwrap();
    sw.on().unwrap();
    sw.set_fall_time(Duration::ZERO).unwrap();
    sw.off().unwrap();
    let t = sw.last_fall().unwrap().expect("a v2 board reports a trace");
    assert_eq!((t.channel, t.rate_hz, t.off_index), (1, 20_000, 2));
    let f = plugpull::power::fall::analyze(&t);
    assert!(f.proven(0.10) && f.to_50_us.is_some(), "{f:?}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[1..], ["RAMP 1 40", "ON 1", "OFF 1", "TRACE? 1"]);
}

#[test]
fn serial_driver_sends_ch340_frames() {
    let (mut master, slave) = pty();
    let mut sw =
        SerialSwitch::open(&slave, 9600, Protocol::Ch340, 1, Duration::from_secs(2)).unwrap();
    sw.off().unwrap();
    sw.on().unwrap();
    let mut got = [0u8; 8];
    master.read_exact(&mut got).unwrap();
    assert_eq!(got, [0xA0, 0x01, 0x00, 0xA1, 0xA0, 0x01, 0x01, 0xA2]);
    assert_eq!(sw.state().unwrap(), None);
}

#[test]
fn power_tables_parse_for_every_driver_and_examples_are_valid() {
    for ex in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/hardware/examples")).unwrap()
    {
        let p = ex.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            plugpull::campaign::fleet::load_all(&p)
                .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
        }
    }
    let t: toml::Table = toml::from_str(
        "[power]\ndriver = \"http\"\nflavor = \"tasmota\"\nhost = \"10.0.0.9\"\ntypo = 1\n",
    )
    .unwrap();
    let e = t["power"]
        .clone()
        .try_into::<PowerConfig>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("typo"), "{e}");
    let t: toml::Table = toml::from_str("[power]\ndriver = \"simdrive\"\n").unwrap();
    let e = format!(
        "{:#}",
        t["power"]
            .clone()
            .try_into::<PowerConfig>()
            .unwrap()
            .build(None)
            .err()
            .unwrap()
    );
    assert!(e.contains("kind = \"simdrive\""), "{e}");
}

/// A server on loopback that reads each request's head and hands the stream to `reply`.
fn plug_answering(reply: fn(&mut std::net::TcpStream)) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    line.clear();
                }
                reply(&mut s);
            });
        }
    });
    addr
}

fn every_flavor() -> [Flavor; 4] {
    [
        Flavor::ShellyGen1,
        Flavor::ShellyGen2,
        Flavor::Tasmota,
        Flavor::Generic {
            off: "GET /off".into(),
            on: "GET /on".into(),
            body_off: None,
            body_on: None,
        },
    ]
}

/// A captive portal or login page in front of the plug answers 200 with HTML: no
/// flavor takes that as switched, and the error quotes the first bytes, escaped.
#[test]
fn an_http_plug_answering_200_with_html_is_not_taken_as_switched() {
    let addr = plug_answering(|s| {
        let page = "<!DOCTYPE html><html><title>\u{1b}[2JWi-Fi login</title></html>";
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
            page.len()
        );
    });
    for flavor in every_flavor() {
        let mut sw = http(flavor.clone(), &addr);
        let e = format!("{:#}", sw.off().expect_err(&format!("{flavor:?}")));
        assert!(e.contains("<!DOCTYPE html>"), "{flavor:?}: {e}");
        assert!(e.contains("\\u{1b}[2J") && !e.contains('\u{1b}'), "{e:?}");
        assert!(e.contains("answered 200 but not as a"), "{e}");
        assert!(sw.on().is_err(), "{flavor:?}");
    }
}

/// A Shelly Gen2 answer without `was_on`, or a Gen1 one without `ison`, is not a switch's
/// answer either, even as JSON.
#[test]
fn an_http_plug_answering_200_with_other_json_is_not_taken_as_switched() {
    let addr = plug_answering(|s| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{{\"ok\":true}}"
        );
    });
    for flavor in [Flavor::ShellyGen1, Flavor::ShellyGen2, Flavor::Tasmota] {
        let e = format!("{:#}", http(flavor.clone(), &addr).off().unwrap_err());
        assert!(e.contains("{\"ok\":true}"), "{flavor:?}: {e}");
    }
}

/// A plug that trickles its reply (a byte every 500 ms) is given up at power.timeout
/// for the whole exchange, not kept alive by each byte.
#[test]
fn an_http_plug_that_trickles_its_reply_is_given_up_at_the_deadline() {
    let addr = plug_answering(|s| {
        let reply = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"ison\":false}";
        for b in reply.bytes() {
            if s.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    });
    let mut sw = http(Flavor::ShellyGen1, &addr);
    sw.timeout = Duration::from_secs(1);
    let t0 = Instant::now();
    let e = format!("{:#}", sw.off().unwrap_err());
    assert!(
        e.contains("did not answer within 1s (the whole request and reply; power.timeout)"),
        "{e}"
    );
    // The whole reply takes 26 s (52 bytes): a deadline per read, kept alive by each
    // byte, would end with it. 10 s is ten times the 1 s timeout, so load cannot reach
    // it, and well short of the reply's end.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// A reply that never ends is cut off at a bound, not read into memory for ever.
#[test]
fn an_http_plug_with_an_endless_reply_is_refused() {
    let addr = plug_answering(|s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        let junk = [b'x'; 8192];
        while s.write_all(&junk).is_ok() {}
    });
    let e = format!("{:#}", http(Flavor::Tasmota, &addr).off().unwrap_err());
    assert!(e.contains("passes 65536 bytes"), "{e}");
}

/// A power timeout of days, or past what a duration holds, is refused when the table
/// is read; a pulse of days is refused before anything is switched.
#[test]
fn a_huge_power_delay_is_refused_with_a_clear_error() {
    for (t, want) in [
        ("720h", "over the limit of 3600s"),
        ("99999999999999999999999h", "too large"),
    ] {
        let table: toml::Table = toml::from_str(&format!(
            "[power]\ndriver = \"http\"\nflavor = \"tasmota\"\nhost = \"10.0.0.9\"\ntimeout = \"{t}\"\n"
        ))
        .unwrap();
        let cfg: PowerConfig = table["power"].clone().try_into().unwrap();
        let r = std::panic::catch_unwind(|| cfg.build(None).map(|_| ()));
        let e = format!("{:#}", r.expect("no panic").unwrap_err());
        assert!(e.contains("power.timeout") && e.contains(want), "{t}: {e}");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sw = CommandSwitch {
            off: "true".into(),
            on: "true".into(),
            state: None,
            timeout: Duration::from_secs(5),
            scope: Scope::Drive,
            trace: None,
            ramp: None,
            ramp_ms: 0,
        };
        let r = sw.pulse(Duration::from_secs(2 * 86_400));
        let _ = tx.send(r.map(|_| ()).map_err(|e| format!("{e:#}")));
    });
    let e = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("a pulse of two days was started")
        .unwrap_err();
    assert!(e.contains("over the limit of 3600s"), "{e}");
}
