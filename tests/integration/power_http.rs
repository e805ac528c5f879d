//! The HTTP driver's digest authentication against a real, independent server: Debian's
//! lighttpd with mod_auth and the htdigest backend, on loopback, serving a Shelly Gen2's
//! answers as static files. SHA-256 with the device id as realm (what a Shelly Gen2+ with
//! a password asks for), MD5 for a generic switch, a wrong password, no password, and a
//! server that asks for a digest algorithm plugpull does not speak.

use crate::common;

use plugpull::power::PowerSwitch;
use plugpull::power::http::{Flavor, HttpSwitch};
use plugpull::power::switch::Scope;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REALM: &str = "shellyplus1pm-a8032ab12345";

/// lighttpd on a free loopback port, killed when dropped.
struct Lighttpd {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Lighttpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `printf '%s' text | {tool}` (sha256sum or md5sum): the hashes of the password file made
/// by coreutils, not by the code under test.
fn hex_hash(tool: &str, text: &str) -> String {
    let mut c = Command::new(tool)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..]
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn lighttpd(algorithm: &str) -> Option<Lighttpd> {
    if !common::skip_unless(
        Path::new("/usr/lib/lighttpd/mod_authn_file.so").exists() && common::have_tool("lighttpd"),
        "needs Debian's lighttpd (apt-get install lighttpd)",
    ) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("www/rpc")).unwrap();
    std::fs::write(d.join("www/rpc/Switch.Set"), "{\"was_on\":true}").unwrap();
    std::fs::write(
        d.join("www/rpc/Switch.GetStatus"),
        "{\"id\":0,\"output\":false}",
    )
    .unwrap();
    let tool = if algorithm == "MD5" {
        "md5sum"
    } else {
        "sha256sum"
    };
    let ha1 = hex_hash(tool, &format!("admin:{REALM}:secret"));
    std::fs::write(d.join("htdigest"), format!("admin:{REALM}:{ha1}\n")).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let conf = format!(
        "server.document-root = \"{www}\"\nserver.port = {port}\nserver.bind = \"127.0.0.1\"\n\
         server.modules = (\"mod_auth\", \"mod_authn_file\")\nserver.errorlog = \"{log}\"\n\
         auth.backend = \"htdigest\"\nauth.backend.htdigest.userfile = \"{users}\"\n\
         auth.require = ( \"/\" => ( \"method\" => \"digest\", \"realm\" => \"{REALM}\", \
         \"require\" => \"valid-user\", \"algorithm\" => \"{algorithm}\" ) )\n",
        www = d.join("www").display(),
        log = d.join("error.log").display(),
        users = d.join("htdigest").display(),
    );
    std::fs::write(d.join("lighttpd.conf"), conf).unwrap();
    let child = Command::new("lighttpd")
        .arg("-D")
        .arg("-f")
        .arg(d.join("lighttpd.conf"))
        .stdout(Stdio::null())
        .spawn()
        .expect("lighttpd");
    let addr = format!("127.0.0.1:{port}");
    let server = Lighttpd {
        child,
        addr: addr.clone(),
        _dir: dir,
    };
    let t0 = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "lighttpd did not listen on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

fn switch(flavor: Flavor, addr: &str, password: Option<&str>) -> HttpSwitch {
    let mut sw = HttpSwitch::new(flavor, addr, Scope::Host);
    sw.timeout = Duration::from_secs(5);
    sw.auth = password.map(|p| ("admin".to_string(), p.to_string()));
    sw
}

#[test]
fn a_shelly_gen2_with_a_password_is_switched_through_sha256_digest() {
    let Some(server) = lighttpd("SHA-256") else {
        return;
    };
    let mut sw = switch(Flavor::ShellyGen2, &server.addr, Some("secret"));
    sw.off().unwrap();
    assert_eq!(sw.state().unwrap(), Some(false));

    let e = format!(
        "{:#}",
        switch(Flavor::ShellyGen2, &server.addr, Some("wrong"))
            .off()
            .unwrap_err()
    );
    assert!(
        e.contains("401")
            && e.contains(REALM)
            && e.contains("Digest")
            && e.contains("power.password"),
        "{e}"
    );

    let e = format!(
        "{:#}",
        switch(Flavor::ShellyGen2, &server.addr, None)
            .off()
            .unwrap_err()
    );
    assert!(e.contains("401") && e.contains("set power.user"), "{e}");
}

#[test]
fn a_generic_switch_is_switched_through_md5_digest() {
    let Some(server) = lighttpd("MD5") else {
        return;
    };
    let generic = Flavor::Generic {
        off: "GET /rpc/Switch.Set?id=0&on=false".into(),
        on: "GET /rpc/Switch.Set?id=0&on=true".into(),
        body_off: None,
        body_on: None,
    };
    let mut sw = switch(generic.clone(), &server.addr, Some("secret"));
    sw.off().unwrap();
    sw.on().unwrap();
    let e = format!(
        "{:#}",
        switch(generic, &server.addr, Some("wrong"))
            .on()
            .unwrap_err()
    );
    assert!(e.contains("401") && e.contains(REALM), "{e}");
}

/// A server on loopback that hands each request's head (lines, CRLF stripped) and its
/// stream to `reply`, and keeps every head it saw.
fn answering(
    reply: fn(&mut TcpStream, &[String]),
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Vec<String>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut head = Vec::new();
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                    head.push(line.trim_end().to_string());
                    line.clear();
                }
                kept.lock().unwrap().push(head.clone());
                reply(&mut s, &head);
            });
        }
    });
    (addr, seen)
}

