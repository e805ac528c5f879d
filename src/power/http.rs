//! `driver = "http"`: smart plugs and any switch with an HTTP API, over plain HTTP/1.1
//! on a std `TcpStream` (these devices live on a lab LAN and speak no TLS).
//!
//! Flavors and their requests:
//! - Shelly Gen1: `GET /relay/N?turn=off|on`, state `GET /relay/N` → `{"ison":bool}`;
//! - Shelly Gen2+: `GET /rpc/Switch.Set?id=N&on=false|true`, state
//!   `GET /rpc/Switch.GetStatus?id=N` → `{"output":bool}`;
//! - Tasmota: `GET /cm?cmnd=Power%20Off|On` (channel N > 0: `PowerN`), state
//!   `GET /cm?cmnd=Power` → `{"POWER":"ON"}`;
//! - generic: request lines from the config (`GET /path` or `POST /path`, optional body).

use super::error::PowerError;
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use crate::model::peer_text::shown_prefix;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub enum Flavor {
    ShellyGen1,
    ShellyGen2,
    Tasmota,
    Generic {
        off: String,
        on: String,
        body_off: Option<String>,
        body_on: Option<String>,
    },
}

pub struct HttpSwitch {
    pub flavor: Flavor,
    pub host: String,
    pub channel: u32,
    pub auth: Option<(String, String)>,
    pub timeout: Duration,
    pub scope: Scope,
}

/// A response: status code, content type and body.
pub struct Response {
    pub status: u16,
    /// The Content-Type header, lowercase, if any.
    pub content_type: Option<String>,
    pub body: String,
}

/// A switch's reply is a few hundred bytes; more is not a switch talking.
pub const MAX_REPLY_BYTES: usize = 64 * 1024;
/// Bytes of a reply an error quotes.
const QUOTED_BYTES: usize = 120;

/// One HTTP/1.1 request with `Connection: close`; reads the whole response. `timeout` is
/// a deadline for all of it (connect, send, every byte of the reply): a plug that
/// trickles its answer a byte at a time is given up at the deadline, not per read.
pub fn request(
    host: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    auth: Option<&(String, String)>,
    timeout: Duration,
) -> Result<Response, PowerError> {
    let deadline = Instant::now() + timeout;
    let hostport = if host.contains(':') {
        host.to_string()
    } else {
        format!("{host}:80")
    };
    let addr = hostport
        .to_socket_addrs()
        .map_err(|source| PowerError::Resolve {
            hostport: hostport.clone(),
            source,
        })?
        .next()
        .ok_or_else(|| PowerError::NoAddress {
            hostport: hostport.clone(),
        })?;
    let late = || PowerError::ReplyTimeout {
        hostport: hostport.clone(),
        timeout,
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    let mut s = TcpStream::connect_timeout(&addr, left().ok_or_else(late)?).map_err(|source| {
        PowerError::Connect {
            hostport: hostport.clone(),
            source,
        }
    })?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nUser-Agent: plugpull/{}\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if let Some((u, p)) = auth {
        req += &format!(
            "Authorization: Basic {}\r\n",
            base64(format!("{u}:{p}").as_bytes())
        );
    }
    let body = body.unwrap_or("");
    if method != "GET" || !body.is_empty() {
        req += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        );
    }
    req += "\r\n";
    req += body;
    let mut out = req.as_bytes();
    while !out.is_empty() {
        s.set_write_timeout(Some(left().ok_or_else(late)?))?;
        match s.write(out) {
            Ok(0) => {
                return Err(PowerError::Send {
                    hostport: hostport.clone(),
                    source: io::ErrorKind::WriteZero.into(),
                });
            }
            Ok(n) => out = &out[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(late()),
            Err(source) => {
                return Err(PowerError::Send {
                    hostport: hostport.clone(),
                    source,
                });
            }
        }
    }
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        s.set_read_timeout(Some(left().ok_or_else(late)?))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() > MAX_REPLY_BYTES {
                    return Err(PowerError::ReplyTooLong {
                        hostport,
                        max: MAX_REPLY_BYTES,
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(late()),
            Err(source) => return Err(PowerError::ReadReply { hostport, source }),
        }
    }
    parse_response(&raw).map_err(|e| PowerError::BadReply {
        hostport,
        source: Box::new(e),
    })
}

/// A socket timeout (which of the two kinds depends on the platform).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn parse_response(raw: &[u8]) -> Result<Response, PowerError> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next().unwrap_or("");
    let mut parts = status_line.split_whitespace();
    if !parts.next().unwrap_or("").starts_with("HTTP/") {
        return Err(PowerError::NotHttp {
            status_line: shown_prefix(status_line.as_bytes(), QUOTED_BYTES),
        });
    }
    let status: u16 =
        parts
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| PowerError::NoStatusCode {
                status_line: shown_prefix(status_line.as_bytes(), QUOTED_BYTES),
            })?;
    let chunked = head
        .lines()
        .any(|l| l.to_ascii_lowercase().starts_with("transfer-encoding:") && l.contains("chunked"));
    let content_type = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-type")
            .then(|| v.trim().to_ascii_lowercase())
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Response {
        status,
        content_type,
        body,
    })
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out += &rest[..n];
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                o.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

