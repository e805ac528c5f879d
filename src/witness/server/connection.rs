//! One connection past its handshake, on a thread of its own: reading frames in
//! batches, checking each frame's MAC, dispatching it, and ending with one event line.
//!
//! Why blocking I/O on a thread per connection: writers are few (one per drive under
//! test) and each one's work is mostly waiting for the journal's next sync; blocking
//! reads keep each run's durability rule obvious. What a writer's frames do to its
//! run's log is module `writer`; serving a fetch is module `fetch`. A handler returns
//! `Ok(ControlFlow::Break(end))` when the connection is done as it should be (Bye, a
//! fetch served) and `Err(end)` when it failed.

use crate::model::{Ack, disconnect, now_ns};
use crate::record::RunId;
use crate::wire::auth::{self, Session};
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::{DecodeError, Msg, PROTOCOL_VERSION, VersionMismatch};
use crate::witness::server::events::fmt_ns;
use crate::witness::server::recv_buf::{READ_CHUNK_BYTES, RecvBuf};
use crate::witness::server::shared::{RunSlot, Shared};
use crate::witness::validate::AckRules;
use nix::sys::socket::sockopt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Read at most this much from one socket before committing, so one fast writer's
/// batch stays bounded and Durable replies keep flowing.
pub(super) const READ_BATCH_BYTES: usize = 4 << 20;
/// A peer that does not read our replies for this long is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Stack of a connection thread: enough for JSON decoding, small enough that a thousand
/// writers cost little.
pub(super) const CONN_STACK_BYTES: usize = 512 << 10;

/// What a handled frame means for its connection: go on, or end as it should (a Bye, a
/// fetch served). Failures are the `Err` beside it.
pub(super) type Next = ControlFlow<End>;

/// Why a connection ended.
pub(super) enum End {
    Eof,
    Idle,
    /// A frame failed authentication; told with an Error frame.
    Auth(String),
    Bye(String),
    TakenOver,
    /// Our own I/O error on the socket.
    Io(io::Error),
    /// The peer broke the protocol; told with an Error frame.
    Protocol(String),
    /// The witness cannot write its log; told with an Error frame.
    Storage(String),
    /// A fetch was served.
    Fetched,
}

pub(super) struct Conn {
    pub(super) sh: Arc<Shared>,
    pub(super) stream: TcpStream,
    pub(super) id: u64,
    pub(super) peer: SocketAddr,
    pub(super) run: Option<(RunId, Arc<Mutex<RunSlot>>)>,
    /// The limits of this run's acks, from its descriptor (set with `run`).
    pub(super) rules: Option<AckRules>,
    pub(super) rbuf: RecvBuf,
    pub(super) out: Vec<u8>,
    pub(super) scratch: Vec<Ack>,
    /// Set once Auth/Challenge completed (keyed witness only).
    pub(super) session: Option<Session>,
    /// The first frame in `rbuf` (the request the gate handed over) already passed
    /// [`Conn::authenticate`] there.
    pub(super) first_frame_authenticated: bool,
    /// When the last complete frame arrived: the idle deadline counts from here.
    pub(super) last_progress: std::time::Instant,
    pub(super) frames_received: u64,
    /// New acks appended since the last commit.
    pub(super) dirty: bool,
    pub(super) acks_received: u64,
    pub(super) last_ack_at_ns: Option<u64>,
    /// When the last frame arrived (witness clock), shared with the run's slot so a
    /// fetch served meanwhile can say how long the writer has been silent.
    pub(super) last_frame_at_ns: Arc<AtomicU64>,
    /// The read timeout the socket has now (set by `arm_read_timeout`).
    read_timeout_armed: Option<Duration>,
    /// Why a reply (`Conn::reply`) could not be sent. Set once; no byte is written after
    /// it (a write that failed part way leaves the peer a broken frame), and the
    /// connection ends once the frames already received are handled.
    pub(super) reply_failed: Option<io::Error>,
}

/// The longest Bye reason kept in a log (a writer's reasons are one line).
const MAX_BYE_REASON_CHARS: usize = 512;

