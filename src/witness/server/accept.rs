//! The gate: one thread that accepts connections and carries each through its
//! handshake (Auth, Heartbeats, up to the first Hello or Fetch), polling every pending
//! socket, then hands it to a thread of its own within its role's cap.
//!
//! Why one thread for every handshake: before a peer has sent its request it may be
//! anyone, so it must cost almost nothing; a thread per socket from accept on let 1,100
//! idle sockets lock out every writer and fetch.

use crate::wire::auth::{self, Session};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{DecodeError, Msg, PROTOCOL_VERSION, VersionMismatch};
use crate::witness::server::connection::{CONN_STACK_BYTES, Conn};
use crate::witness::server::recv_buf::RecvBuf;
use crate::witness::server::shared::{Shared, lock};
use std::collections::VecDeque;
use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connections still in their handshake (before Hello or Fetch, and Auth with a key)
/// held at once; a new one beyond this closes the oldest pending one.
pub const MAX_PENDING_HANDSHAKES: usize = 256;
/// Fetch connections served at once, apart from the writers' `max_connections`.
pub const FETCH_CONNECTIONS: usize = 16;
/// Largest handshake frame (Auth, Hello, Fetch, Heartbeat) a pending connection may
/// send, and so its buffer: a Hello's descriptor is a few hundred bytes of JSON.
pub const HANDSHAKE_BUF_BYTES: usize = 64 << 10;
/// The gate looks at the stop flag at least this often.
const GATE_MAX_WAIT: Duration = Duration::from_secs(1);
/// Connections accepted per gate round, so a flood of connects cannot starve the
/// pending connections' reads.
const ACCEPTS_PER_ROUND: usize = 1024;

/// Which cap a connection counts against once its first request has arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Writer,
    Fetch,
}

/// A connection still in its handshake, owned by the gate thread: a socket, a small
/// buffer and a deadline, but no thread.
struct Pending {
    stream: TcpStream,
    id: u64,
    peer: SocketAddr,
    since: Instant,
    buf: Vec<u8>,
    /// Set once Auth/Challenge completed (keyed witness only).
    session: Option<Session>,
    /// Frames consumed here (Auth, Heartbeats).
    frames: u64,
    /// Why a Heartbeat reply could not be sent; handed over with the connection
    /// (`Conn::reply_failed`).
    reply_failed: Option<io::Error>,
}

/// How the gate ends a pending connection.
struct Refusal {
    /// Event kind: "probe", "disconnect", "error" or "refused".
    kind: &'static str,
    detail: String,
    /// Told to the peer in an Error frame.
    tell: bool,
    /// The Error frame is left unsealed: after an authentication failure the peer could
    /// not check our MAC and would never see the reason.
    unsealed: bool,
}

impl Refusal {
    fn protocol(m: impl Into<String>) -> Refusal {
        Refusal {
            kind: "error",
            detail: m.into(),
            tell: true,
            unsealed: false,
        }
    }
    fn auth(m: impl std::fmt::Display) -> Refusal {
        Refusal {
            kind: "error",
            detail: format!("authentication failed: {m}"),
            tell: true,
            unsealed: true,
        }
    }
    fn refused(m: String) -> Refusal {
        Refusal {
            kind: "refused",
            detail: m,
            tell: true,
            unsealed: false,
        }
    }
}

/// What a pending connection's buffered bytes amount to so far.
enum Step {
    Wait,
    /// The first request (Hello or Fetch) starts the buffer, its MAC checked.
    Ready(Role),
    Close(Refusal),
}

/// Sends `bytes` without blocking; fails when the socket did not take all of them (a
/// peer that does not read during its handshake is dropped, not waited for).
fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<()> {
    use nix::sys::socket::{MsgFlags, send};
    use std::os::fd::AsRawFd;
    let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
    match send(stream.as_raw_fd(), bytes, flags) {
        Ok(n) if n == bytes.len() => Ok(()),
        Ok(n) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("the peer took {n} of {} bytes of a reply", bytes.len()),
        )),
        Err(e) => Err(e.into()),
    }
}

impl Pending {
    fn new(stream: TcpStream, id: u64, peer: SocketAddr) -> Pending {
        Pending {
            stream,
            id,
            peer,
            since: Instant::now(),
            buf: Vec::new(),
            session: None,
            frames: 0,
            reply_failed: None,
        }
    }

