//! The messages between `plugpull agent` (on the host under test) and the whole-host
//! controller (`plugpull campaign` with `[target] kind = "host"`).
//!
//! Why a separate, tiny protocol instead of a new witness message: the witness keeps
//! promises and must stay minimal; the controller only needs two facts from the host
//! ("I booted, and here is how the previous run verified"; "the new run is acking").
//! Each message is one JSON line, answered by one JSON line. The agent opens a connection
//! per message, so a host that dies mid-conversation leaves nothing half-open to clean
//! up; the controller nonetheless serves any number of messages on one connection, in
//! order, until EOF ([`serve`]), because a guest behind QEMU's virtio-serial reaches it
//! through ONE host connection that QEMU opens at its start and that carries every guest
//! connection's bytes in a row (the guest side cannot signal a close).
//! Format `plugpull-agent/1`, documented in docs/campaign.md.

use super::agent_auth::{AgentKey, AuthError, NonceMsg, Sealed, Session, nonce_hex, parse_nonce};
use crate::model::ReportSummary;
use crate::wire::auth::nonce;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const FORMAT: &str = "plugpull-agent/1";

/// Longest message line: a peer that never sends a newline cannot exhaust memory.
const MAX_LINE_BYTES: usize = 1 << 20;

/// Once a message's first byte has arrived, how long its newline may take. A message is
/// a few hundred bytes written at once, so a peer that stops halfway (a host that died
/// mid-write, a stray client) is dropped after this, however long it was allowed to
/// stay silent before it began.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a message did not go through.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error("reading a message")]
    Read(#[source] std::io::Error),
    #[error("the peer closed the connection without answering")]
    Closed,
    #[error("nothing arrived within {waited:?}")]
    Silent { waited: Duration },
    #[error(
        "a message began but its line did not end within {waited:?} ({bytes} bytes so far): {start}"
    )]
    LineTimeout {
        waited: Duration,
        bytes: usize,
        start: String,
    },
    #[error(
        "the connection ended in the middle of a message ({bytes} bytes without a newline): {start}"
    )]
    Truncated { bytes: usize, start: String },
    #[error("a line longer than {MAX_LINE_BYTES} bytes: not a {FORMAT} message")]
    TooLong,
    #[error("not a {FORMAT} message: {line}")]
    NotOurs {
        line: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "peer speaks {0}, this plugpull speaks {FORMAT}: run the same plugpull version on both"
    )]
    OtherVersion(String),
    #[error("resolving the controller address {addr}")]
    Resolve {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// A line that failed the keyed authentication (docs/campaign.md, the agent key).
    #[error("refused")]
    Auth(#[from] AuthError),
    /// A peer that does not authenticate where it must, or the other way round.
    #[error("refused: {0}")]
    Unauthenticated(&'static str),
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error("connecting to the controller at {addr}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

type Result<T, E = ProtoError> = std::result::Result<T, E>;

/// Agent → controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentMsg {
    /// Sent at every start: the verification of the run the state file named, if any.
    Boot {
        host: String,
        previous: Option<Box<PreviousRun>>,
    },
    /// The run of `cycle` has `acked` acks confirmed: the controller may cut.
    Acking {
        host: String,
        cycle: u64,
        run_id: String,
        acked: u64,
    },
}

/// How the previous run (the one power was cut under) verified, at boot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PreviousRun {
    pub cycle: u64,
    pub run_id: String,
    /// The verify report's summary; verdict ERROR when the agent could not verify.
    #[serde(flatten)]
    pub report: ReportSummary,
    /// Acks the witness holds for the run.
    pub acked_records: u64,
    pub last_acked: Option<super::results::LastAcked>,
    /// Boot → drive found again, ms.
    pub reattach_ms: Option<f64>,
    pub unsafe_shutdowns_delta: Option<i64>,
    /// The drive's health before the run and at boot, and what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::device::health::AcrossTheCut>,
    /// Why the agent could not verify (verdict "ERROR").
    pub error: Option<String>,
}

/// The writer settings of one run, chosen by the controller so the whole campaign is
/// described by the controller's config alone.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOrder {
    pub cycle: u64,
    pub seed: u64,
    pub min_acks: u64,
    pub record_min: u64,
    pub record_max: u64,
    /// "sequential" or "random".
    pub placement: String,
    pub streams: u16,
    pub region: Option<u64>,
}

/// Controller → agent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Start this run.
    Next(RunOrder),
    /// The campaign is complete (or is not expecting this host): write nothing.
    Stop { why: String },
    /// Message received.
    Ok,
    /// The message was not taken (another host's report, a run the controller did not
    /// start on this host); `why` says so. The agent treats it as an error.
    Refused { why: String },
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    format: String,
    #[serde(flatten)]
    body: T,
}