impl Conn {
    pub(super) fn new(sh: Arc<Shared>, stream: TcpStream, id: u64, peer: SocketAddr) -> Conn {
        Conn {
            sh,
            stream,
            id,
            peer,
            run: None,
            rules: None,
            rbuf: RecvBuf::default(),
            out: Vec::new(),
            scratch: Vec::new(),
            session: None,
            first_frame_authenticated: false,
            last_progress: std::time::Instant::now(),
            frames_received: 0,
            dirty: false,
            acks_received: 0,
            last_ack_at_ns: None,
            last_frame_at_ns: Arc::new(AtomicU64::new(now_ns())),
            read_timeout_armed: None,
            reply_failed: None,
        }
    }

    pub(super) fn serve(&mut self) {
        let _ = self.stream.set_nodelay(true);
        let _ = self.stream.set_write_timeout(Some(WRITE_TIMEOUT));
        let end = self.serve_loop();
        let (kind, detail) = match &end {
            End::Eof => ("disconnect", disconnect::CLOSED.to_string()),
            End::Idle => (
                "disconnect",
                format!(
                    "{} {:?} (idle timeout){}",
                    disconnect::SILENT,
                    self.sh.opts.idle_timeout,
                    self.partial_note()
                ),
            ),
            End::Auth(m) => ("error", format!("authentication failed: {m}")),
            End::Bye(r) => ("bye", format!("bye: {r}")),
            End::TakenOver => ("disconnect", "taken over by a newer connection".into()),
            // A reset comes from a running kernel at the other end, like a close.
            End::Io(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::BrokenPipe
                ) =>
            {
                ("disconnect", format!("{} ({e})", disconnect::CLOSED))
            }
            End::Io(e) => ("disconnect", format!("connection error: {e}")),
            End::Protocol(m) | End::Storage(m) => ("error", m.clone()),
            End::Fetched => ("fetch", String::new()),
        };
        let told = match &end {
            End::Protocol(m) | End::Storage(m) => Some(m.clone()),
            End::Auth(m) => Some(format!("authentication failed: {m}")),
            _ => None,
        };
        // After a failed reply the peer is gone or not reading, and what it would get
        // could follow a frame cut short: nothing more is written.
        let told = told.filter(|_| self.reply_failed.is_none());
        if let Some(message) = told {
            // Tell the peer why; it may already be gone, and that is fine. Sealed when
            // the session is up so an authenticated client can trust the reason, except
            // after an authentication failure: a peer with the wrong key could not check
            // our MAC and would never see the reason.
            self.out.clear();
            Msg::Error { message }.encode_into(&mut self.out);
            if !matches!(end, End::Auth(_)) {
                auth::seal_opt(
                    self.session.as_mut().map(|s| &mut s.sealer),
                    &mut self.out,
                    0,
                );
            }
            let _ = self.stream.set_nonblocking(true);
            let _ = self.stream.write_all(&self.out);
        }
        let durable = self.release_run(kind, &detail);
        let run = self
            .run
            .as_ref()
            .map(|(r, _)| r.hex())
            .unwrap_or("-".into());
        // A connect-and-close probe (a port check) gets its own kind, so it is easy to
        // filter out.
        let kind = match end {
            End::Fetched => None,
            End::Eof if self.run.is_none() && self.frames_received == 0 => Some("probe"),
            _ => Some(kind),
        };
        if let Some(kind) = kind {
            let last_ack = self.last_ack_at_ns.map(fmt_ns).unwrap_or("-".into());
            let durable = durable.map(|d| d.to_string()).unwrap_or("-".into());
            self.sh.event(
                kind,
                &[
                    ("conn", &self.id),
                    ("peer", &self.peer),
                    ("run", &run),
                    ("auth", &self.auth_name()),
                    ("frames", &self.frames_received),
                    ("acks_received", &self.acks_received),
                    ("durable", &durable),
                    ("last_ack", &last_ack),
                    ("detail", &detail),
                ],
            );
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }

    pub(super) fn auth_name(&self) -> &'static str {
        match (&self.sh.opts.key, &self.session) {
            (None, _) => "none",
            (Some(_), Some(_)) => "key",
            (Some(_), None) => "pending",
        }
    }

    pub(super) fn partial_note(&self) -> String {
        if self.rbuf.is_empty() {
            String::new()
        } else {
            format!("; {} bytes of an incomplete frame pending", self.rbuf.len())
        }
    }