/// lighttpd speaks only algorithms plugpull speaks too, so the server that asks for
/// another one is a few lines on loopback; no password is sent to it in any form.
#[test]
fn a_switch_asking_for_an_unknown_digest_algorithm_is_refused_by_name() {
    let (addr, seen) = answering(|s, _| {
        let _ = write!(
            s,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm=\"{REALM}\", \
             nonce=\"abc\", algorithm=SHA3-256, qop=\"auth\"\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
    });
    let e = format!(
        "{:#}",
        switch(Flavor::ShellyGen2, &addr, Some("secret"))
            .off()
            .unwrap_err()
    );
    assert!(
        e.contains("algorithm SHA3-256") && e.contains("does not speak"),
        "{e}"
    );
    let heads = seen.lock().unwrap();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        !heads[0]
            .iter()
            .any(|h| h.to_ascii_lowercase().starts_with("authorization")),
        "{heads:?}"
    );
}

/// A switch that asks for Digest never gets the password as Basic, even after a
/// wrong answer; lighttpd cannot show what it received, this server can.
#[test]
fn a_digest_switch_never_gets_the_password_as_basic() {
    let (addr, seen) = answering(|s, _| {
        let _ = write!(
            s,
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm=\"{REALM}\", \
             nonce=\"abc\", algorithm=SHA-256, qop=\"auth\"\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n"
        );
    });
    let mut sw = switch(Flavor::ShellyGen2, &addr, Some("secret"));
    for _ in 0..2 {
        let e = format!("{:#}", sw.off().unwrap_err());
        assert!(e.contains("Digest") && e.contains(REALM), "{e}");
    }
    let heads = seen.lock().unwrap();
    let auths: Vec<&String> = heads
        .iter()
        .flatten()
        .filter(|h| h.to_ascii_lowercase().starts_with("authorization"))
        .collect();
    assert!(!auths.is_empty(), "{heads:?}");
    assert!(
        auths.iter().all(
            |a| a.to_ascii_lowercase().starts_with("authorization: digest ")
                && a.contains("username=\"admin\"")
                && !a.contains("secret")
        ),
        "{auths:?}"
    );
}

/// Something that is not HTTP at all on the switch's port (an SSH server, say).
#[test]
fn a_switch_port_answering_garbage_is_not_taken_for_http() {
    let (addr, _) = answering(|s, _| {
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n\x00\x01garbage\r\n\r\n");
    });
    let e = format!(
        "{:#}",
        switch(Flavor::ShellyGen1, &addr, None).off().unwrap_err()
    );
    assert!(
        e.contains(&addr) && e.contains("did not answer HTTP"),
        "{e}"
    );
}

/// A redirect (a login page, a wrong path) is reported with where it pointed and not
/// followed, so credentials do not go elsewhere.
#[test]
fn a_switch_that_redirects_is_not_followed() {
    let (addr, seen) = answering(|s, _| {
        let _ = s.write_all(
            b"HTTP/1.1 302 Found\r\nLocation: http://192.0.2.1/login?next=%2F\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    let e = format!(
        "{:#}",
        switch(Flavor::Tasmota, &addr, Some("secret"))
            .off()
            .unwrap_err()
    );
    assert!(
        e.contains("answered 302")
            && e.contains("http://192.0.2.1/login?next=%2F")
            && e.contains("does not follow"),
        "{e}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

/// A switch that takes the request and never answers is given up at power.timeout.
#[test]
fn a_silent_switch_is_given_up_at_the_deadline() {
    let (addr, _) = answering(|_, _| std::thread::sleep(Duration::from_secs(30)));
    let mut sw = switch(Flavor::ShellyGen1, &addr, None);
    sw.timeout = Duration::from_secs(1);
    let t0 = Instant::now();
    let e = format!("{:#}", sw.off().unwrap_err());
    assert!(e.contains("did not answer within 1s"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}
