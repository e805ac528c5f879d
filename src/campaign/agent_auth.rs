//! Keyed authentication of the agent protocol: every peer proves it holds the key.
//!
//! Why: the controller records whatever verdict an agent reports, and an unauthenticated
//! listener lets anyone who reaches it forge a campaign's result (a PASS for a drive that
//! lost data, a FAIL for one that did not). The agent protocol is JSON lines, not the
//! witness's binary frames, so it reuses the witness's key file and nonce exchange
//! (`wire::auth`) with a MAC per line:
//!
//! 1. the agent sends `hello` with a 16-byte random nonce, the controller answers
//!    `challenge` with its own (both in hex, both unauthenticated);
//! 2. both derive the session key `keyed_blake3(agent key, "plugpull agent session v1" |
//!    agent nonce | controller nonce)`, where the agent key is
//!    `derive_key("plugpull 2025 campaign agent key v1", the witness pre-shared key of
//!    the key file)`;
//! 3. every later message in either direction is a `sealed` line carrying the message's
//!    own line as `body`, a per-direction sequence number `seq` from 0, and `mac`, the
//!    first 16 bytes of `keyed_blake3(session key, direction | seq u64 LE | body)`.
//!
//! A line replayed on another connection fails (other nonces, other session key); one
//! replayed, dropped or reordered within a connection fails (the sequence number); a
//! reply reflected back fails (the direction). Byte layouts in docs/protocol.md.

use crate::wire::auth::{Key, KeyError, NONCE_BYTES};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Context string that turns the key file's witness key into the agent key.
const AGENT_KEY_CONTEXT: &str = "plugpull 2025 campaign agent key v1";
/// Prefix of the session-key derivation input.
const SESSION_LABEL: &[u8] = b"plugpull agent session v1";
/// Bytes of a line's MAC (sent as 32 hex digits).
pub const MAC_BYTES: usize = 16;

/// Direction byte: agent to controller.
pub const DIR_TO_CONTROLLER: u8 = 1;
/// Direction byte: controller to agent.
pub const DIR_TO_AGENT: u8 = 2;

/// The agent protocol's key, from the same kind of key file as `--key-file`.
#[derive(Clone)]
pub struct AgentKey([u8; 32]);

impl std::fmt::Debug for AgentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentKey(..)")
    }
}

impl AgentKey {
    pub fn from_file(path: &Path) -> Result<AgentKey, KeyError> {
        Ok(AgentKey::from_key(&Key::from_file(path)?))
    }

    pub fn from_key(k: &Key) -> AgentKey {
        AgentKey(k.derive_subkey(AGENT_KEY_CONTEXT))
    }
}

/// `{"type": "hello"}` and `{"type": "challenge"}`: a side's nonce, in hex.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NonceMsg {
    pub nonce: String,
}

/// `{"type": "sealed"}`: one authenticated message.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sealed {
    pub seq: u64,
    /// The message's own line (its JSON object, no newline).
    pub body: String,
    /// 32 hex digits.
    pub mac: String,
}

/// Why a line failed authentication.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("a nonce that is not {NONCE_BYTES} bytes in hex")]
    BadNonce,
    #[error(
        "MAC check failed on message {seq} of this connection: the agent's key_file differs from the controller's [agent] key_file, or the message was forged or replayed from another connection"
    )]
    Mismatch { seq: u64 },
    #[error(
        "message numbered {got} where {want} was due: replayed, dropped or reordered within this connection"
    )]
    OutOfOrder { want: u64, got: u64 },
}

pub fn nonce_hex(n: &[u8; NONCE_BYTES]) -> String {
    n.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn parse_nonce(s: &str) -> Result<[u8; NONCE_BYTES], AuthError> {
    let mut out = [0u8; NONCE_BYTES];
    if s.len() != NONCE_BYTES * 2 || !s.is_ascii() {
        return Err(AuthError::BadNonce);
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| AuthError::BadNonce)?;
    }
    Ok(out)
}

/// One side's half of an authenticated connection.
pub struct Session {
    key: [u8; 32],
    send_dir: u8,
    recv_dir: u8,
    send_seq: u64,
    recv_seq: u64,
}