/// Writes one message as one line.
pub fn write_line<T: Serialize>(mut s: impl Write, body: &T) -> Result<()> {
    let mut line = serde_json::to_string(&Envelope {
        format: FORMAT.into(),
        body,
    })?;
    line.push('\n');
    s.write_all(line.as_bytes())?;
    s.flush()?;
    Ok(())
}

/// Reads message after message from one connection. Keeps its buffer across messages:
/// bytes of the next message that arrived with this one are not lost.
pub struct LineReader {
    r: BufReader<TcpStream>,
}

impl LineReader {
    pub fn new(s: TcpStream) -> LineReader {
        LineReader {
            r: BufReader::new(s),
        }
    }

    pub fn stream(&self) -> &TcpStream {
        self.r.get_ref()
    }

    /// The next message: waits up to `idle` for its first byte, then up to `line` for
    /// its newline. `Ok(None)`: the peer closed the connection between messages.
    pub fn next<T: for<'de> Deserialize<'de>>(
        &mut self,
        idle: Duration,
        line: Duration,
    ) -> Result<Option<T>> {
        let Some(bytes) = self.next_line(idle, line)? else {
            return Ok(None);
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim_end();
        let env: Envelope<T> =
            serde_json::from_str(text).map_err(|source| ProtoError::NotOurs {
                line: shorten(text),
                source,
            })?;
        if env.format != FORMAT {
            return Err(ProtoError::OtherVersion(env.format));
        }
        Ok(Some(env.body))
    }

    /// One raw line with its newline, under the two deadlines of [`next`](Self::next).
    fn next_line(&mut self, idle: Duration, line: Duration) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::new();
        let mut deadline = Instant::now() + idle;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timed_out(&out, idle, line));
            }
            self.r
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(ProtoError::Read)?;
            let buf = match self.r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(self.timed_out(&out, idle, line));
                }
                Err(e) => return Err(ProtoError::Read(e)),
            };
            if buf.is_empty() {
                return match out.is_empty() {
                    true => Ok(None),
                    false => Err(ProtoError::Truncated {
                        bytes: out.len(),
                        start: shorten(&String::from_utf8_lossy(&out)),
                    }),
                };
            }
            if out.is_empty() {
                // The message began: the rest must follow promptly.
                deadline = Instant::now() + line;
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            out.extend_from_slice(&buf[..take]);
            self.r.consume(take);
            if done {
                return Ok(Some(out));
            }
            if out.len() > MAX_LINE_BYTES {
                return Err(ProtoError::TooLong);
            }
        }
    }

    fn timed_out(&self, out: &[u8], idle: Duration, line: Duration) -> ProtoError {
        if out.is_empty() {
            ProtoError::Silent { waited: idle }
        } else {
            ProtoError::LineTimeout {
                waited: line,
                bytes: out.len(),
                start: shorten(&String::from_utf8_lossy(out)),
            }
        }
    }
}

