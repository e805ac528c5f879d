//! The messages between `plugpull agent` (on the host under test) and the whole-host
//! controller (`plugpull campaign` with `[target] kind = "host"`).
//!
//! Why a separate, tiny protocol instead of a new witness message: the witness keeps
//! promises and must stay minimal; the controller only needs two facts from the host
//! ("I booted, and here is how the previous run verified"; "the new run is acking").
//! Each message is one JSON line on its own TCP connection, answered by one JSON line,
//! so a host that dies mid-conversation leaves nothing half-open to clean up.
//! Format `plugpull-agent/1`, documented in docs/campaign.md.

use crate::model::ReportSummary;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

pub const FORMAT: &str = "plugpull-agent/1";

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
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    format: String,
    #[serde(flatten)]
    body: T,
}

pub fn write_line<T: Serialize>(s: &mut TcpStream, body: &T) -> Result<()> {
    let mut line = serde_json::to_string(&Envelope {
        format: FORMAT.into(),
        body,
    })?;
    line.push('\n');
    s.write_all(line.as_bytes())?;
    s.flush()?;
    Ok(())
}

pub fn read_line<T: for<'de> Deserialize<'de>>(s: &TcpStream, timeout: Duration) -> Result<T> {
    s.set_read_timeout(Some(timeout))?;
    let mut line = String::new();
    BufReader::new(s)
        .take_line(&mut line)
        .map_err(ProtoError::Read)?;
    if line.is_empty() {
        return Err(ProtoError::Closed);
    }
    let env: Envelope<T> =
        serde_json::from_str(line.trim_end()).map_err(|source| ProtoError::NotOurs {
            line: line.trim_end().to_string(),
            source,
        })?;
    if env.format != FORMAT {
        return Err(ProtoError::OtherVersion(env.format));
    }
    Ok(env.body)
}

trait TakeLine {
    fn take_line(&mut self, s: &mut String) -> std::io::Result<usize>;
}

impl<R: std::io::Read> TakeLine for BufReader<R> {
    /// At most 1 MiB: a peer that never sends a newline cannot exhaust memory.
    fn take_line(&mut self, s: &mut String) -> std::io::Result<usize> {
        use std::io::Read;
        self.by_ref().take(1 << 20).read_line(s)
    }
}

/// One request, one reply, on a fresh connection.
pub fn request(addr: &str, msg: &AgentMsg, timeout: Duration) -> Result<Reply> {
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
    write_line(&mut s, msg)?;
    read_line(&s, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_their_tags() {
        let m = AgentMsg::Acking {
            cycle: 3,
            run_id: "ab".into(),
            acked: 7,
        };
        let v = serde_json::to_value(Envelope {
            format: FORMAT.into(),
            body: &m,
        })
        .unwrap();
        assert_eq!(v["type"], "acking");
        assert_eq!(v["format"], FORMAT);
        let back: Envelope<AgentMsg> = serde_json::from_value(v).unwrap();
        assert!(matches!(back.body, AgentMsg::Acking { cycle: 3, .. }));
        let r = serde_json::to_value(Reply::Stop { why: "done".into() }).unwrap();
        assert_eq!(r["type"], "stop");
    }

    /// A boot report as agents before the shared summary type wrote it (its fields in
    /// their old order) still reads, and reads back the same after a round trip.
    #[test]
    fn an_old_boot_report_reads() {
        let old = r#"{"format":"plugpull-agent/1","type":"boot","host":"h","previous":{"cycle":2,"run_id":"ab","verdict":"FAIL","summary":"s","counts":{"intact":1,"lost":2},"acked_records":3,"last_acked":null,"loss_window":{"records":2,"bytes":8192,"ms":1.5},"ordering_holes":1,"dead_device":null,"reattach_ms":4.0,"unsafe_shutdowns_delta":1,"error":null}}"#;
        let env: Envelope<AgentMsg> = serde_json::from_str(old).unwrap();
        let AgentMsg::Boot {
            previous: Some(p), ..
        } = &env.body
        else {
            panic!("not a boot report with a previous run");
        };
        assert_eq!(p.report.verdict, crate::model::Verdict::Fail);
        assert_eq!(p.report.counts.get(crate::model::RecordClass::Lost), 2);
        assert_eq!(p.report.ordering_holes, 1);
        assert_eq!(p.acked_records, 3);
        let again: Envelope<AgentMsg> =
            serde_json::from_str(&serde_json::to_string(&env).unwrap()).unwrap();
        assert_eq!(
            serde_json::to_value(&again).unwrap(),
            serde_json::to_value(&env).unwrap()
        );
    }
}
