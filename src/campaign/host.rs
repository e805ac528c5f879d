//! The whole-host controller: `plugpull campaign` with `[target] kind = "host"`, run on
//! the witness machine (or any machine that keeps power).
//!
//! Why a different loop from the drive-only cycle: the writer lives on the host under
//! test and dies with it, so the controller only switches power and listens. Per cycle:
//! wait for the agent's run to ack → random delay → cut → stay off → on → wait (up to
//! `agent.boot_timeout`) for the agent's boot report, which carries the verdict of the run
//! that was cut → append one result line. A host that does not report in time is recorded
//! as a dead device and the campaign stops (nothing more can be cut).
//!
//! The results file stays the only state: a restarted controller first switches the host
//! on (it may have died with power off), then takes whatever the agent reports next.
//!
//! The agent listener serves each connection until it closes, message after message, and
//! lets it stay silent as long as the controller waits for the host: a VM's virtio-serial
//! port connects here when the VM starts and carries everything its guest sends, long
//! before and long after one message (docs/campaign.md, "Behind QEMU's virtio-serial").

use super::agent_proto::{AgentMsg, PreviousRun, Reply, RunOrder, serve};
use super::config::Settings;
use super::context::{Campaign, derive};
use super::proof::cut_proof;
use super::results::CycleResult;
use super::results_file::{ResultsError, ResultsFile};
use crate::cycle::cut_delay;
use crate::exit::error_chain;
use crate::model::{Placement, Verdict};
use crate::power::{PowerError, PowerSwitch};
use crate::witness::server::{Witness, WitnessError};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// Why the whole-host campaign could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("listening for the agent on {addr} (agent.listen): is another controller running?")]
    Listen {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// The listener's own address could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("starting the campaign's witness on {bind}")]
    Witness {
        bind: String,
        #[source]
        source: WitnessError,
    },
    #[error("switching the host on before the first cycle")]
    SwitchOn(#[source] PowerError),
    #[error(
        "no run of the agent acked within {waited:?}: is the host on, is plugpull-agent.service enabled there, and can it reach {agent_addr} and the witness {witness_addr}? (journalctl -u plugpull-agent on the host)"
    )]
    NoRunAcked {
        waited: Duration,
        agent_addr: String,
        witness_addr: String,
    },
    /// A cut or power-on failed (the cycle is recorded as an ERROR with the same causes).
    #[error("the switch failed, stopping the campaign: {}", error_chain(.0))]
    SwitchFailed(PowerError),
    #[error(transparent)]
    Results(#[from] ResultsError),
}

type Result<T, E = HostError> = std::result::Result<T, E>;

type Incoming = (AgentMsg, Responder);

/// How the campaign loop answers a message: the reply goes to the connection's thread,
/// which writes it and says so. Waiting for that (briefly) keeps the last reply from
/// being lost when the campaign then ends and the process exits.
struct Responder {
    reply: mpsc::Sender<Reply>,
    written: mpsc::Receiver<()>,
}

impl Responder {
    fn answer(self, r: Reply) {
        const WRITTEN_WAIT: Duration = Duration::from_secs(5);
        if self.reply.send(r).is_ok() {
            let _ = self.written.recv_timeout(WRITTEN_WAIT);
        }
    }
}

/// The least time an agent connection may stay silent before it speaks: what every
/// connection had before the limit followed the campaign's own timeouts.
const MIN_AGENT_IDLE: Duration = Duration::from_secs(30);

/// How long an agent connection may stay silent before each message: as long as the
/// controller itself waits for the host (to boot and report, then to ack). A QEMU guest's
/// virtio-serial port is connected here when QEMU starts and speaks only once the guest
/// has booted and verified; a real host connects per message and is not affected.
pub fn agent_idle_limit(s: &Settings) -> Duration {
    (s.boot_timeout + s.wait_timeout).max(MIN_AGENT_IDLE)
}

/// Most agent connections held open at once. A real host has one at a time (a VM one
/// per serial port); the cap keeps strangers that connect and stay silent, each allowed
/// to for minutes, from piling up threads.
const MAX_AGENT_CONNECTIONS: usize = 64;