impl HttpSwitch {
    fn flavor_name(&self) -> &'static str {
        match self.flavor {
            Flavor::ShellyGen1 => "shelly-gen1",
            Flavor::ShellyGen2 => "shelly-gen2",
            Flavor::Tasmota => "tasmota",
            Flavor::Generic { .. } => "generic",
        }
    }

    fn tasmota_cmd(&self) -> String {
        if self.channel == 0 {
            "Power".into()
        } else {
            format!("Power{}", self.channel)
        }
    }

    /// (method, path, body) to switch to `on`.
    fn switch_request(&self, on: bool) -> (String, String, Option<String>) {
        let ch = self.channel;
        match &self.flavor {
            Flavor::ShellyGen1 => (
                "GET".into(),
                format!("/relay/{ch}?turn={}", if on { "on" } else { "off" }),
                None,
            ),
            Flavor::ShellyGen2 => (
                "GET".into(),
                format!("/rpc/Switch.Set?id={ch}&on={on}"),
                None,
            ),
            Flavor::Tasmota => (
                "GET".into(),
                format!(
                    "/cm?cmnd={}%20{}",
                    self.tasmota_cmd(),
                    if on { "On" } else { "Off" }
                ),
                None,
            ),
            Flavor::Generic {
                off,
                on: on_req,
                body_off,
                body_on,
            } => {
                let line = if on { on_req } else { off };
                let (m, p) = line.split_once(' ').unwrap_or(("GET", line));
                (
                    m.trim().to_string(),
                    p.trim().to_string(),
                    if on {
                        body_on.clone()
                    } else {
                        body_off.clone()
                    },
                )
            }
        }
    }

    fn send(&self, method: &str, path: &str, body: Option<&str>) -> Result<Response, PowerError> {
        let r = request(
            &self.host,
            method,
            path,
            body,
            self.auth.as_ref(),
            self.timeout,
        )?;
        if r.status == 401 {
            return Err(PowerError::LoginRequired {
                host: self.host.clone(),
            });
        }
        if !(200..300).contains(&r.status) {
            return Err(PowerError::HttpStatus {
                method: method.to_string(),
                path: path.to_string(),
                host: self.host.clone(),
                status: r.status,
                body: shown_prefix(r.body.trim().as_bytes(), QUOTED_BYTES),
            });
        }
        Ok(r)
    }

    fn set(&mut self, on: bool) -> Result<SwitchTiming, PowerError> {
        let (m, p, b) = self.switch_request(on);
        let (stamp, r) = SwitchTiming::around(|| self.send(&m, &p, b.as_deref()))?;
        self.check_switch_reply(&p, &r)?;
        // Where the reply states the new state, check it: a plug in a "child lock" or
        // overload mode answers 200 without switching.
        if let Some(now) = self.state_from(&r.body) {
            if now != on {
                return Err(PowerError::NotSwitched {
                    host: self.host.clone(),
                    now,
                    wanted: on,
                });
            }
        }
        Ok(stamp)
    }

    /// Refuses a 200 reply to a switch request that is not what the flavor's API
    /// answers: a captive portal or a login page in front of the plug answers 200 too,
    /// and the relay never moved. Shelly Gen1 and Tasmota state the relay; Shelly Gen2
    /// says what it was (`was_on`); a generic switch's reply is unknown, but an HTML
    /// page is never a switch's answer.
    fn check_switch_reply(&self, path: &str, r: &Response) -> Result<(), PowerError> {
        let json = || serde_json::from_str::<serde_json::Value>(&r.body).ok();
        let expected = match self.flavor {
            Flavor::ShellyGen1 | Flavor::Tasmota if self.state_from(&r.body).is_some() => {
                return Ok(());
            }
            Flavor::ShellyGen1 => "JSON with \"ison\": true or false",
            Flavor::Tasmota => "JSON with \"POWER\": \"ON\" or \"OFF\"",
            Flavor::ShellyGen2 => {
                if json().is_some_and(|v| v.get("was_on").is_some_and(|w| w.is_boolean())) {
                    return Ok(());
                }
                "JSON with \"was_on\": true or false"
            }
            Flavor::Generic { .. } => {
                let html = r
                    .content_type
                    .as_deref()
                    .is_some_and(|t| t.contains("html"))
                    || r.body.trim_start().starts_with('<');
                if !html {
                    return Ok(());
                }
                "anything but an HTML page"
            }
        };
        Err(PowerError::UnexpectedReply {
            host: self.host.clone(),
            path: path.to_string(),
            flavor: self.flavor_name(),
            expected,
            got: shown_prefix(r.body.as_bytes(), QUOTED_BYTES),
        })
    }

    /// Reads the relay state from a flavor's JSON reply, where it has one.
    fn state_from(&self, body: &str) -> Option<bool> {
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        match self.flavor {
            Flavor::ShellyGen1 => v.get("ison")?.as_bool(),
            Flavor::ShellyGen2 => v.get("output")?.as_bool(),
            Flavor::Tasmota => {
                let key = if self.channel == 0 {
                    "POWER".to_string()
                } else {
                    format!("POWER{}", self.channel)
                };
                let s = v.get(&key).or_else(|| v.get("POWER"))?.as_str()?;
                Some(s.eq_ignore_ascii_case("on"))
            }
            Flavor::Generic { .. } => None,
        }
    }
}

