//! `driver = "redfish"`: a server's BMC cuts the host's power (DMTF Redfish, over HTTPS).
//!
//! Off is `ResetType` ForceOff, on is On, and [`PowerSwitch::pulse`] is one PowerCycle
//! where [`RedfishSettings::pulse_with_power_cycle`] asks for it (a campaign cuts with off
//! and on and never pulses, so the config has no key for it); each is refused before
//! anything is sent when the system does not list it in
//! `ResetType@Redfish.AllowableValues`. The action is taken as done
//! only when the system's `PowerState` reads back Off (or On): a BMC answers 204 to a
//! reset it queues, not one it did.
//!
//! The system is the only member of /redfish/v1/Systems, or the one `system` names when
//! there are several. Authentication is Basic or a Redfish session (`POST
//! /redfish/v1/SessionService/Sessions`, then `X-Auth-Token`, the session deleted when the
//! driver is dropped). Certificates are checked: a BMC's self-signed one is pinned with
//! `ca_file`, or, knowingly, taken with `tls_insecure_accept_any_certificate`.

use super::error::PowerError;
use super::http_auth::Login;
use super::http_client::{Exchange, HttpClient, QUOTED_BYTES, Response, Trust, status_error};
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use crate::model::peer_text::shown_prefix;
use serde_json::Value;
use std::time::{Duration, Instant};

const SYSTEMS: &str = "/redfish/v1/Systems";
const SESSIONS: &str = "/redfish/v1/SessionService/Sessions";
/// How often `PowerState` is read while waiting for a reset to show.
const POLL_EVERY: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedfishAuth {
    Basic,
    Session,
}

pub struct RedfishSettings {
    /// host or host:port of the BMC.
    pub host: String,
    pub system: Option<String>,
    pub login: Login,
    pub auth: RedfishAuth,
    pub trust: Trust,
    /// `pulse` as one ResetType PowerCycle (the BMC times the off) rather than ForceOff,
    /// a sleep on the host, On.
    pub pulse_with_power_cycle: bool,
    /// For each exchange.
    pub timeout: Duration,
    /// For `PowerState` to read back what a reset asked for.
    pub confirm_timeout: Duration,
    pub scope: Scope,
}

/// The system found, with what its Reset action offers.
struct System {
    path: String,
    reset_target: String,
    /// `None` where the BMC does not list them (then any is tried).
    allowed: Option<Vec<String>>,
}

struct Session {
    token: String,
    /// The session resource to delete at the end.
    location: Option<String>,
}

pub struct RedfishSwitch {
    settings: RedfishSettings,
    client: HttpClient,
    session: Option<Session>,
    system: Option<System>,
}

impl RedfishSwitch {
    pub fn new(settings: RedfishSettings) -> Result<Self, PowerError> {
        let client = HttpClient::new(&format!("https://{}", settings.host), &settings.trust)?;
        Ok(RedfishSwitch {
            settings,
            client,
            session: None,
            system: None,
        })
    }

    /// One exchange as the configured login: Basic, or the session's token (a session
    /// made first, and made again once if the BMC expired it).
    fn send(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Response, PowerError> {
        for again in [false, true] {
            let token = match self.settings.auth {
                RedfishAuth::Basic => None,
                RedfishAuth::Session => Some(self.session_token()?),
            };
            let mut headers = vec![("Accept", "application/json"), ("OData-Version", "4.0")];
            if let Some(t) = &token {
                headers.push(("X-Auth-Token", t));
            }
            let login = match self.settings.auth {
                RedfishAuth::Basic => Some(&self.settings.login),
                RedfishAuth::Session => None,
            };
            let r = self.client.exchange(
                &Exchange {
                    method,
                    path,
                    body,
                    headers: &headers,
                },
                login,
                self.settings.timeout,
            )?;
            if r.status == 401 && token.is_some() && !again {
                self.session = None;
                continue;
            }
            return self.status_ok(method, path, r);
        }
        unreachable!("the loop returns on its second pass")
    }

    fn status_ok(&self, method: &str, path: &str, r: Response) -> Result<Response, PowerError> {
        if r.status == 401 {
            return Err(PowerError::LoginRefused {
                host: self.client.hostport().to_string(),
                user: self.settings.login.user.clone(),
                scheme: match self.settings.auth {
                    RedfishAuth::Basic => "Basic",
                    RedfishAuth::Session => "Redfish session",
                },
                realm: r
                    .header("www-authenticate")
                    .and_then(|c| c.split_once("realm=\""))
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(realm, _)| realm.to_string())
                    .unwrap_or_default(),
            });
        }
        if !(200..300).contains(&r.status) {
            return Err(status_error(method, path, self.client.hostport(), &r));
        }
        Ok(r)
    }