/// The open agent connections by accept order, so the oldest can be closed when a new
/// one would pass [`MAX_AGENT_CONNECTIONS`] (the newest is the likeliest to be a host
/// about to speak; a VM's port that loses its connection makes a new one).
#[derive(Clone, Default)]
struct Open(Arc<Mutex<BTreeMap<u64, TcpStream>>>);

impl Open {
    /// Registers `s` as connection `id`; returns the peer of the oldest one, closed to
    /// make room, if any.
    fn add(&self, id: u64, s: &TcpStream) -> Option<String> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
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
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
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
fn listen(addr: &str, idle: Duration, quiet: bool) -> Result<(String, mpsc::Receiver<Incoming>)> {
    let l = TcpListener::bind(addr).map_err(|source| HostError::Listen {
        addr: addr.into(),
        source,
    })?;
    let local = l.local_addr()?.to_string();
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
            let (tx, open) = (tx.clone(), open.clone());
            std::thread::spawn(move || {
                let peer = peer(&s);
                // Whom to tell that the reply in hand is written.
                let waiting = Cell::new(None::<mpsc::Sender<()>>);
                let served = serve(
                    s,
                    idle,
                    |msg| {
                        let (reply, rrx) = mpsc::channel();
                        let (wtx, written) = mpsc::channel();
                        tx.send((msg, Responder { reply, written })).ok()?;
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

fn order(s: &Settings, seed: u64, cycle: u64) -> RunOrder {
    RunOrder {
        cycle,
        seed: derive(seed, cycle),
        min_acks: s.file.campaign.min_acks,
        record_min: s.record_min,
        record_max: s.record_max,
        placement: match s.placement {
            Placement::Sequential => "sequential".into(),
            Placement::Random => "random".into(),
        },
        streams: s.file.writer.streams,
        region: s.region,
    }
}

fn fill(r: &mut CycleResult, p: Box<PreviousRun>) {
    let p = *p;
    r.run_id = p.run_id;
    r.report = p.report;
    r.acked_records = p.acked_records;
    r.witness_durable = p.acked_records;
    r.last_acked = p.last_acked;
    r.unsafe_shutdowns_delta = p.unsafe_shutdowns_delta;
    if p.error.is_some() {
        r.error = p.error;
    }
}

enum Phase {
    /// Waiting for the agent to boot and its run to ack.
    WaitRun,
    /// Power was cut and restored; waiting for the boot report on `run_id`.
    WaitReport {
        r: Box<CycleResult>,
        t0: Instant,
        on_at: Instant,
        /// What the switch's trace of this cut proves (`cut_proof`), applied once the
        /// report is in: a cut not proven is never a PASS.
        proof: (Option<bool>, String),
    },
}

/// Runs the whole-host campaign until `cycles_wanted` results are recorded or the host
/// does not come back.
pub fn run(c: &Campaign, results: &mut ResultsFile, power: &mut dyn PowerSwitch) -> Result<()> {
    let s = c.settings;
    let (agent_addr, rx) = listen(&s.file.agent.listen, agent_idle_limit(s), c.quiet)?;
    let (witness_addr, own_witness) = witness(s)?;
    let mut ctl = Controller {
        c,
        n: results.cycles.len() as u64 + 1,
        results,
        power,
        agent_addr,
        witness_addr,
        phase: Phase::WaitRun,
    };
    ctl.say(format!(
        "whole-host mode: agent reports to {}, witness at {}; the agent's config must name both",
        ctl.agent_addr, ctl.witness_addr
    ));
    // A controller restarted mid-cycle may have left the host off.
    ctl.power.on().map_err(HostError::SwitchOn)?;

    let mut deadline = Instant::now() + s.boot_timeout + s.wait_timeout;
    while ctl.n <= c.cycles_wanted {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((msg, reply)) = rx.recv_timeout(left) else {
            ctl.on_silence()?;
            break;
        };
        match msg {
            AgentMsg::Boot { host, previous } => {
                let answer = ctl.on_boot(&host, previous)?;
                reply.answer(answer);
                deadline = Instant::now() + s.wait_timeout;
            }
            AgentMsg::Acking { cycle, run_id, .. } => {
                reply.answer(Reply::Ok);
                if ctl.on_acking(cycle, run_id)? {
                    deadline = Instant::now() + s.boot_timeout;
                }
            }
        }
    }
    if let Some(w) = own_witness {
        w.shutdown();
    }
    Ok(())
}

/// The witness: the configured one, or our own on `witness.bind`, which the caller shuts
/// down at the end.
fn witness(s: &Settings) -> Result<(String, Option<Witness>)> {
    if let Some(a) = &s.file.witness.addr {
        return Ok((a.clone(), None));
    }
    let bind = s.file.witness.bind.as_deref().unwrap_or("0.0.0.0:7420");
    let dir = s.results.with_extension("witness");
    let w =
        Witness::start(bind, &dir, s.witness_options()).map_err(|source| HostError::Witness {
            bind: bind.into(),
            source,
        })?;
    Ok((w.addr.to_string(), Some(w)))
}

/// The controller's state between agent messages.
struct Controller<'a, 'c> {
    c: &'a Campaign<'c>,
    results: &'a mut ResultsFile,
    power: &'a mut dyn PowerSwitch,
    agent_addr: String,
    witness_addr: String,
    /// The cycle being run (1-based).
    n: u64,
    phase: Phase,
}

impl Controller<'_, '_> {
    fn say(&self, m: String) {
        if !self.c.quiet {
            eprintln!("plugpull campaign: {m}");
        }
    }

    /// Nothing came from the agent in time: the host never started acking (an error), or
    /// it did not come back after the cut (a dead device, recorded; the campaign stops).
    fn on_silence(&mut self) -> Result<()> {
        let s = self.c.settings;
        match std::mem::replace(&mut self.phase, Phase::WaitRun) {
            Phase::WaitRun => Err(HostError::NoRunAcked {
                waited: s.boot_timeout + s.wait_timeout,
                agent_addr: self.agent_addr.clone(),
                witness_addr: self.witness_addr.clone(),
            }),
            Phase::WaitReport {
                mut r, t0, proof, ..
            } => {
                let why = format!(
                    "the host did not report within {:?} after power was restored: the host or the drive under test did not come back (or the switch did not cut the host: its run would have gone on acking)",
                    s.boot_timeout
                );
                r.report.verdict = Verdict::Fail;
                r.report.summary = format!("the device is dead: {why}");
                r.report.dead_device = Some(why);
                r.apply_cut_proof(proof.0, &proof.1);
                r.cycle_ms = t0.elapsed().as_secs_f64() * 1e3;
                self.say(format!(
                    "cycle {}/{}: FAIL - {}",
                    self.n, self.c.cycles_wanted, r.report.summary
                ));
                self.results.append(*r)?;
                self.say("stopping: the host is gone. Bring it back, then run the same command to resume".into());
                Ok(())
            }
        }
    }

    /// The agent booted, with the verification of its previous run if it had one: record
    /// the cycle it closes, and answer with the next run or "stop".
    fn on_boot(&mut self, host: &str, previous: Option<Box<PreviousRun>>) -> Result<Reply> {
        let n = self.n;
        let pending = match std::mem::replace(&mut self.phase, Phase::WaitRun) {
            Phase::WaitReport {
                r,
                t0,
                on_at,
                proof,
            } => Some((r, t0, on_at, proof)),
            Phase::WaitRun => None,
        };
        match (pending, previous) {
            (Some((mut r, t0, on_at, proof)), Some(p)) if p.run_id == r.run_id => {
                r.reattach_ms = Some(on_at.elapsed().as_secs_f64() * 1e3);
                fill(&mut r, p);
                r.apply_cut_proof(proof.0, &proof.1);
                r.cycle_ms = t0.elapsed().as_secs_f64() * 1e3;
                self.record(*r)?;
            }
            (Some((mut r, t0, _, _)), p) => {
                r.error = Some(format!(
                    "host {host} came back but its agent reported {} instead of run {}: was its state file lost?",
                    p.map(|p| format!("run {}", p.run_id))
                        .unwrap_or_else(|| "no run".into()),
                    r.run_id
                ));
                r.cycle_ms = t0.elapsed().as_secs_f64() * 1e3;
                self.record(*r)?;
            }
            (None, Some(p))
                if p.cycle == n && !self.results.cycles.iter().any(|x| x.run_id == p.run_id) =>
            {
                // The controller was restarted between the cut and this report.
                let mut r = CycleResult::empty(n, derive(self.c.seed, n));
                r.writer_stopped = "unknown: the controller was restarted during this cycle".into();
                fill(&mut r, p);
                self.record(r)?;
            }
            (None, Some(p)) => self.say(format!(
                "host {host} reported run {} (cycle {}) again; already recorded",
                p.run_id, p.cycle
            )),
            (None, None) => self.say(format!("host {host} is up")),
        }
        let wanted = self.c.cycles_wanted;
        Ok(if self.n > wanted {
            Reply::Stop {
                why: format!("the campaign's {wanted} cycle(s) are done"),
            }
        } else {
            Reply::Next(order(self.c.settings, self.c.seed, self.n))
        })
    }

    /// Appends the result of cycle `n` and moves on to the next.
    fn record(&mut self, r: CycleResult) -> Result<()> {
        self.say(line(self.n, self.c.cycles_wanted, &r));
        self.results.append(r)?;
        self.n += 1;
        Ok(())
    }

    /// The agent's run acks: cut the power under it. Returns whether a cut was made (the
    /// boot report is then due).
    fn on_acking(&mut self, cycle: u64, run_id: String) -> Result<bool> {
        let n = self.n;
        if !matches!(self.phase, Phase::WaitRun) {
            self.say(format!(
                "ignoring an ack report for run {run_id} while waiting for the host to come back"
            ));
            return Ok(false);
        }
        if cycle != n {
            self.say(format!(
                "the agent is writing cycle {cycle}'s run; recording it as cycle {n}"
            ));
        }
        let t0 = Instant::now();
        let mut r = Box::new(CycleResult::empty(n, derive(self.c.seed, n)));
        r.run_id = run_id;
        let proof = match cut(self.c.settings, &mut r, self.power) {
            Ok(proof) => proof,
            Err(e) => {
                r.error = Some(error_chain(&e));
                r.cycle_ms = t0.elapsed().as_secs_f64() * 1e3;
                self.results.append(*r)?;
                let _ = self.power.on();
                return Err(HostError::SwitchFailed(e));
            }
        };
        self.phase = Phase::WaitReport {
            r,
            t0,
            on_at: Instant::now(),
            proof,
        };
        Ok(true)
    }
}

/// Random delay, cut (ramped over the cycle's fall time in a `campaign.fall_times`
/// sweep), stay off, read the rail's fall while power is still off, on; stamps into `r`.
/// Returns what the fall proves (`cut_proof`), for when the report comes.
fn cut(
    s: &Settings,
    r: &mut CycleResult,
    power: &mut dyn PowerSwitch,
) -> Result<(Option<bool>, String), PowerError> {
    if let Some(fall) = s.fall_time(r.cycle) {
        power.set_fall_time(fall)?;
        r.fall_time_ms = Some(fall.as_secs_f64() * 1e3);
    }
    let delay = cut_delay(r.seed, s.delay_min, s.delay_max);
    let d0 = Instant::now();
    std::thread::sleep(delay);
    let off = power.off()?;
    let off_start = Instant::now();
    r.delay_ms = d0.elapsed().as_secs_f64() * 1e3;
    r.cut = Some(off);
    r.writer_stopped = "the host lost power".into();
    std::thread::sleep(s.off.saturating_sub(off_start.elapsed()));
    let proof = cut_proof(r, s, power)?;
    let on = power.on()?;
    r.off_ms = on.issued_ns.saturating_sub(off.issued_ns) as f64 / 1e6;
    r.restore = Some(on);
    Ok(proof)
}

fn line(n: u64, of: u64, r: &CycleResult) -> String {
    match &r.error {
        Some(e) => format!("cycle {n}/{of}: {}: {e}", r.report.verdict),
        None => format!(
            "cycle {n}/{of}: cut {:.0} ms after acks flowed, {} acked; {} - {}",
            r.delay_ms, r.acked_records, r.report.verdict, r.report.summary
        ),
    }
}

#[cfg(test)]
mod tests;
