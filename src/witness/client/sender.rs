//! The writer's ack sender: a queue, a thread that sends it and reconnects, and a reader
//! thread per connection that takes the witness's Durable replies.
//!
//! Why a queue and a background thread: the writer's flush loop must never wait on the
//! network (a slow witness would change the timing we are measuring), so `push` only
//! appends to an in-memory queue. The queue holds every ack not yet confirmed durable;
//! that is exactly what must be resent after a reconnect, starting at the witness's
//! durable count from the Welcome. Acks leave the queue only when the witness says they
//! are fdatasync'd.

use crate::model::{Ack, FileName, RunDescriptor};
use crate::sync::{lock, wait, wait_timeout};
use crate::units::{fmt_duration_s, thousands};
use crate::wire::auth::{self, Opener, Sealer, Session};
use crate::wire::msg::Msg;
use crate::witness::client::batch;
use crate::witness::client::connect::{FrameReader, handshake};
use crate::witness::client::error::{ClientResult, refuse};
use crate::witness::client::options::ClientOptions;
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Acks per Acks frame the sender builds.
const ACKS_PER_FRAME: usize = 4096;
/// Bytes the sender encodes before one write.
const SEND_BATCH_BYTES: usize = 2 << 20;
/// When fewer acks than this are queued, the sender waits a little for more before it
/// writes, so a stream of acks costs ~1000 writes/s instead of one per ack.
const LINGER_ACKS: u64 = 1024;
/// The wait while an earlier batch is still unconfirmed: acks are flowing fast, and the
/// witness is busy with that batch anyway.
const LINGER_BUSY: Duration = Duration::from_millis(1);
/// The wait when everything sent is confirmed: just long enough to catch the rest of a
/// burst (one flush acknowledges many records), short enough not to show in the
/// ack-to-durable latency.
const LINGER_IDLE: Duration = Duration::from_micros(100);
const BACKOFF_MIN: Duration = Duration::from_millis(50);

/// A snapshot of the sender's progress.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Acks handed to `push`.
    pub pushed: u64,
    /// Acks the witness confirmed fdatasync'd.
    pub durable: u64,
    pub connected: bool,
    pub reconnects: u64,
    pub last_error: Option<String>,
}

struct Inner {
    /// Acks numbered `durable .. pushed`, oldest first.
    pending: VecDeque<Ack>,
    /// The names of the pending file acks (`push_file`), by ack number.
    names: BTreeMap<u64, FileName>,
    durable: u64,
    pushed: u64,
    /// Next ack number to send on the current connection.
    sent: u64,
    connected: bool,
    /// Connection generation; a reader of an older one cannot break the new one.
    generation: u64,
    broken: bool,
    reconnects: u64,
    last_error: Option<String>,
    // Notify only when somebody waits: a futex wake per push would be a syscall per ack.
    sender_waiting: bool,
    pusher_waiting: bool,
    bye_requested: bool,
    /// What the Bye says: how the writer stopped (`model::bye`); "writer finished" when
    /// nobody said otherwise.
    bye_reason: Option<String>,
    stop: bool,
    /// Set when the writer is stopping (Ctrl-C): `push` no longer waits for room, so a
    /// stream blocked at `max_unconfirmed` can see the stop and end.
    pushers_released: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    cv_send: Condvar,
    cv_push: Condvar,
    cv_durable: Condvar,
    opts: ClientOptions,
    addr: String,
    descriptor: RunDescriptor,
}