/// The start of what a peer sent, for a log line.
fn shorten(s: &str) -> String {
    const SHOWN_CHARS: usize = 120;
    match s.char_indices().nth(SHOWN_CHARS) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// How one connection served by [`serve`] ended.
#[derive(Debug)]
pub struct Served {
    /// Messages answered.
    pub messages: u64,
    /// `Ok`: the peer closed between messages, or the handler stopped; `Err`: why the
    /// connection was dropped (silence, garbage, a half-written line, a failed write, a
    /// peer that did not prove it holds the key).
    pub end: Result<()>,
}

/// Whom the controller's listener takes messages from.
#[derive(Clone, Debug)]
pub struct Access {
    /// `[agent] key_file`: agents that prove they hold it.
    pub key: Option<AgentKey>,
    /// `[agent] allow_unauthenticated_agents` (loopback only): agents without a key too.
    pub allow_unauthenticated: bool,
}

/// What the handler is told of a message besides its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The connection it came on (the listener numbers them).
    pub connection: u64,
    /// Whether it came sealed under the agent key.
    pub keyed: bool,
}

/// The controller's side of one connection: message after message, each answered by
/// `handle`'s reply in order, until the peer closes, the handler returns `None` (the
/// campaign is over), or something that is not a whole, acceptable message arrives.
/// `idle`: how long the connection may stay silent before each message. `written` is
/// called once each reply is written (the controller waits for its last reply to leave
/// before it exits).
///
/// With a key, a `hello` starts a session (again on the same connection: a VM's
/// virtio-serial port carries one guest connection after another), and only `sealed`
/// messages of that session are handed on; a plain message is refused unless
/// `allow_unauthenticated`. Anything refused closes the connection; the caller logs why.
pub fn serve(
    s: TcpStream,
    idle: Duration,
    access: &Access,
    connection: u64,
    mut handle: impl FnMut(AgentMsg, Origin) -> Option<Reply>,
    mut written: impl FnMut(),
) -> Served {
    let mut messages = 0;
    let end = (|| {
        // A reply is small, but a peer that never reads must not hold this thread.
        s.set_write_timeout(Some(LINE_TIMEOUT))?;
        let mut r = LineReader::new(s);
        let mut session: Option<Session> = None;
        while let Some(v) = r.next::<serde_json::Value>(idle, LINE_TIMEOUT)? {
            let kind = v.get("type").and_then(|t| t.as_str()).unwrap_or_default();
            match kind {
                "hello" => {
                    let Some(key) = &access.key else {
                        return Err(ProtoError::Unauthenticated(
                            "the agent has a key_file but this controller has no [agent] key_file: give both the same key",
                        ));
                    };
                    let hello: NonceMsg = from_value(v)?;
                    let agent_nonce = parse_nonce(&hello.nonce)?;
                    let ours = nonce();
                    session = Some(Session::controller(key, &agent_nonce, &ours));
                    write_line(
                        r.stream(),
                        &Tagged::Challenge(NonceMsg {
                            nonce: nonce_hex(&ours),
                        }),
                    )?;
                }
                "sealed" => {
                    let Some(sess) = session.as_mut() else {
                        return Err(ProtoError::Unauthenticated(
                            "a sealed message before any hello on this connection (replayed from another?)",
                        ));
                    };
                    let body = sess.open(from_value::<Sealed>(v)?)?;
                    let msg = parse_line::<AgentMsg>(&body)?;
                    let origin = Origin {
                        connection,
                        keyed: true,
                    };
                    let Some(reply) = handle(msg, origin) else {
                        return Ok(());
                    };
                    let sealed = sess.seal(line_of(&reply)?);
                    write_line(r.stream(), &Tagged::Sealed(sealed))?;
                    messages += 1;
                    written();
                }
                _ => {
                    if session.is_some() {
                        return Err(ProtoError::Unauthenticated(
                            "an unsealed message inside an authenticated session (injected?)",
                        ));
                    }
                    if !access.allow_unauthenticated {
                        return Err(ProtoError::Unauthenticated(
                            "an agent without a key: give it key_file (the controller's [agent] key_file), or, on a loopback listen address only, set allow_unauthenticated_agents = true",
                        ));
                    }
                    let msg = from_value::<AgentMsg>(v)?;
                    let origin = Origin {
                        connection,
                        keyed: false,
                    };
                    let Some(reply) = handle(msg, origin) else {
                        return Ok(());
                    };
                    write_line(r.stream(), &reply)?;
                    messages += 1;
                    written();
                }
            }
        }
        Ok(())
    })();
    Served { messages, end }
}