impl PowerSwitch for HttpSwitch {
    fn describe(&self) -> String {
        format!(
            "http {} at {} channel {}",
            self.flavor_name(),
            self.host,
            self.channel
        )
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: self.scope,
            precise_timing: false,
            reports_state: !matches!(self.flavor, Flavor::Generic { .. }),
            native_pulse: false,
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        self.set(false)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        self.set(true)
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        let path = match self.flavor {
            Flavor::ShellyGen1 => format!("/relay/{}", self.channel),
            Flavor::ShellyGen2 => format!("/rpc/Switch.GetStatus?id={}", self.channel),
            Flavor::Tasmota => format!("/cm?cmnd={}", self.tasmota_cmd()),
            Flavor::Generic { .. } => return Ok(None),
        };
        let r = self.send("GET", &path, None)?;
        match self.state_from(&r.body) {
            Some(s) => Ok(Some(s)),
            None => Err(PowerError::NoRelayState {
                host: self.host.clone(),
                path,
                body: shown_prefix(r.body.as_bytes(), QUOTED_BYTES),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(super::base64(b"admin:secret"), "YWRtaW46c2VjcmV0");
        assert_eq!(super::base64(b"a"), "YQ==");
        assert_eq!(super::base64(b"ab"), "YWI=");
    }
    #[test]
    fn dechunks() {
        assert_eq!(
            super::dechunk("5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n"),
            "hello!"
        );
    }
}