/// Streams a run's acks to the witness. `Send + Sync`: stream threads can share it.
pub struct AckSender {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl AckSender {
    /// Connects and completes the handshake; fails with a clear error if the witness
    /// cannot be reached or refuses the run.
    pub fn connect(
        addr: &str,
        desc: &RunDescriptor,
        opts: ClientOptions,
    ) -> ClientResult<AckSender> {
        let (stream, durable, session) = handshake(addr, desc, false, opts.key.as_ref())?;
        if durable > 0 {
            // The witness refuses a new run that already has acks; this cannot happen.
            refuse!(
                "the witness already holds {durable} acks for the new run {}",
                desc.run_id
            );
        }
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                pending: VecDeque::with_capacity(opts.max_unconfirmed.min(1 << 16)),
                names: BTreeMap::new(),
                durable,
                pushed: durable,
                sent: durable,
                connected: true,
                generation: 0,
                broken: false,
                reconnects: 0,
                last_error: None,
                sender_waiting: false,
                pusher_waiting: false,
                bye_requested: false,
                bye_reason: None,
                stop: false,
                pushers_released: false,
            }),
            cv_send: Condvar::new(),
            cv_push: Condvar::new(),
            cv_durable: Condvar::new(),
            opts,
            addr: addr.to_string(),
            descriptor: desc.clone(),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ack-sender".into())
            .spawn(move || sender_main(sh, stream, session))?;
        Ok(AckSender {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues one ack. Never waits on the network; blocks only while
    /// `max_unconfirmed` acks are outstanding.
    pub fn push(&self, ack: Ack) {
        self.push_all(std::slice::from_ref(&ack));
    }

    /// The writer is stopping: wake every `push` waiting for room and let later pushes
    /// through without waiting (the streams are ending; the acks stay queued and are still
    /// sent while the witness is reachable).
    pub fn release_pushers(&self) {
        let mut g = lock(&self.shared.inner);
        g.pushers_released = true;
        self.shared.cv_push.notify_all();
    }

    /// Queues acks in order (one, or a flushed `--batch`), under one lock while the queue
    /// has room; waits only while `max_unconfirmed` acks are outstanding. Before waiting it
    /// wakes the sender: the acks queued so far must go out, or no Durable ever makes room
    /// (the sender would sleep until its next heartbeat).
    pub fn push_all(&self, acks: &[Ack]) {
        self.push_named(acks, None);
    }

    /// Queues the ack of one file of a tree run with its name, as `push`: it is sent in a
    /// FileAcks frame, numbered in the same sequence as every other ack.
    pub fn push_file(&self, ack: Ack, name: FileName) {
        self.push_named(std::slice::from_ref(&ack), Some(name));
    }

    /// `push_all`, the first ack named `name` if given.
    fn push_named(&self, acks: &[Ack], mut name: Option<FileName>) {
        let sh = &*self.shared;
        let mut g = lock(&sh.inner);
        for &ack in acks {
            while g.pending.len() >= sh.opts.max_unconfirmed && !g.stop && !g.pushers_released {
                wake_sender(&mut g, sh);
                g.pusher_waiting = true;
                g = wait(&sh.cv_push, g);
            }
            g.pending.push_back(ack);
            if let Some(n) = name.take() {
                let at = g.pushed;
                g.names.insert(at, n);
            }
            g.pushed += 1;
        }
        wake_sender(&mut g, sh);
    }

    pub fn stats(&self) -> SenderStats {
        stats_of(&lock(&self.shared.inner))
    }

    /// Sets what the Bye will tell the witness: how the writer stopped, starting with one
    /// of `model::bye` (verify tells a run cut by a power loss from one that ended by
    /// itself by it).
    pub fn set_bye_reason(&self, reason: impl Into<String>) {
        lock(&self.shared.inner).bye_reason = Some(reason.into());
    }

    /// Waits until every pushed ack is durable at the witness (or `timeout` passes),
    /// says Bye and closes. On timeout returns an error naming how many acks the
    /// witness never confirmed.
    pub fn finish(self, timeout: Duration) -> ClientResult<SenderStats> {
        let s = self.finish_within(timeout);
        if s.durable < s.pushed {
            refuse!(
                "the witness confirmed {} of {} acks within {}; {} acks are not known to \
                 be durable there (last error: {})",
                thousands(s.durable),
                thousands(s.pushed),
                fmt_duration_s(timeout.as_secs_f64()),
                thousands(s.pushed - s.durable),
                s.last_error.as_deref().unwrap_or("none")
            );
        }
        Ok(s)
    }

    /// `finish` for a run that is being abandoned (Ctrl-C): waits at most `timeout` for
    /// the witness, then closes, and returns how far it got (`durable` may be below
    /// `pushed`; the caller says so).
    pub fn finish_within(mut self, timeout: Duration) -> SenderStats {
        let sh = self.shared.clone();
        let deadline = Instant::now() + timeout;
        let mut g = lock(&sh.inner);
        g.bye_requested = true;
        sh.cv_send.notify_one();
        while g.durable < g.pushed {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            g = wait_timeout(&sh.cv_durable, g, deadline - now);
        }
        if g.durable < g.pushed {
            g.stop = true;
            sh.cv_send.notify_all();
        }
        drop(g);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for AckSender {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let mut g = lock(&self.shared.inner);
            g.stop = true;
            self.shared.cv_send.notify_all();
            self.shared.cv_push.notify_all();
            // Not joined: a reconnect attempt may take seconds, and a dropped sender
            // without finish() is an abandoned run.
        }
    }
}

fn stats_of(g: &Inner) -> SenderStats {
    SenderStats {
        pushed: g.pushed,
        durable: g.durable,
        connected: g.connected,
        reconnects: g.reconnects,
        last_error: g.last_error.clone(),
    }
}

/// Why the pump over one connection stopped.
enum PumpEnd {
    Stop,
    Broken,
}

fn sender_main(sh: Arc<Shared>, first: TcpStream, first_session: Option<Session>) {
    let mut stream = first;
    let mut session = first_session;
    let mut backoff = BACKOFF_MIN;
    loop {
        let generation = lock(&sh.inner).generation;
        let (mut sealer, opener) = match session.take() {
            Some(s) => (Some(s.sealer), Some(s.opener)),
            None => (None, None),
        };
        let reader = spawn_reader(sh.clone(), &stream, generation, opener);
        let end = pump(&sh, &mut stream, generation, sealer.as_mut());
        let _ = stream.shutdown(Shutdown::Both);
        if let Some(r) = reader {
            let _ = r.join();
        }
        {
            let mut g = lock(&sh.inner);
            g.connected = false;
            g.generation += 1;
            g.broken = false;
            if matches!(end, PumpEnd::Stop) {
                return;
            }
        }
        // Reconnect with backoff until it works or we are told to stop.
        loop {
            {
                let g = lock(&sh.inner);
                if g.stop {
                    return;
                }
                if wait_timeout(&sh.cv_send, g, backoff).stop {
                    return;
                }
            }
            backoff = (backoff * 2).min(sh.opts.reconnect_backoff_max.max(BACKOFF_MIN));
            match handshake(&sh.addr, &sh.descriptor, true, sh.opts.key.as_ref()) {
                Ok((s, witness_durable, new_session)) => {
                    session = new_session;
                    let mut g = lock(&sh.inner);
                    g.reconnects += 1;
                    g.connected = true;
                    if witness_durable < g.durable {
                        // The witness forgot acks it confirmed: its storage lied. We no
                        // longer hold them, so say so loudly; verify will see the gap.
                        g.last_error = Some(format!(
                            "the witness reports {witness_durable} durable acks after \
                             reconnecting but had confirmed {}: its log lost acks",
                            g.durable
                        ));
                    } else if witness_durable > g.pushed {
                        g.last_error = Some(format!(
                            "the witness reports {witness_durable} durable acks but only {} \
                             were sent: another writer is using this run id",
                            g.pushed
                        ));
                        g.stop = true;
                        return;
                    } else {
                        advance_durable(&sh, &mut g, witness_durable);
                    }
                    g.sent = g.durable.max(witness_durable);
                    stream = s;
                    backoff = BACKOFF_MIN;
                    break;
                }
                Err(e) => lock(&sh.inner).last_error = Some(format!("{e:#}")),
            }
        }
    }
}

/// Drops acks up to `n` from the queue and wakes whoever waits on durability.
fn advance_durable(sh: &Shared, g: &mut Inner, n: u64) {
    if n <= g.durable {
        return;
    }
    let k = (n - g.durable) as usize;
    g.pending.drain(..k);
    if !g.names.is_empty() {
        g.names = g.names.split_off(&n);
    }
    g.durable = n;
    g.sent = g.sent.max(n);
    if g.pusher_waiting {
        g.pusher_waiting = false;
        sh.cv_push.notify_all();
    }
    if g.bye_requested {
        if g.sender_waiting {
            g.sender_waiting = false;
            sh.cv_send.notify_one();
        }
        // Only `finish_within` waits for durability, and it says Bye first: a notify
        // without a waiter is still a futex syscall, per Durable reply.
        sh.cv_durable.notify_all();
    }
}

/// Wakes the sender thread if it sleeps waiting for acks. Only then: a futex wake per
/// push would be a syscall per ack.
fn wake_sender(g: &mut Inner, sh: &Shared) {
    if g.sender_waiting {
        g.sender_waiting = false;
        sh.cv_send.notify_one();
    }
}

/// Sends queued acks, heartbeats and the final Bye over one connection.
fn pump(
    sh: &Shared,
    stream: &mut TcpStream,
    generation: u64,
    mut sealer: Option<&mut Sealer>,
) -> PumpEnd {
    let hb = sh.opts.heartbeat.max(Duration::from_millis(10));
    let mut buf: Vec<u8> = Vec::with_capacity(SEND_BATCH_BYTES + (64 << 10));
    let mut last_send = Instant::now();
    loop {
        let (mut g, work) = match wait_for_work(sh, generation, hb, last_send) {
            Ok(w) => w,
            Err(end) => return end,
        };
        buf.clear();
        match work {
            Work::Bye => {
                let reason = g
                    .bye_reason
                    .clone()
                    .unwrap_or_else(|| crate::model::bye::FINISHED.into());
                drop(g);
                Msg::Bye { reason }.encode_into(&mut buf);
                auth::seal_opt(sealer.as_deref_mut(), &mut buf, 0);
                let _ = stream.write_all(&buf);
                return PumpEnd::Stop;
            }
            Work::Heartbeat => {
                drop(g);
                Msg::Heartbeat.encode_into(&mut buf);
                auth::seal_opt(sealer.as_deref_mut(), &mut buf, 0);
            }
            Work::Acks => {
                if g.pushed - g.sent < LINGER_ACKS && !g.bye_requested {
                    let linger = if g.sent > g.durable {
                        LINGER_BUSY
                    } else {
                        LINGER_IDLE
                    };
                    drop(g);
                    std::thread::sleep(linger);
                    g = lock(&sh.inner);
                    if g.generation != generation || g.broken {
                        return PumpEnd::Broken;
                    }
                }
                while g.sent < g.pushed && buf.len() < SEND_BATCH_BYTES {
                    let at = (g.sent - g.durable) as usize;
                    let n = ((g.pushed - g.sent) as usize).min(ACKS_PER_FRAME);
                    let start = buf.len();
                    let acks = g.pending.range(at..at + n);
                    let n = batch::encode_frame(&mut buf, g.sent, acks, &g.names);
                    auth::seal_opt(sealer.as_deref_mut(), &mut buf, start);
                    g.sent += n as u64;
                }
                drop(g);
            }
        }
        if let Err(e) = stream.write_all(&buf) {
            let mut g = lock(&sh.inner);
            g.last_error = Some(format!("sending to the witness at {}: {e}", sh.addr));
            return PumpEnd::Broken;
        }
        last_send = Instant::now();
    }
}

/// What the pump sends next.
enum Work {
    Acks,
    Heartbeat,
    Bye,
}

/// Waits, holding the queue lock when it returns, until there is something to send on
/// connection `generation`, or says how the pump ends.
fn wait_for_work(
    sh: &Shared,
    generation: u64,
    heartbeat: Duration,
    last_send: Instant,
) -> Result<(MutexGuard<'_, Inner>, Work), PumpEnd> {
    let mut g = lock(&sh.inner);
    loop {
        if g.stop {
            return Err(PumpEnd::Stop);
        }
        if g.broken || g.generation != generation {
            return Err(PumpEnd::Broken);
        }
        if g.sent < g.pushed {
            return Ok((g, Work::Acks));
        }
        if g.bye_requested && g.durable >= g.pushed {
            return Ok((g, Work::Bye));
        }
        // A Heartbeat only on a quiet line. While a Durable is due the witness is busy
        // with our acks (it reads our next frame only after that commit) and the Durable
        // is its sign of life; a Heartbeat sent then is answered after it, and when that
        // Durable is the run's last, after our Bye, into a socket we have closed (our
        // kernel resets the connection, and the witness's next reply fails).
        let wait = match heartbeat.saturating_sub(last_send.elapsed()) {
            w if !w.is_zero() => w,
            _ if g.sent == g.durable => return Ok((g, Work::Heartbeat)),
            _ => heartbeat,
        };
        g.sender_waiting = true;
        g = wait_timeout(&sh.cv_send, g, wait);
        g.sender_waiting = false;
    }
}

fn spawn_reader(
    sh: Arc<Shared>,
    stream: &TcpStream,
    generation: u64,
    mut opener: Option<Opener>,
) -> Option<JoinHandle<()>> {
    let mut s = stream.try_clone().ok()?;
    // The witness answers heartbeats, so long silence means it is gone (a dead witness
    // machine sends no RST). At least 5 s: one slow fdatasync is not a dead witness.
    let _ = s.set_read_timeout(Some((sh.opts.heartbeat * 3).max(Duration::from_secs(5))));
    std::thread::Builder::new()
        .name("ack-reader".into())
        .spawn(move || {
            let mut r = FrameReader::default();
            let why = loop {
                match r.next(&mut s, opener.as_mut()) {
                    Ok(Some(Msg::Durable { durable_acks })) => {
                        let mut g = lock(&sh.inner);
                        if g.generation != generation {
                            return;
                        }
                        if durable_acks > g.sent {
                            break format!(
                                "the witness confirmed {durable_acks} acks but only {} were \
                                 sent",
                                g.sent
                            );
                        }
                        advance_durable(&sh, &mut g, durable_acks);
                    }
                    Ok(Some(Msg::Heartbeat)) => {}
                    Ok(Some(Msg::Error { message })) => {
                        break format!("the witness: {}", crate::model::peer_text::shown(&message));
                    }
                    Ok(Some(m)) => {
                        break format!("unexpected {:?} frame from the witness", m.frame_type());
                    }
                    Ok(None) => break "the witness closed the connection".to_string(),
                    Err(e) => break format!("connection to the witness: {e:#}"),
                }
            };
            // Unblocks a sender stuck in write() to a witness that vanished.
            let _ = s.shutdown(Shutdown::Both);
            let mut g = lock(&sh.inner);
            if g.generation == generation && !g.stop {
                g.broken = true;
                g.last_error = Some(why);
                sh.cv_send.notify_all();
            }
        })
        .ok()
}