impl Session {
    fn new(
        k: &AgentKey,
        agent: &[u8; NONCE_BYTES],
        ctl: &[u8; NONCE_BYTES],
        send_dir: u8,
    ) -> Session {
        let mut h = blake3::Hasher::new_keyed(&k.0);
        h.update(SESSION_LABEL);
        h.update(agent);
        h.update(ctl);
        Session {
            key: *h.finalize().as_bytes(),
            send_dir,
            recv_dir: DIR_TO_CONTROLLER + DIR_TO_AGENT - send_dir,
            send_seq: 0,
            recv_seq: 0,
        }
    }

    pub fn agent(k: &AgentKey, agent: &[u8; NONCE_BYTES], ctl: &[u8; NONCE_BYTES]) -> Session {
        Session::new(k, agent, ctl, DIR_TO_CONTROLLER)
    }

    pub fn controller(k: &AgentKey, agent: &[u8; NONCE_BYTES], ctl: &[u8; NONCE_BYTES]) -> Session {
        Session::new(k, agent, ctl, DIR_TO_AGENT)
    }

    fn mac(&self, dir: u8, seq: u64, body: &str) -> String {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(&[dir]);
        h.update(&seq.to_le_bytes());
        h.update(body.as_bytes());
        h.finalize().as_bytes()[..MAC_BYTES]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Seals the message line `body` (no newline).
    pub fn seal(&mut self, body: String) -> Sealed {
        let seq = self.send_seq;
        self.send_seq += 1;
        let mac = self.mac(self.send_dir, seq, &body);
        Sealed { seq, body, mac }
    }

    /// Checks a received sealed line; returns its message line.
    pub fn open(&mut self, s: Sealed) -> Result<String, AuthError> {
        if s.seq != self.recv_seq {
            return Err(AuthError::OutOfOrder {
                want: self.recv_seq,
                got: s.seq,
            });
        }
        let want = self.mac(self.recv_dir, s.seq, &s.body);
        // Constant-time comparison: a forger learns whether it failed, not where.
        let same = want.len() == s.mac.len()
            && want
                .bytes()
                .zip(s.mac.bytes())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0;
        if !same {
            return Err(AuthError::Mismatch { seq: s.seq });
        }
        self.recv_seq += 1;
        Ok(s.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> AgentKey {
        AgentKey::from_key(&Key::from_secret(s.as_bytes()).unwrap())
    }

    #[test]
    fn sealed_lines_open_once_in_order_on_their_own_connection_only() {
        let k = key("0123456789abcdef0123");
        let (a, c) = ([1; NONCE_BYTES], [2; NONCE_BYTES]);
        let mut agent = Session::agent(&k, &a, &c);
        let mut ctl = Session::controller(&k, &a, &c);
        let m0 = agent.seal("zero".into());
        let m1 = agent.seal("one".into());
        assert_eq!(ctl.open(m0.clone()).unwrap(), "zero");
        assert!(ctl.open(m0.clone()).is_err(), "replayed");
        assert_eq!(ctl.open(m1).unwrap(), "one");
        let mut other = Session::controller(&k, &a, &[3; NONCE_BYTES]);
        assert!(other.open(m0).is_err(), "another connection");
        let r = ctl.seal("reply".into());
        assert!(Session::agent(&k, &a, &c).open(r.clone()).is_ok());
        assert!(
            Session::controller(&k, &a, &c).open(r).is_err(),
            "reflected"
        );
        let mut wrong = Session::controller(&key("another key of 20 b"), &a, &c);
        assert!(
            wrong
                .open(Session::agent(&k, &a, &c).seal("x".into()))
                .is_err()
        );
        let mut forged = Session::agent(&k, &a, &c).seal("x".into());
        forged.body = "y".into();
        assert!(Session::controller(&k, &a, &c).open(forged).is_err());
    }

    #[test]
    fn nonces_round_trip_in_hex() {
        let n = [0xab; NONCE_BYTES];
        assert_eq!(parse_nonce(&nonce_hex(&n)).unwrap(), n);
        assert!(parse_nonce("abc").is_err());
    }
}