    fn session_token(&mut self) -> Result<String, PowerError> {
        if let Some(s) = &self.session {
            return Ok(s.token.clone());
        }
        let body = serde_json::json!({
            "UserName": self.settings.login.user,
            "Password": self.settings.login.password,
        })
        .to_string();
        let r = self.client.exchange(
            &Exchange {
                method: "POST",
                path: SESSIONS,
                body: Some(&body),
                headers: &[("Accept", "application/json")],
            },
            None,
            self.settings.timeout,
        )?;
        let r = self.status_ok("POST", SESSIONS, r)?;
        let token = r
            .header("x-auth-token")
            .ok_or_else(|| PowerError::RedfishNoToken {
                host: self.client.hostport().to_string(),
            })?
            .to_string();
        let location = r.header("location").map(|l| {
            // A Location may be absolute (https://bmc/redfish/...): keep its path.
            match l.find("/redfish/") {
                Some(i) => l[i..].to_string(),
                None => l.to_string(),
            }
        });
        self.session = Some(Session {
            token: token.clone(),
            location,
        });
        Ok(token)
    }

    fn json(&mut self, path: &str) -> Result<Value, PowerError> {
        let r = self.send("GET", path, None)?;
        serde_json::from_str(&r.body).map_err(|_| PowerError::NotJson {
            host: self.client.hostport().to_string(),
            path: path.to_string(),
            body: shown_prefix(r.body.as_bytes(), QUOTED_BYTES),
        })
    }

    /// The system to reset, found once.
    fn system(&mut self) -> Result<&System, PowerError> {
        if self.system.is_none() {
            let found = self.find_system()?;
            self.system = Some(found);
        }
        Ok(self.system.as_ref().expect("set above"))
    }