/// The handshake and sealed lines, tagged like every other message.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Tagged {
    Hello(NonceMsg),
    Challenge(NonceMsg),
    Sealed(Sealed),
}

fn from_value<T: for<'de> Deserialize<'de>>(v: serde_json::Value) -> Result<T> {
    let text = v.to_string();
    serde_json::from_value(v).map_err(|source| ProtoError::NotOurs {
        line: shorten(&text),
        source,
    })
}

/// A message's whole line (its envelope, no newline): what a sealed line carries.
fn line_of<T: Serialize>(body: &T) -> Result<String> {
    Ok(serde_json::to_string(&Envelope {
        format: FORMAT.into(),
        body,
    })?)
}

/// The message in the line a sealed line carried.
fn parse_line<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T> {
    let env: Envelope<T> = serde_json::from_str(line).map_err(|source| ProtoError::NotOurs {
        line: shorten(line),
        source,
    })?;
    if env.format != FORMAT {
        return Err(ProtoError::OtherVersion(env.format));
    }
    Ok(env.body)
}

/// One request, one reply, on a fresh connection; with a key, after the handshake and
/// sealed both ways.
pub fn request(
    addr: &str,
    msg: &AgentMsg,
    timeout: Duration,
    key: Option<&AgentKey>,
) -> Result<Reply> {
    let sa = std::net::ToSocketAddrs::to_socket_addrs(addr)
        .map_err(|source| ProtoError::Resolve {
            addr: addr.into(),
            source,
        })?
        .next()
        .ok_or_else(|| ProtoError::NoAddress(addr.into()))?;
    let mut s = TcpStream::connect_timeout(&sa, Duration::from_secs(5)).map_err(|source| {
        ProtoError::Connect {
            addr: addr.into(),
            source,
        }
    })?;
    // A controller that stops reading must not hold the agent: it retries.
    s.set_write_timeout(Some(timeout))?;
    let Some(key) = key else {
        write_line(&mut s, msg)?;
        return LineReader::new(s)
            .next(timeout, timeout)?
            .ok_or(ProtoError::Closed);
    };
    let ours = nonce();
    write_line(
        &mut s,
        &Tagged::Hello(NonceMsg {
            nonce: nonce_hex(&ours),
        }),
    )?;
    let mut r = LineReader::new(s);
    let Tagged::Challenge(c) = r
        .next::<Tagged>(timeout, timeout)?
        .ok_or(ProtoError::Closed)?
    else {
        return Err(ProtoError::Unauthenticated(
            "the controller did not answer hello with a challenge",
        ));
    };
    let mut sess = Session::agent(key, &ours, &parse_nonce(&c.nonce)?);
    write_line(r.stream(), &Tagged::Sealed(sess.seal(line_of(msg)?)))?;
    match r
        .next::<Tagged>(timeout, timeout)?
        .ok_or(ProtoError::Closed)?
    {
        Tagged::Sealed(reply) => parse_line(&sess.open(reply)?),
        _ => Err(ProtoError::Unauthenticated(
            "the controller answered with an unsealed line on an authenticated connection",
        )),
    }
}

/// Calls `f` until it succeeds, pausing `pause` between tries and telling `on_fail` of
/// each failure; once `wait` has passed since the first try, returns the last error.
///
/// Why the agent retries everything it sends: at boot the controller or the witness may
/// still be coming up (a shared outage), and a connection that dies mid-message (its
/// peer restarted, a virtio-serial port whose host side reconnects) is answered by a
/// fresh one. Every try is itself bounded (connect, write and read timeouts), so the
/// agent never hangs on a dead connection. Resending is safe: the controller answers a
/// repeated message as it did the first, and the witness takes a repeated Hello of a
/// run without acks.
pub fn retrying<T, E>(
    wait: Duration,
    pause: Duration,
    mut on_fail: impl FnMut(&E),
    mut f: impl FnMut() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let t0 = Instant::now();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if t0.elapsed() >= wait => return Err(e),
            Err(e) => {
                on_fail(&e);
                std::thread::sleep(pause);
            }
        }
    }
}

#[cfg(test)]
mod tests;