    fn auth_name(&self, sh: &Shared) -> &'static str {
        match (&sh.opts.key, &self.session) {
            (None, _) => "none",
            (Some(_), Some(_)) => "key",
            (Some(_), None) => "pending",
        }
    }

    /// Encodes `m`, sealed when the session is up, and sends it without blocking.
    fn send(&mut self, m: &Msg, seal: bool) -> io::Result<()> {
        let mut out = m.encode();
        if seal {
            auth::seal_opt(self.session.as_mut().map(|s| &mut s.sealer), &mut out, 0);
        }
        send_now(&self.stream, &out)
    }

    /// Reads what the socket holds and looks at the buffered frames.
    fn on_readable(&mut self, sh: &Shared, scratch: &mut [u8]) -> Step {
        use std::os::fd::AsRawFd;
        let room = HANDSHAKE_BUF_BYTES.saturating_sub(self.buf.len());
        let want = room.min(scratch.len()).max(1);
        let flags = nix::sys::socket::MsgFlags::MSG_DONTWAIT;
        match nix::sys::socket::recv(self.stream.as_raw_fd(), &mut scratch[..want], flags) {
            Ok(0) => return self.on_eof(),
            Ok(n) => self.buf.extend_from_slice(&scratch[..n]),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Step::Wait,
            Err(e) => {
                return Step::Close(Refusal {
                    kind: "disconnect",
                    detail: format!("connection error: {e}"),
                    tell: false,
                    unsealed: false,
                });
            }
        }
        self.advance(sh)
    }

    fn on_eof(&self) -> Step {
        let (kind, detail) = if !self.buf.is_empty() {
            let need = match frame::decode(&self.buf) {
                Decoded::NeedMore { need } if need > 0 => format!(" of {need}"),
                _ => String::new(),
            };
            return Step::Close(Refusal::protocol(format!(
                "connection closed in the middle of a frame ({} bytes{need} received)",
                self.buf.len()
            )));
        } else if self.frames == 0 {
            // A connect-and-close probe (a port check): easy to filter out.
            ("probe", "connection closed by the peer")
        } else {
            (
                "disconnect",
                "connection closed by the peer during its handshake",
            )
        };
        Step::Close(Refusal {
            kind,
            detail: detail.into(),
            tell: false,
            unsealed: false,
        })
    }

    /// Handles the handshake frames at the start of the buffer: Auth (answered with a
    /// Challenge), Heartbeats (answered), up to the first request.
    fn advance(&mut self, sh: &Shared) -> Step {
        loop {
            let f = match frame::decode_limited(&self.buf, sh.opts.max_frame_bytes) {
                Decoded::NeedMore { need } if need > HANDSHAKE_BUF_BYTES => {
                    return Step::Close(Refusal::protocol(format!(
                        "a frame of {need} bytes before the handshake is done: Auth, Hello \
                         and Fetch are at most {HANDSHAKE_BUF_BYTES} bytes"
                    )));
                }
                Decoded::NeedMore { .. } if self.reply_failed.is_some() => {
                    return Step::Close(Refusal::protocol(
                        "the peer does not read the witness's replies",
                    ));
                }
                Decoded::NeedMore { .. } => return Step::Wait,
                Decoded::Error(e) => {
                    return Step::Close(Refusal::protocol(format!("bad frame: {e}")));
                }
                Decoded::Frame(f) => f,
            };
            let (ty, len) = (f.ty, f.len_bytes);
            if ty == FrameType::Auth {
                let msg = Msg::decode(&f);
                if let Err(r) = self.on_auth(sh, msg) {
                    return Step::Close(r);
                }
            } else {
                if sh.opts.key.is_some() && self.session.is_none() {
                    return Step::Close(Refusal::auth(
                        "this witness requires authentication: pass --key-file with the \
                         witness's key to plugpull write / verify / fetch",
                    ));
                }
                if let Err(e) = auth::check(self.session.as_mut().map(|s| &mut s.opener), &f) {
                    return Step::Close(Refusal::auth(e));
                }
                match ty {
                    FrameType::Hello => return Step::Ready(Role::Writer),
                    FrameType::Fetch => return Step::Ready(Role::Fetch),
                    FrameType::Heartbeat => {
                        // As on a connection (`Conn::reply`): a failed reply ends this
                        // one after the frames received with it, so a request among
                        // them is still served; with none, at the end of the buffer.
                        if self.reply_failed.is_none() {
                            self.reply_failed = self.send(&Msg::Heartbeat, true).err();
                        }
                    }
                    FrameType::Acks | FrameType::FileAcks => {
                        return Step::Close(Refusal::protocol(
                            "Acks before Hello: a writer must introduce its run first",
                        ));
                    }
                    FrameType::Bye => return Step::Close(Refusal::protocol("Bye before Hello")),
                    other => {
                        return Step::Close(Refusal::protocol(format!(
                            "unexpected {other:?} frame from a writer or fetcher"
                        )));
                    }
                }
            }
            self.buf.drain(..len);
            self.frames += 1;
        }
    }

    /// Auth: allowed once, as the first frame, on a keyed witness; answered with the
    /// witness's nonce.
    fn on_auth(&mut self, sh: &Shared, msg: Result<Msg, DecodeError>) -> Result<(), Refusal> {
        let Some(key) = sh.opts.key.as_ref() else {
            return Err(Refusal::auth(
                "this witness runs without a key: drop --key-file on the client, or restart \
                 `plugpull listen` with --key-file",
            ));
        };
        if self.session.is_some() || self.frames != 0 {
            return Err(Refusal::protocol(
                "Auth must be the first and only handshake frame of a connection",
            ));
        }
        let (version, client_nonce) = match msg {
            Ok(Msg::Auth { version, nonce }) => (version, nonce),
            Ok(_) => unreachable!("an Auth frame decodes to Auth"),
            Err(e) => return Err(Refusal::protocol(format!("bad Auth frame: {}", e.detail()))),
        };
        if version != PROTOCOL_VERSION {
            return Err(Refusal::protocol(VersionMismatch(version).to_string()));
        }
        let witness_nonce = auth::nonce();
        let challenge = Msg::Challenge {
            nonce: witness_nonce,
        };
        if self.send(&challenge, false).is_err() {
            return Err(Refusal::protocol("the peer does not read the Challenge"));
        }
        self.session = Some(Session::witness(key, &client_nonce, &witness_nonce));
        Ok(())
    }
}