    /// Encodes `m` (sealed when the session is up) and sends it; nothing after a failed
    /// reply.
    pub(super) fn send(&mut self, m: &Msg) -> Result<(), End> {
        if let Some(e) = &self.reply_failed {
            return Err(End::Io(io::Error::new(e.kind(), e.to_string())));
        }
        self.out.clear();
        m.encode_into(&mut self.out);
        auth::seal_opt(
            self.session.as_mut().map(|s| &mut s.sealer),
            &mut self.out,
            0,
        );
        self.stream.write_all(&self.out).map_err(End::Io)
    }

    /// Sends the reply to a received frame (Challenge, Welcome, Heartbeat, Durable).
    /// Why a failed send does not end the connection at once: a writer that ends sends
    /// its last frames (a Heartbeat, then Bye) and closes, and our reply to the first
    /// can hit its closed socket while the Bye is already in our buffer. The frames
    /// already received are still handled (their acks made durable, a Bye ends the
    /// connection as "bye"); the failed send ends it after them (`serve_loop`).
    pub(super) fn reply(&mut self, m: &Msg) {
        if self.reply_failed.is_some() {
            return;
        }
        if let Err(End::Io(e)) = self.send(m) {
            self.reply_failed = Some(e);
        }
    }

    /// Time left before the connection counts as idle. (Its handshake deadline was
    /// the gate's: a Conn starts with its first request in `rbuf`.)
    pub(super) fn idle_left(&self) -> Duration {
        self.sh
            .opts
            .idle_timeout
            .saturating_sub(self.last_progress.elapsed())
    }

    fn serve_loop(&mut self) -> End {
        // The request the gate handed over is already buffered.
        if let Some(end) = self.handle_buffered(false) {
            return end;
        }
        loop {
            if self.reply_failed.is_some() {
                return self.end_after_failed_reply();
            }
            let left = self.idle_left();
            if left.is_zero() {
                // The deadline can pass during our own commit (a log disk stalled for
                // the whole idle timeout): that is not the writer's silence, so the
                // frames already waiting are handled before the connection counts as
                // idle.
                let had = self.rbuf.len();
                let eof = self.read_waiting();
                if self.rbuf.len() == had && !eof {
                    return End::Idle;
                }
                if let Some(end) = self.handle_buffered(eof) {
                    return end;
                }
                // Only part of a frame: still idle.
                if self.idle_left().is_zero() {
                    return End::Idle;
                }
                continue;
            }
            self.arm_read_timeout(left);
            // One blocking read.
            match self.read_some() {
                Ok(0) => {
                    if self.rbuf.is_empty() {
                        return End::Eof;
                    }
                    return End::Protocol(self.truncated_msg());
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // Loop: the deadline check above decides.
                    continue;
                }
                Err(e) => return End::Io(e),
            }
            // Whatever else is already there: the batch that shares one commit.
            let eof = self.read_waiting();
            if let Some(end) = self.handle_buffered(eof) {
                return end;
            }
        }
    }

    /// Handles every complete frame buffered, commits, and says whether the connection
    /// ends (`eof`: the peer closed its side after these bytes).
    fn handle_buffered(&mut self, eof: bool) -> Option<End> {
        self.last_frame_at_ns.store(now_ns(), Ordering::Relaxed);
        let r = self.process_frames();
        // Commit what arrived before any error or end: those acks are valid.
        if let Some(end) = self.commit_and_reply() {
            return Some(end);
        }
        if let Err(end) | Ok(ControlFlow::Break(end)) = r {
            return Some(end);
        }
        if self.reply_failed.is_some() {
            // `serve_loop` ends the connection as the failed reply, after the rest.
            return None;
        }
        if eof {
            return Some(if self.rbuf.is_empty() {
                End::Eof
            } else {
                End::Protocol(self.truncated_msg())
            });
        }
        None
    }

