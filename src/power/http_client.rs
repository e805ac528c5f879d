//! The HTTP client under every HTTP-speaking driver (smart plugs, generic switches,
//! Redfish BMCs): `ureq` with rustls, wrapped so that every exchange keeps the promises
//! the drivers make to the operator: one deadline for the whole exchange (a plug that
//! trickles its reply a byte at a time is given up at `power.timeout`, not kept alive by
//! each byte), a bound on the reply's size, no redirects followed, and errors that say
//! what to check (connection refused, timeout, a refused certificate, a non-2xx status
//! with a short quoted body).
//!
//! Authentication is answered here too ([`super::http_auth`]): a request goes out without
//! credentials until the server's 401 says which scheme it wants (Basic or Digest), so a
//! password is never sent as Basic to a server that asked for Digest; the scheme learned
//! is used from then on.

use super::error::PowerError;
use super::http_auth::{self, Challenge, Login};
use crate::model::peer_text::shown_prefix;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig, TlsProvider};

/// A switch's reply is a few hundred bytes, a BMC's resource a few kilobytes; more is not
/// a switch talking.
pub const MAX_REPLY_BYTES: usize = 64 * 1024;
/// Bytes of a reply an error quotes.
pub const QUOTED_BYTES: usize = 120;

/// Which certificates an HTTPS server may show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The public web's roots (webpki-roots): right for nothing in a lab but the default,
    /// so that no certificate is taken on faith unless the config says so.
    PublicRoots,
    /// Only certificates issued by (or equal to) those in this PEM file: a BMC's
    /// self-signed certificate pinned, or the lab's CA.
    CaFile(PathBuf),
    /// Any certificate at all (`tls_insecure_accept_any_certificate = true`): the
    /// connection is encrypted but anyone on the path can pose as the BMC.
    AcceptAnyCertificate,
}

/// A response: status code, content type, the headers a driver asks for, and the body.
pub struct Response {
    pub status: u16,
    /// The Content-Type header, lowercase, if any.
    pub content_type: Option<String>,
    /// Every header, names lowercase.
    pub headers: Vec<(String, String)>,
    /// The body, invalid UTF-8 replaced.
    pub body: String,
}

impl Response {
    /// The first header named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request: method, path (with query), optional JSON body, extra headers.
pub struct Exchange<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub body: Option<&'a str>,
    pub headers: &'a [(&'a str, &'a str)],
}

/// A client for one server (`http://host:port` or `https://host:port`), with the
/// authentication scheme it learned from the server's 401.
pub struct HttpClient {
    agent: ureq::Agent,
    base: String,
    /// host:port as the errors name it.
    hostport: String,
    challenge: Challenge,
}

impl HttpClient {
    /// A client for `base` ("http://host[:port]" or "https://host[:port]").
    pub fn new(base: &str, trust: &Trust) -> Result<Self, PowerError> {
        let base = base.trim_end_matches('/').to_string();
        let hostport = base
            .split_once("://")
            .map_or(base.as_str(), |(_, h)| h)
            .to_string();
        let tls = match trust {
            Trust::PublicRoots => TlsConfig::builder(),
            Trust::CaFile(path) => {
                TlsConfig::builder().root_certs(RootCerts::Specific(Arc::new(read_pem(path)?)))
            }
            Trust::AcceptAnyCertificate => TlsConfig::builder().disable_verification(true),
        }
        .provider(TlsProvider::Rustls)
        .build();
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A redirect from a switch is a login page or a misconfigured URL: say so
            // rather than follow it (and resend credentials elsewhere).
            .max_redirects(0)
            // No connection kept between exchanges: minutes pass between cuts, and a
            // plug or BMC that dropped an idle connection would fail the cut itself.
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .user_agent(format!("plugpull/{}", env!("CARGO_PKG_VERSION")))
            .tls_config(tls)
            .build()
            .into();
        Ok(HttpClient {
            agent,
            base,
            hostport,
            challenge: Challenge::None,
        })
    }