/// Accepts connections and carries each through its handshake in this one thread,
/// polling every pending socket; a connection gets a thread of its own only when its
/// first request (Hello or Fetch) has arrived, authenticated when keyed.
///
/// Why: a thread per connection from accept on let 1,100 idle sockets take every
/// slot. Here an idle socket costs a file descriptor and a few
/// bytes, at most MAX_PENDING_HANDSHAKES are held (a new one drops the oldest), each
/// for at most the handshake timeout counted from connect, and writers and fetches
/// have caps of their own.
pub(super) fn gate_loop(sh: Arc<Shared>, listener: TcpListener) {
    if let Err(e) = listener.set_nonblocking(true) {
        sh.log(format_args!(
            "cannot make the listening socket non-blocking: {e}"
        ));
        return;
    }
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut scratch = vec![0u8; HANDSHAKE_BUF_BYTES];
    let mut fds: Vec<libc::pollfd> = Vec::new();
    // The handshake timeout alone: a shorter idle timeout must not cut it (QEMU's
    // chardevs connect at start and speak once the guest has booted: the lab).
    let limit = sh.opts.handshake_timeout.max(Duration::from_millis(1));
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        let wait = pending
            .front()
            .map(|p| (p.since + limit).saturating_duration_since(now))
            .unwrap_or(GATE_MAX_WAIT)
            .min(GATE_MAX_WAIT);
        fds.clear();
        fds.push(pollfd(&listener));
        fds.extend(pending.iter().map(|p| pollfd(&p.stream)));
        if let Err(e) = poll(&mut fds, wait) {
            sh.log(format_args!("poll failed: {e}"));
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let now = Instant::now();
        let ready: Vec<bool> = fds[1..].iter().map(|f| f.revents != 0).collect();
        let mut keep = VecDeque::with_capacity(pending.len());
        for (mut p, readable) in pending.drain(..).zip(ready) {
            let step = if readable {
                p.on_readable(&sh, &mut scratch)
            } else {
                Step::Wait
            };
            match step {
                Step::Wait if now >= p.since + limit => {
                    let detail = format!(
                        "no handshake within {:?} ({} frames, {} bytes pending): a writer \
                         sends Hello (after Auth with a key) right after connecting",
                        sh.opts.handshake_timeout,
                        p.frames,
                        p.buf.len()
                    );
                    close_pending(&sh, p, Refusal::protocol(detail).with_kind("disconnect"));
                }
                Step::Wait => keep.push_back(p),
                Step::Ready(role) => hand_over(&sh, p, role),
                Step::Close(r) => close_pending(&sh, p, r),
            }
        }
        pending = keep;
        if fds[0].revents != 0 {
            accept_all(&sh, &listener, &mut pending);
        }
    }
}

impl Refusal {
    fn with_kind(mut self, kind: &'static str) -> Refusal {
        self.kind = kind;
        self
    }
}

fn pollfd(s: &impl std::os::fd::AsRawFd) -> libc::pollfd {
    libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }
}

/// poll(2) on `fds` for at most `wait`; an interrupted call counts as a timeout.
fn poll(fds: &mut [libc::pollfd], wait: Duration) -> io::Result<()> {
    let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfd structs
    // for the whole call, which is all poll(2) reads and writes.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        fds.iter_mut().for_each(|f| f.revents = 0);
    }
    Ok(())
}

