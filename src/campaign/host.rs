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

use super::agent_auth::AgentKey;
use super::agent_proto::{Access, AgentMsg, PreviousRun, Reply, RunOrder};
use super::config::Settings;
use super::context::{Campaign, derive};
use super::host_listen::{ListenError, listen};
use super::proof::cut_proof;
use super::results::CycleResult;
use super::results_file::{ResultsError, ResultsFile};
use super::witness_backing::back;
use crate::cycle::cut_delay;
use crate::exit::error_chain;
use crate::model::{Placement, RunLog, RunSelector, Verdict};
use crate::power::{PowerError, PowerSwitch};
use crate::record::RunId;
use crate::wire::auth::KeyError;
use crate::witness::client::fetch;
use crate::witness::server::{Witness, WitnessError};
use std::time::{Duration, Instant};

/// Why the whole-host campaign could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Listen(#[from] ListenError),
    #[error("[agent] key_file")]
    Key(#[source] KeyError),
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

/// The agent's report into `r`; its ack counts are then replaced by the witness's
/// (`witness_backing::back`).
fn fill(r: &mut CycleResult, p: Box<PreviousRun>) {
    let p = *p;
    r.run_id = p.run_id;
    r.report = p.report;
    r.acked_records = p.acked_records;
    r.witness_durable = p.acked_records;
    r.last_acked = p.last_acked;
    r.unsafe_shutdowns_delta = p.unsafe_shutdowns_delta;
    r.health = p.health;
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
        /// The host the run was ordered to: only its report closes the cycle.
        host: String,
    },
}

/// Runs the whole-host campaign until `cycles_wanted` results are recorded or the host
/// does not come back.
pub fn run(c: &Campaign, results: &mut ResultsFile, power: &mut dyn PowerSwitch) -> Result<()> {
    let s = c.settings;
    let key = s.file.agent.key_file.as_deref().map(AgentKey::from_file);
    let access = Access {
        key: key.transpose().map_err(HostError::Key)?,
        allow_unauthenticated: s.file.agent.allow_unauthenticated_agents,
    };
    let (agent_addr, rx) = listen(&s.file.agent.listen, agent_idle_limit(s), c.quiet, access)?;
    let (witness_addr, own_witness) = witness(s)?;
    let mut ctl = Controller {
        c,
        n: results.cycles.len() as u64 + 1,
        results,
        power,
        agent_addr,
        witness_addr,
        phase: Phase::WaitRun,
        ordered: None,
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
        let Ok((msg, _origin, peer, reply)) = rx.recv_timeout(left) else {
            ctl.on_silence()?;
            break;
        };
        match msg {
            AgentMsg::Boot { host, previous } => {
                let answer = ctl.on_boot(&host, previous, &peer)?;
                if !matches!(answer, Reply::Refused { .. }) {
                    deadline = Instant::now() + s.wait_timeout;
                }
                reply.answer(answer);
            }
            AgentMsg::Acking {
                host,
                cycle,
                run_id,
                ..
            } => {
                if let Some(why) = ctl.refuse_acking(&host, &run_id, &peer) {
                    reply.answer(Reply::Refused { why });
                    continue;
                }
                // Answered first: the cut that follows takes a while.
                reply.answer(Reply::Ok);
                if ctl.on_acking(&host, cycle, run_id)? {
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
    /// The host the last run order went to (its boot report came first).
    ordered: Option<String>,
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
    /// the cycle it closes, and answer with the next run or "stop". A report is bound to
    /// the host and run it was started for: one from another host, or for a run the
    /// controller did not start on that host, is refused and logged, never recorded.
    fn on_boot(
        &mut self,
        host: &str,
        previous: Option<Box<PreviousRun>>,
        peer: &str,
    ) -> Result<Reply> {
        let n = self.n;
        if let Phase::WaitReport { r, host: h, .. } = &self.phase {
            if h != host {
                let why = format!(
                    "a boot report from host {host:?} while cycle {n}'s run {} was started on host {h:?}",
                    r.run_id
                );
                return Ok(self.refuse("boot report", peer, why));
            }
        }
        let pending = match std::mem::replace(&mut self.phase, Phase::WaitRun) {
            Phase::WaitReport {
                r,
                t0,
                on_at,
                proof,
                ..
            } => Some((r, t0, on_at, proof)),
            Phase::WaitRun => None,
        };
        match (pending, previous) {
            (Some((mut r, t0, on_at, proof)), Some(p)) if p.run_id == r.run_id => {
                r.reattach_ms = Some(on_at.elapsed().as_secs_f64() * 1e3);
                let claimed = p.acked_records;
                fill(&mut r, p);
                let log = self.witness_log(&r.run_id);
                back(&mut r, claimed, host, log.as_ref().map_err(Clone::clone));
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
                // The controller was restarted between the cut and this report: the
                // witness's log says which host started the run.
                let log = self.witness_log(&p.run_id);
                match &log {
                    Ok(l) if l.descriptor.host == host => {}
                    _ => {
                        let why = format!(
                            "a report on run {} that this controller did not start on host {host:?}: {}",
                            p.run_id,
                            match &log {
                                Ok(l) =>
                                    format!("the witness's log names host {:?}", l.descriptor.host),
                                Err(e) => e.clone(),
                            }
                        );
                        return Ok(self.refuse("boot report", peer, why));
                    }
                }
                let mut r = CycleResult::empty(n, derive(self.c.seed, n));
                r.writer_stopped = "unknown: the controller was restarted during this cycle".into();
                let claimed = p.acked_records;
                fill(&mut r, p);
                back(&mut r, claimed, host, log.as_ref().map_err(Clone::clone));
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
            self.ordered = Some(host.to_string());
            Reply::Next(order(self.c.settings, self.c.seed, self.n))
        })
    }

    /// Logs a refused message and says why to its sender.
    fn refuse(&self, what: &str, peer: &str, why: String) -> Reply {
        // Logged even with --quiet: a refusal is someone trying what they may not.
        eprintln!("plugpull campaign: refused a {what} from {peer}: {why}");
        Reply::Refused { why }
    }

    /// The controller's witness's log of `run_id`, or why there is none.
    fn witness_log(&self, run_id: &str) -> Result<RunLog, String> {
        let run = RunId::parse(run_id).ok_or_else(|| format!("{run_id:?} is no run id"))?;
        fetch(&self.witness_addr, &RunSelector::Run(run)).map_err(|e| error_chain(&e))
    }

    /// An ack report is taken only from the host the current run was ordered to.
    fn refuse_acking(&self, host: &str, run_id: &str, peer: &str) -> Option<String> {
        let why = match &self.ordered {
            Some(h) if h == host => return None,
            Some(h) => format!(
                "an ack report for run {run_id} from host {host:?}; cycle {}'s run was ordered to host {h:?}",
                self.n
            ),
            None => format!(
                "an ack report for run {run_id} from host {host:?}; this controller ordered no run yet (the agent reports its boot first)"
            ),
        };
        match self.refuse("ack report", peer, why) {
            Reply::Refused { why } => Some(why),
            _ => None,
        }
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
    fn on_acking(&mut self, host: &str, cycle: u64, run_id: String) -> Result<bool> {
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
            host: host.into(),
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
            "cycle {n}/{of}: cut {} after acks flowed, {} acked; {} - {}{}",
            crate::units::fmt_duration_ms(r.delay_ms),
            crate::units::thousands(r.acked_records),
            r.report.verdict,
            r.report.summary,
            r.health_lines()
        ),
    }
}

#[cfg(test)]
mod tests;
