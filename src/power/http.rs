//! `driver = "http"`: smart plugs and any switch with an HTTP API, over plain HTTP/1.1
//! (these devices live on a lab LAN and speak no TLS) through [`super::http_client`],
//! which keeps the deadline, the reply bound and the clear errors, and answers a
//! password-protected plug's Basic or Digest challenge.
//!
//! Flavors and their requests:
//! - Shelly Gen1: `GET /relay/N?turn=off|on`, state `GET /relay/N` → `{"ison":bool}`;
//! - Shelly Gen2+: `GET /rpc/Switch.Set?id=N&on=false|true`, state
//!   `GET /rpc/Switch.GetStatus?id=N` → `{"output":bool}` (with a password: Digest,
//!   SHA-256, the device id as realm);
//! - Tasmota: `GET /cm?cmnd=Power%20Off|On` (channel N > 0: `PowerN`), state
//!   `GET /cm?cmnd=Power` → `{"POWER":"ON"}`;
//! - generic: request lines from the config (`GET /path` or `POST /path`, optional body).

use super::error::PowerError;
use super::http_auth::Login;
use super::http_client::{Exchange, HttpClient, QUOTED_BYTES, Trust};
pub use super::http_client::{MAX_REPLY_BYTES, Response};
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use crate::model::peer_text::shown_prefix;
use std::time::Duration;

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
    /// host or host:port.
    pub host: String,
    pub channel: u32,
    /// (user, password): answered as the plug's 401 asks, Basic or Digest.
    pub auth: Option<(String, String)>,
    /// For each exchange as a whole (a Digest challenge's two round trips included).
    pub timeout: Duration,
    pub scope: Scope,
    /// Made at the first request, for `host` as it is then; keeps the scheme learned.
    client: Option<HttpClient>,
}

impl HttpSwitch {
    /// Channel 0, no login, a 10 s timeout.
    pub fn new(flavor: Flavor, host: &str, scope: Scope) -> Self {
        HttpSwitch {
            flavor,
            host: host.to_string(),
            channel: 0,
            auth: None,
            timeout: Duration::from_secs(10),
            scope,
            client: None,
        }
    }

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

    fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Response, PowerError> {
        let client = match &mut self.client {
            Some(c) if c.hostport() == self.host => c,
            slot => slot.insert(HttpClient::new(
                &format!("http://{}", self.host),
                &Trust::PublicRoots,
            )?),
        };
        let login = self.auth.as_ref().map(|(user, password)| Login {
            user: user.clone(),
            password: password.clone(),
        });
        client.checked(
            &Exchange {
                method,
                path,
                body,
                headers: &[],
            },
            login.as_ref(),
            self.timeout,
        )
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