/// Accepts every connection waiting on the listener into `pending`, dropping the oldest
/// pending one when the cap (or the process's file descriptor limit) is reached.
fn accept_all(sh: &Shared, listener: &TcpListener, pending: &mut VecDeque<Pending>) {
    for _ in 0..ACCEPTS_PER_ROUND {
        match listener.accept() {
            Ok((stream, peer)) => {
                if sh.stop.load(Ordering::SeqCst) {
                    return;
                }
                if pending.len() >= MAX_PENDING_HANDSHAKES {
                    drop_oldest(sh, pending, "");
                }
                let id = sh.next_conn.fetch_add(1, Ordering::SeqCst);
                pending.push_back(Pending::new(stream, id, peer));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                if pending.is_empty() {
                    sh.log(format_args!(
                        "accept failed: {e}; every descriptor is in use by writers and \
                         logs (raise the open-files limit, ulimit -n)"
                    ));
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
                drop_oldest(sh, pending, " (the witness is out of file descriptors)");
            }
            Err(e) => {
                // ECONNABORTED and the like: that peer is gone; others may wait.
                sh.log(format_args!("accept failed: {e}"));
                return;
            }
        }
    }
}

fn drop_oldest(sh: &Shared, pending: &mut VecDeque<Pending>, why: &str) {
    if let Some(old) = pending.pop_front() {
        let msg = format!(
            "the witness has {MAX_PENDING_HANDSHAKES} connections waiting for their \
             handshake and dropped the oldest, this one{why}: connect again and send \
             Hello (after Auth) at once"
        );
        close_pending(sh, old, Refusal::refused(msg));
    }
}

/// Tells the peer why (when it should hear it), logs one event line, closes.
fn close_pending(sh: &Shared, mut p: Pending, r: Refusal) {
    // Not after a failed reply: it may have left the peer part of a frame.
    if r.tell && p.reply_failed.is_none() {
        let _ = p.send(
            &Msg::Error {
                message: r.detail.clone(),
            },
            !r.unsealed,
        );
    }
    sh.event(
        r.kind,
        &[
            ("conn", &p.id),
            ("peer", &p.peer),
            ("run", &"-"),
            ("auth", &p.auth_name(sh)),
            ("frames", &p.frames),
            ("detail", &r.detail),
        ],
    );
    let _ = p.stream.shutdown(Shutdown::Both);
}

/// Decrements a connection counter when a connection thread ends, panic or not.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives a connection whose first request has arrived a thread of its own, if its
/// role's cap allows.
fn hand_over(sh: &Arc<Shared>, p: Pending, role: Role) {
    let (count, cap) = match role {
        Role::Writer => (&sh.writers, sh.opts.max_connections),
        Role::Fetch => (&sh.fetchers, FETCH_CONNECTIONS),
    };
    if count.fetch_add(1, Ordering::SeqCst) >= cap {
        count.fetch_sub(1, Ordering::SeqCst);
        let msg = match role {
            Role::Writer => format!(
                "the witness is at its limit of {cap} writer connections; try again later \
                 or raise --max-connections"
            ),
            Role::Fetch => {
                format!(
                    "{} ({cap}) already; try again in a moment",
                    crate::wire::msg::FETCHES_BUSY
                )
            }
        };
        close_pending(sh, p, Refusal::refused(msg));
        return;
    }
    let (id, peer) = (p.id, p.peer);
    if let Ok(c) = p.stream.try_clone() {
        lock(&sh.conns).insert(id, c);
    }
    let sh2 = sh.clone();
    let t = std::thread::Builder::new()
        .name(format!("witness-conn-{id}"))
        .stack_size(CONN_STACK_BYTES)
        .spawn(move || {
            let counter = match role {
                Role::Writer => &sh2.writers,
                Role::Fetch => &sh2.fetchers,
            };
            let _slot = Slot(counter);
            let Pending {
                stream,
                buf,
                session,
                frames,
                reply_failed,
                ..
            } = p;
            let mut c = Conn::new(sh2.clone(), stream, id, peer);
            c.rbuf = RecvBuf::holding(buf);
            c.session = session;
            c.frames_received = frames;
            c.first_frame_authenticated = true;
            c.reply_failed = reply_failed;
            c.serve();
            lock(&sh2.conns).remove(&id);
        });
    match t {
        Ok(h) => {
            let mut threads = lock(&sh.threads);
            threads.retain(|t| !t.is_finished());
            threads.push(h);
        }
        Err(e) => {
            count.fetch_sub(1, Ordering::SeqCst);
            lock(&sh.conns).remove(&id);
            sh.event(
                "refused",
                &[
                    ("conn", &id),
                    ("peer", &peer),
                    ("detail", &format_args!("cannot start a thread: {e}")),
                ],
            );
        }
    }
}

#[cfg(test)]
mod tests;