    fn find_system(&mut self) -> Result<System, PowerError> {
        let host = self.client.hostport().to_string();
        let list = self.json(SYSTEMS)?;
        let members: Vec<String> = list
            .get("Members")
            .and_then(Value::as_array)
            .map(|m| {
                m.iter()
                    .filter_map(|e| e.get("@odata.id")?.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let id_of = |p: &str| {
            p.trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_string()
        };
        let path = match (&self.settings.system, members.as_slice()) {
            (Some(want), _) => members
                .iter()
                .find(|m| id_of(m) == *want || m.as_str() == want)
                .cloned()
                .ok_or_else(|| PowerError::RedfishNoSuchSystem {
                    host: host.clone(),
                    system: want.clone(),
                    ids: members
                        .iter()
                        .map(|m| id_of(m))
                        .collect::<Vec<_>>()
                        .join(", "),
                })?,
            (None, [one]) => one.clone(),
            (None, []) => return Err(PowerError::RedfishNoSystem { host }),
            (None, many) => {
                return Err(PowerError::RedfishWhichSystem {
                    host,
                    ids: many.iter().map(|m| id_of(m)).collect::<Vec<_>>().join(", "),
                });
            }
        };
        let sys = self.json(&path)?;
        let action = sys.pointer("/Actions/#ComputerSystem.Reset");
        let reset_target = action
            .and_then(|a| a.get("target"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{path}/Actions/ComputerSystem.Reset"));
        let allowed = action
            .and_then(|a| a.get("ResetType@Redfish.AllowableValues"))
            .and_then(Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            });
        Ok(System {
            path,
            reset_target,
            allowed,
        })
    }

    /// Posts a reset of `reset_type`, refused first if the system does not allow it.
    fn reset(&mut self, reset_type: &str) -> Result<SwitchTiming, PowerError> {
        let host = self.client.hostport().to_string();
        let sys = self.system()?;
        if let Some(allowed) = &sys.allowed {
            if !allowed.iter().any(|a| a == reset_type) {
                return Err(PowerError::RedfishResetNotAllowed {
                    host,
                    system: sys.path.clone(),
                    reset_type: reset_type.to_string(),
                    allowed: allowed.join(", "),
                });
            }
        }
        let target = sys.reset_target.clone();
        let body = serde_json::json!({ "ResetType": reset_type }).to_string();
        let (stamp, _) = SwitchTiming::around(|| self.send("POST", &target, Some(&body)))?;
        Ok(stamp)
    }

    /// `PowerState` of the system: "On", "Off", "PoweringOn", "PoweringOff"...
    fn power_state(&mut self) -> Result<String, PowerError> {
        let path = self.system()?.path.clone();
        let sys = self.json(&path)?;
        sys.get("PowerState")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| PowerError::NoRelayState {
                host: self.client.hostport().to_string(),
                path,
                body: shown_prefix(sys.to_string().as_bytes(), QUOTED_BYTES),
            })
    }

    /// Polls `PowerState` until it reads `want`; the timing's `done_ns` is when it did.
    fn confirm(&mut self, want: &str, mut stamp: SwitchTiming) -> Result<SwitchTiming, PowerError> {
        let t0 = Instant::now();
        loop {
            let now = self.power_state()?;
            if now == want {
                stamp.done_ns = crate::model::now_ns();
                return Ok(stamp);
            }
            if t0.elapsed() >= self.settings.confirm_timeout {
                return Err(PowerError::RedfishStateNotReached {
                    host: self.client.hostport().to_string(),
                    want: want.to_string(),
                    now,
                    waited: self.settings.confirm_timeout,
                });
            }
            std::thread::sleep(POLL_EVERY);
        }
    }
}

impl RedfishSwitch {
    /// After a PowerCycle: polls `PowerState` until it reads anything but On (Off,
    /// PoweringOff, PoweringOn); the timing's `done_ns` is when it did.
    fn confirm_left_on(&mut self, mut stamp: SwitchTiming) -> Result<SwitchTiming, PowerError> {
        let t0 = Instant::now();
        loop {
            let now = self.power_state()?;
            if now != "On" {
                stamp.done_ns = crate::model::now_ns();
                return Ok(stamp);
            }
            if t0.elapsed() >= self.settings.confirm_timeout {
                return Err(PowerError::RedfishCycleNotSeen {
                    host: self.client.hostport().to_string(),
                    waited: self.settings.confirm_timeout,
                    every: POLL_EVERY,
                });
            }
            std::thread::sleep(POLL_EVERY);
        }
    }
}

impl Drop for RedfishSwitch {
    /// Deletes the session: a BMC holds only a few, and an abandoned one keeps its slot
    /// until it times out.
    fn drop(&mut self) {
        if let Some(Session {
            token,
            location: Some(location),
        }) = self.session.take()
        {
            let _ = self.client.exchange(
                &Exchange {
                    method: "DELETE",
                    path: &location,
                    body: None,
                    headers: &[("X-Auth-Token", &token)],
                },
                None,
                self.settings.timeout,
            );
        }
    }
}

impl PowerSwitch for RedfishSwitch {
    fn describe(&self) -> String {
        format!(
            "redfish BMC at {}{}",
            self.settings.host,
            self.settings
                .system
                .as_ref()
                .map(|s| format!(" system {s}"))
                .unwrap_or_default()
        )
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: self.settings.scope,
            precise_timing: false,
            reports_state: true,
            native_pulse: self.settings.pulse_with_power_cycle,
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        let stamp = self.reset("ForceOff")?;
        self.confirm("Off", stamp)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        let stamp = self.reset("On")?;
        self.confirm("On", stamp)
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        let s = self.power_state()?;
        match s.as_str() {
            "On" => Ok(Some(true)),
            "Off" => Ok(Some(false)),
            _ => Err(PowerError::RedfishTransitional {
                host: self.client.hostport().to_string(),
                state: s,
            }),
        }
    }
    /// One PowerCycle where the settings ask for it: the BMC times the pulse itself, so
    /// `off_for` is not what the host stays off (the BMC's own cycle delay is). The off
    /// is proven by `PowerState` reading something other than On after the reset (a
    /// cycle shorter than the poll is not seen, and is an error rather than taken on
    /// faith), the on by `PowerState` reading On again.
    fn pulse(&mut self, off_for: Duration) -> Result<(SwitchTiming, SwitchTiming), PowerError> {
        super::switch::check_off("the time off", off_for)?;
        if !self.settings.pulse_with_power_cycle {
            let off = self.off()?;
            std::thread::sleep(off_for);
            let on = self.on()?;
            return Ok((off, on));
        }
        let stamp = self.reset("PowerCycle")?;
        let off = self.confirm_left_on(stamp)?;
        let on = self.confirm(
            "On",
            SwitchTiming {
                issued_ns: off.done_ns,
                done_ns: off.done_ns,
                switch_us: None,
            },
        )?;
        Ok((off, on))
    }
}