    pub fn hostport(&self) -> &str {
        &self.hostport
    }

    /// One exchange, answering a 401's challenge once when `login` is given. `timeout`
    /// bounds all of it (both round trips of a challenge included). A 401 that remains
    /// is returned as a response; [`Self::checked`] turns it into an error.
    pub fn exchange(
        &mut self,
        req: &Exchange<'_>,
        login: Option<&Login>,
        timeout: Duration,
    ) -> Result<Response, PowerError> {
        let deadline = Instant::now() + timeout;
        let mut answered = false;
        loop {
            let authorization = match login {
                Some(login) => {
                    self.challenge
                        .answer(login, &self.hostport, req.method, req.path, req.body)?
                }
                None => None,
            };
            let r = self.once(req, authorization.as_deref(), deadline, timeout)?;
            if r.status != 401 || login.is_none() || answered {
                return Ok(r);
            }
            let fresh = http_auth::choose(&r.headers, &self.hostport)?;
            // Retry only when the server asked for something we did not send: the scheme
            // first learned, or a digest nonce gone stale. The same challenge again means
            // the password is wrong.
            let retry = match (&self.challenge, &fresh) {
                (Challenge::None, _) => true,
                (Challenge::Digest(_), Challenge::Digest(new)) => new.stale,
                (Challenge::Basic { .. }, Challenge::Digest(_)) => true,
                _ => false,
            };
            self.challenge = fresh;
            if !retry {
                return Ok(r);
            }
            answered = true;
        }
    }

    /// [`Self::exchange`], with anything but a 2xx an error: 401 names the realm (and
    /// says which settings to check), other statuses quote the body's first bytes.
    pub fn checked(
        &mut self,
        req: &Exchange<'_>,
        login: Option<&Login>,
        timeout: Duration,
    ) -> Result<Response, PowerError> {
        let r = self.exchange(req, login, timeout)?;
        if r.status == 401 {
            return Err(match login {
                None => PowerError::LoginRequired {
                    host: self.hostport.clone(),
                },
                Some(login) => PowerError::LoginRefused {
                    host: self.hostport.clone(),
                    user: login.user.clone(),
                    scheme: self.challenge.scheme(),
                    realm: self.challenge.realm().unwrap_or("").to_string(),
                },
            });
        }
        if !(200..300).contains(&r.status) {
            return Err(status_error(req.method, req.path, &self.hostport, &r));
        }
        Ok(r)
    }

