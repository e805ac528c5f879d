//! The whole-host controller's agent listener: accepts agent connections, serves each on
//! a thread of its own, and hands every message that passed the connection's
//! authentication to the campaign loop with where it came from.
//!
//! Why a file of its own: `host.rs` is the campaign loop (what a message means); this is
//! who may speak to it and how many connections may wait. It depends on nothing in
//! `host.rs`.

use super::agent_proto::{Access, AgentMsg, Origin, Reply, serve};
use crate::exit::error_chain;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Why the agent listener did not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("listening for the agent on {addr} (agent.listen): is another controller running?")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the agent listener's own address")]
    LocalAddr(#[source] std::io::Error),
    #[error(
        "[agent] key_file is not set: agents must prove they hold a key, or anyone who reaches agent.listen can report any verdict. Make one with `head -c 32 /dev/urandom | base64 > agent.key`, name it in [agent] key_file and in the agent's key_file (or, for agents on this machine only, set allow_unauthenticated_agents = true with a loopback listen address)"
    )]
    NoKey,
    #[error(
        "[agent] allow_unauthenticated_agents = true needs a loopback listen address (127.0.0.1, ::1); {addr} listens on {bound}, where anyone who reaches it could report any verdict. Set [agent] key_file instead"
    )]
    UnauthenticatedNotLoopback { addr: String, bound: String },
}

/// One message from an agent, where it came from, and how to answer it.
pub type Incoming = (AgentMsg, Origin, String, Responder);

/// How the campaign loop answers a message: the reply goes to the connection's thread,
/// which writes it and says so. Waiting for that (briefly) keeps the last reply from
/// being lost when the campaign then ends and the process exits.
pub struct Responder {
    reply: mpsc::Sender<Reply>,
    written: mpsc::Receiver<()>,
}

impl Responder {
    pub fn answer(self, r: Reply) {
        const WRITTEN_WAIT: Duration = Duration::from_secs(5);
        if self.reply.send(r).is_ok() {
            let _ = self.written.recv_timeout(WRITTEN_WAIT);
        }
    }
}

/// Most agent connections held open at once. A real host has one at a time (a VM one
/// per serial port); the cap keeps strangers that connect and stay silent, each allowed
/// to for minutes, from piling up threads.
pub const MAX_AGENT_CONNECTIONS: usize = 64;

/// The open agent connections by accept order, so the oldest can be closed when a new
/// one would pass [`MAX_AGENT_CONNECTIONS`] (the newest is the likeliest to be a host
/// about to speak; a VM's port that loses its connection makes a new one).
#[derive(Clone, Default)]
struct Open(Arc<Mutex<BTreeMap<u64, TcpStream>>>);

impl Open {
    /// Registers `s` as connection `id`; returns the peer of the oldest one, closed to
    /// make room, if any.
    fn add(&self, id: u64, s: &TcpStream) -> Option<String> {
        let mut m = crate::sync::lock(&self.0);
        if let Ok(c) = s.try_clone() {
            m.insert(id, c);
        }
        if m.len() <= MAX_AGENT_CONNECTIONS {
            return None;
        }
        let (_, oldest) = m.pop_first()?;
        let who = peer(&oldest);
        // Its thread's read returns at once and the thread ends.
        let _ = oldest.shutdown(Shutdown::Both);
        Some(who)
    }

    fn remove(&self, id: u64) {
        crate::sync::lock(&self.0).remove(&id);
    }
}

fn peer(s: &TcpStream) -> String {
    s.peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Accepts agent connections, each on a thread of its own: message after message
/// (one line each) is handed to the campaign loop, whose reply is written back, in
/// order, until the agent closes. A connection that sends something else is dropped
/// with a log line.
///
/// Unkeyed agents are taken only when explicitly allowed, and that only on a loopback
/// address: checked on the address actually bound, so a name that resolves elsewhere
/// (or `0.0.0.0`) cannot slip through.
pub fn listen(
    addr: &str,
    idle: Duration,
    quiet: bool,
    access: Access,
) -> Result<(String, mpsc::Receiver<Incoming>), ListenError> {
    let l = TcpListener::bind(addr).map_err(|source| ListenError::Bind {
        addr: addr.into(),
        source,
    })?;
    let bound = l.local_addr().map_err(ListenError::LocalAddr)?;
    if access.key.is_none() && !access.allow_unauthenticated {
        return Err(ListenError::NoKey);
    }
    if access.allow_unauthenticated && !bound.ip().is_loopback() {
        return Err(ListenError::UnauthenticatedNotLoopback {
            addr: addr.into(),
            bound: bound.to_string(),
        });
    }
    let local = bound.to_string();
    let access = Arc::new(access);
    let (tx, rx) = mpsc::channel::<Incoming>();
    let log = move |m: String| {
        if !quiet {
            eprintln!("plugpull campaign: {m}");
        }
    };
    std::thread::spawn(move || {
        let open = Open::default();
        for (id, s) in (0u64..).zip(l.incoming().flatten()) {
            if let Some(p) = open.add(id, &s) {
                log(format!(
                    "{MAX_AGENT_CONNECTIONS} agent connections are open: closing the oldest, from {p}"
                ));
            }
            let (tx, open, access) = (tx.clone(), open.clone(), access.clone());
            std::thread::spawn(move || {
                let peer = peer(&s);
                // Whom to tell that the reply in hand is written.
                let waiting = Cell::new(None::<mpsc::Sender<()>>);
                let served = serve(
                    s,
                    idle,
                    &access,
                    id,
                    |msg, origin| {
                        let (reply, rrx) = mpsc::channel();
                        let (wtx, written) = mpsc::channel();
                        let answer = Responder { reply, written };
                        tx.send((msg, origin, peer.clone(), answer)).ok()?;
                        waiting.set(Some(wtx));
                        // No reply: the campaign is over.
                        rrx.recv().ok()
                    },
                    || {
                        if let Some(w) = waiting.take() {
                            let _ = w.send(());
                        }
                    },
                );
                open.remove(id);
                if let Err(e) = &served.end {
                    log(format!(
                        "dropping an agent connection from {peer} after {} message(s): {}",
                        served.messages,
                        error_chain(e)
                    ));
                }
            });
        }
    });
    Ok((local, rx))
}