    /// Reads what has already arrived, up to a batch, without waiting. True when the
    /// peer has closed its side after it.
    fn read_waiting(&mut self) -> bool {
        while self.rbuf.len() < READ_BATCH_BYTES {
            match self.read_more_now() {
                Ok(0) => return true,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        false
    }

    /// Ends a connection whose reply could not be sent: handles the frames that have
    /// already arrived, without waiting for more, and ends as one of them says (Bye, a
    /// bad frame), else as the failed send.
    fn end_after_failed_reply(&mut self) -> End {
        // The kernel holds at most a receive buffer of them: reading no more than that
        // ends this even if a live peer that does not read keeps sending.
        let mut budget =
            nix::sys::socket::getsockopt(&self.stream, sockopt::RcvBuf).unwrap_or(READ_BATCH_BYTES);
        loop {
            let before = self.rbuf.len();
            while self.rbuf.len() < READ_BATCH_BYTES && budget > 0 {
                match self.read_more_now() {
                    Ok(0) | Err(_) => break,
                    Ok(n) => budget = budget.saturating_sub(n),
                }
            }
            if self.rbuf.len() == before {
                break;
            }
            if let Some(end) = self.handle_buffered(false) {
                return end;
            }
        }
        End::Io(self.reply_failed.take().expect("set by the caller"))
    }

    fn truncated_msg(&self) -> String {
        let need = match frame::decode(self.rbuf.data()) {
            Decoded::NeedMore { need } if need > 0 => format!(" of {need}"),
            _ => String::new(),
        };
        format!(
            "connection closed in the middle of a frame ({} bytes{need} received)",
            self.rbuf.len()
        )
    }

    /// Makes the next blocking read return by the idle deadline (`left` from now). A
    /// socket keeps its timeout, and a read's timeout counts from the read: one armed
    /// at half of what was left serves every read while frames keep coming (`left`
    /// stays near the idle timeout), where setting it before each read was a
    /// setsockopt per batch. A read woken early just loops.
    fn arm_read_timeout(&mut self, left: Duration) {
        let fits = |t: Duration| t <= left && t >= left / 4;
        if !self.read_timeout_armed.is_some_and(fits) {
            let t = (left / 2).max(Duration::from_millis(1));
            let _ = self.stream.set_read_timeout(Some(t));
            self.read_timeout_armed = Some(t);
        }
    }

    /// One read, waiting up to the socket's read timeout.
    fn read_some(&mut self) -> io::Result<usize> {
        let stream = &mut self.stream;
        self.rbuf.fill(|b| stream.read(b))
    }

    /// One read of what is already there; WouldBlock when nothing is. (MSG_DONTWAIT
    /// instead of switching the socket to non-blocking and back: two syscalls fewer.)
    fn read_more_now(&mut self) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let fd = self.stream.as_raw_fd();
        self.rbuf.fill(|b| {
            nix::sys::socket::recv(fd, b, nix::sys::socket::MsgFlags::MSG_DONTWAIT)
                .map_err(io::Error::from)
        })
    }

    /// Handles every complete frame in the read buffer, up to one that ends the
    /// connection.
    fn process_frames(&mut self) -> Result<Next, End> {
        // Taken out so frames can borrow it while handlers borrow `self`.
        let mut rbuf = std::mem::take(&mut self.rbuf);
        let mut off = 0;
        let result = loop {
            let r = match frame::decode_limited(&rbuf.data()[off..], self.sh.opts.max_frame_bytes) {
                Decoded::NeedMore { .. } => break Ok(ControlFlow::Continue(())),
                Decoded::Error(e) => break Err(End::Protocol(format!("bad frame: {e}"))),
                Decoded::Frame(f) => {
                    off += f.len_bytes;
                    self.frames_received += 1;
                    self.last_progress = std::time::Instant::now();
                    let checked = std::mem::take(&mut self.first_frame_authenticated);
                    if !checked {
                        if let Err(e) = self.authenticate(&f) {
                            break Err(e);
                        }
                    }
                    if f.ty == FrameType::Acks {
                        // Hot path: decode acks straight from the read buffer.
                        let mut scratch = std::mem::take(&mut self.scratch);
                        scratch.clear();
                        let r = crate::wire::msg::decode_acks_into(f.payload, &mut scratch)
                            .map_err(|e| End::Protocol(format!("bad Acks frame: {}", e.detail())))
                            .and_then(|first| self.on_acks(first, &scratch, &[]))
                            .map(ControlFlow::Continue);
                        self.scratch = scratch;
                        r
                    } else {
                        self.on_frame(&f)
                    }
                }
            };
            match r {
                Ok(ControlFlow::Continue(())) => {}
                done => break done,
            }
        };
        rbuf.consume(
            off,
            READ_BATCH_BYTES + READ_CHUNK_BYTES + self.sh.opts.max_frame_bytes,
        );
        self.rbuf = rbuf;
        result
    }

    /// The authentication rule of a keyed witness: Auth first, then every frame sealed.
    /// An unkeyed witness refuses sealed frames.
    fn authenticate(&mut self, f: &frame::Frame<'_>) -> Result<(), End> {
        if f.ty == FrameType::Auth {
            // Checked in on_auth: allowed once, unsealed, before anything else.
            return Ok(());
        }
        if self.sh.opts.key.is_some() && self.session.is_none() {
            return Err(End::Auth(
                "this witness requires authentication: pass --key-file with the witness's \
                 key to plugpull write / verify / fetch"
                    .into(),
            ));
        }
        auth::check(self.session.as_mut().map(|s| &mut s.opener), f)
            .map_err(|e| End::Auth(e.to_string()))
    }

    fn on_auth(&mut self, version: u16, client_nonce: [u8; auth::NONCE_BYTES]) -> Result<(), End> {
        let Some(key) = self.sh.opts.key.clone() else {
            return Err(End::Auth(
                "this witness runs without a key: drop --key-file on the client, or restart \
                 `plugpull listen` with --key-file"
                    .into(),
            ));
        };
        if self.session.is_some() || self.frames_received != 1 {
            return Err(End::Protocol(
                "Auth must be the first and only handshake frame of a connection".into(),
            ));
        }
        if version != PROTOCOL_VERSION {
            return Err(End::Protocol(VersionMismatch(version).to_string()));
        }
        let witness_nonce = auth::nonce();
        // A peer that never gets the Challenge cannot seal its next frame: that frame
        // fails authentication and ends the connection at once.
        self.reply(&Msg::Challenge {
            nonce: witness_nonce,
        });
        self.session = Some(Session::witness(&key, &client_nonce, &witness_nonce));
        Ok(())
    }

    fn on_frame(&mut self, f: &frame::Frame<'_>) -> Result<Next, End> {
        let msg = match Msg::decode(f) {
            Ok(m) => m,
            Err(e) => {
                if let DecodeError::Version(v) = &e {
                    return Err(End::Protocol(v.to_string()));
                }
                return Err(End::Protocol(format!(
                    "bad {:?} frame: {}",
                    f.ty,
                    e.detail()
                )));
            }
        };
        match msg {
            Msg::Auth { version, nonce } => self.on_auth(version, nonce).map(ControlFlow::Continue),
            Msg::Hello {
                version: _,
                resume,
                descriptor,
            } => self.on_hello(resume, descriptor).map(ControlFlow::Continue),
            Msg::Heartbeat => {
                self.reply(&Msg::Heartbeat);
                Ok(ControlFlow::Continue(()))
            }
            Msg::Bye { reason } => {
                if self.run.is_none() {
                    return Err(End::Protocol("Bye before Hello".into()));
                }
                // A peer's words are kept as data: bounded, without control characters.
                let reason: String = reason
                    .chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .take(MAX_BYE_REASON_CHARS)
                    .collect();
                Ok(ControlFlow::Break(End::Bye(reason)))
            }
            Msg::Fetch(sel) => {
                if self.run.is_some() {
                    return Err(End::Protocol(
                        "Fetch on a writer connection; open a separate connection".into(),
                    ));
                }
                self.on_fetch(&sel)
            }
            Msg::ListRuns => {
                if self.run.is_some() {
                    return Err(End::Protocol(
                        "Fetch on a writer connection; open a separate connection".into(),
                    ));
                }
                self.on_list_runs()
            }
            Msg::RecordVerdict(mark) => {
                if self.run.is_some() {
                    return Err(End::Protocol(
                        "Fetch on a writer connection; open a separate connection".into(),
                    ));
                }
                self.on_record_verdict(&mark)
            }
            Msg::FileAcks { first, acks, names } => self
                .on_acks(first, &acks, &names)
                .map(ControlFlow::Continue),
            // By the frame's own type: a CompactAcks frame decodes to Msg::Acks too.
            _ => Err(End::Protocol(format!(
                "unexpected {:?} frame from a writer or fetcher",
                f.ty
            ))),
        }
    }
}