    fn once(
        &self,
        req: &Exchange<'_>,
        authorization: Option<&str>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Response, PowerError> {
        let late = || PowerError::ReplyTimeout {
            hostport: self.hostport.clone(),
            timeout,
        };
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(late)?;
        let mut b = ureq::http::Request::builder()
            .method(req.method)
            .uri(format!("{}{}", self.base, req.path));
        for (k, v) in req.headers {
            b = b.header(*k, *v);
        }
        if let Some(a) = authorization {
            b = b.header("Authorization", a);
        }
        let sent = match req.body {
            Some(body) => {
                let r = b
                    .header("Content-Type", "application/json")
                    .body(body.as_bytes().to_vec())
                    .map_err(|e| self.bad_request(e))?;
                let r = self.agent.configure_request(r).timeout_global(Some(left));
                self.agent.run(r.build())
            }
            None if req.method == "GET" || req.method == "DELETE" => {
                let r = b.body(()).map_err(|e| self.bad_request(e))?;
                let r = self.agent.configure_request(r).timeout_global(Some(left));
                self.agent.run(r.build())
            }
            // A POST without a body still says its length (0, from the empty body): some
            // switches wait for it.
            None => {
                let r = b.body(Vec::new()).map_err(|e| self.bad_request(e))?;
                let r = self.agent.configure_request(r).timeout_global(Some(left));
                self.agent.run(r.build())
            }
        };
        let mut resp = sent.map_err(|e| self.failed(e, timeout))?;
        let status = resp.status().as_u16();
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let raw = resp
            .body_mut()
            .with_config()
            .limit(MAX_REPLY_BYTES as u64)
            .read_to_vec()
            .map_err(|e| self.failed(e, timeout))?;
        let content_type = headers
            .iter()
            .find(|(k, _)| k == "content-type")
            .map(|(_, v)| v.to_ascii_lowercase());
        Ok(Response {
            status,
            content_type,
            headers,
            body: String::from_utf8_lossy(&raw).into_owned(),
        })
    }

    fn bad_request(&self, e: ureq::http::Error) -> PowerError {
        PowerError::BadRequest {
            hostport: self.hostport.clone(),
            message: e.to_string(),
        }
    }

    /// What went wrong, in the operator's terms.
    fn failed(&self, e: ureq::Error, timeout: Duration) -> PowerError {
        let hostport = self.hostport.clone();
        match e {
            ureq::Error::Timeout(_) => PowerError::ReplyTimeout { hostport, timeout },
            ureq::Error::BodyExceedsLimit(_) => PowerError::ReplyTooLong {
                hostport,
                max: MAX_REPLY_BYTES,
            },
            ureq::Error::HostNotFound => PowerError::NoAddress { hostport },
            ureq::Error::ConnectionFailed => PowerError::Connect {
                hostport,
                source: std::io::Error::other("connection failed"),
            },
            ureq::Error::Io(source) => match source.kind() {
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                    PowerError::ReplyTimeout { hostport, timeout }
                }
                std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable
                | std::io::ErrorKind::AddrNotAvailable => PowerError::Connect { hostport, source },
                _ if is_certificate(&source.to_string()) => PowerError::Certificate {
                    hostport,
                    message: source.to_string(),
                },
                _ => PowerError::ReadReply { hostport, source },
            },
            e @ (ureq::Error::Rustls(_) | ureq::Error::Tls(_) | ureq::Error::Pem(_)) => {
                PowerError::Certificate {
                    hostport,
                    message: e.to_string(),
                }
            }
            ureq::Error::LargeResponseHeader(..) => PowerError::ReplyTooLong {
                hostport,
                max: MAX_REPLY_BYTES,
            },
            other => PowerError::NotHttp {
                hostport,
                message: shown_prefix(other.to_string().as_bytes(), QUOTED_BYTES),
            },
        }
    }
}

/// The error for a reply whose status is not 2xx (nor a 401, which the callers name
/// with the login they tried): a redirect names where it pointed, anything else quotes
/// the body's first bytes.
pub fn status_error(method: &str, path: &str, hostport: &str, r: &Response) -> PowerError {
    if (300..400).contains(&r.status) {
        return PowerError::Redirected {
            method: method.to_string(),
            path: path.to_string(),
            host: hostport.to_string(),
            status: r.status,
            location: shown_prefix(r.header("location").unwrap_or("").as_bytes(), QUOTED_BYTES),
        };
    }
    PowerError::HttpStatus {
        method: method.to_string(),
        path: path.to_string(),
        host: hostport.to_string(),
        status: r.status,
        body: shown_prefix(r.body.trim().as_bytes(), QUOTED_BYTES),
    }
}

/// Whether a TLS failure is about the server's certificate (rustls says "certificate").
fn is_certificate(message: &str) -> bool {
    message.to_ascii_lowercase().contains("certificate")
}

/// The certificates of a PEM file, at least one.
fn read_pem(path: &Path) -> Result<Vec<Certificate<'static>>, PowerError> {
    let bad = |message: String| PowerError::CaFile {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&text) {
        if let PemItem::Certificate(c) = item.map_err(|e| bad(e.to_string()))? {
            certs.push(c.to_owned());
        }
    }
    if certs.is_empty() {
        return Err(bad("no \"BEGIN CERTIFICATE\" in it".into()));
    }
    Ok(certs)
}
