//! A writer's connection and its run's log: Hello (open or create the log, take the run
//! over from an older connection), Acks (validate, append), one commit per batch with
//! a Durable reply, and the event that records how the connection ended.
//!
//! Why the run slot lock: a writer that reconnects while its old connection is still
//! half-open must not interleave appends with it; the newest connection owns the run
//! and the old one stops at its next step.

use crate::model::{Ack, FileName, RunDescriptor, WitnessEvent, now_ns};
use crate::wire::msg::{Msg, PROTOCOL_VERSION};
use crate::witness::server::connection::{Conn, End};
use crate::witness::server::events::fmt_ns;
use crate::witness::server::shared::lock;
use crate::witness::store::log::AckLog;
use crate::witness::store::storage::FsStorage;
use crate::witness::validate::{self, AckRules};
use std::net::Shutdown;
use std::sync::atomic::Ordering;

impl Conn {
    /// Records how the connection ended in the run's log and gives the run up.
    pub(super) fn release_run(&mut self, kind: &str, detail: &str) -> Option<u64> {
        let (_, slot) = self.run.as_ref()?;
        let mut s = lock(slot);
        if s.owner != Some(self.id) {
            return None;
        }
        let last_frame = self.last_frame_at_ns.load(Ordering::Relaxed);
        let log = s.log.as_mut()?;
        let ev = WitnessEvent {
            at_ns: now_ns(),
            kind: kind.into(),
            peer: self.peer.to_string(),
            durable_acks: log.appended_acks(),
            last_ack_at_ns: self.last_ack_at_ns,
            last_frame_at_ns: Some(last_frame),
            detail: format!("{detail}; writer last heard at {}", fmt_ns(last_frame)),
        };
        log.append_event(&ev);
        let durable = match log.commit() {
            Ok(d) => Some(d),
            Err(e) => {
                self.sh.log(format_args!("{e:#}"));
                None
            }
        };
        s.log = None;
        s.owner = None;
        s.owner_stream = None;
        s.owner_heard = None;
        durable
    }

    pub(super) fn on_hello(&mut self, resume: bool, d: RunDescriptor) -> Result<(), End> {
        if self.run.is_some() {
            return Err(End::Protocol("second Hello on one connection".into()));
        }
        // Before any file is touched: a descriptor no writer can send creates nothing.
        let rules = AckRules::for_run(&d).map_err(|f| {
            End::Protocol(format!(
                "the run descriptor of run {} cannot come from a plugpull writer: {f}; \
                 nothing was stored",
                d.run_id
            ))
        })?;
        let slot = self.sh.slot(d.run_id);
        let mut s = lock(&slot);
        let opened_here = s.log.is_none();
        if opened_here {
            s.log = Some(self.open_run_log(&d)?);
        }
        // Validate before taking over: a bad Hello must not disturb a live writer.
        let log = s.log.as_ref().expect("opened above");
        if let Some(m) = hello_refusal(log, &d, resume) {
            if opened_here {
                s.log = None;
            }
            return Err(End::Protocol(m));
        }
        let mut took_over = String::new();
        if let Some(old) = s.owner_stream.take() {
            // The writer reconnected before we noticed its old connection die.
            let _ = old.shutdown(Shutdown::Both);
            took_over = format!(
                "; took over from {}",
                old.peer_addr().map(|a| a.to_string()).unwrap_or("?".into())
            );
        }
        s.owner = None;
        let log = s.log.as_mut().expect("opened above");
        log.append_event(&WitnessEvent {
            at_ns: now_ns(),
            kind: "connect".into(),
            peer: self.peer.to_string(),
            durable_acks: log.durable_acks(),
            last_ack_at_ns: None,
            last_frame_at_ns: None,
            detail: format!("resume={resume}{took_over}"),
        });
        let heard = log.first_event_at_ns().unwrap_or_else(now_ns);
        let durable = match log.commit() {
            Ok(n) => n,
            Err(e) => {
                s.log = None;
                return Err(End::Storage(format!("{e:#}")));
            }
        };
        s.owner = Some(self.id);
        s.owner_stream = self.stream.try_clone().ok();
        s.owner_heard = Some(self.last_frame_at_ns.clone());
        drop(s);
        self.sh.note_run(&d, heard);
        self.run = Some((d.run_id, slot));
        self.rules = Some(rules);
        self.note_connect(&d, resume, durable, &took_over);
        self.reply(&Msg::Welcome {
            version: PROTOCOL_VERSION,
            durable_acks: durable,
        });
        Ok(())
    }

    /// Opens (or creates) the log of `d`'s run for appending through the journal.
    fn open_run_log(&self, d: &RunDescriptor) -> Result<AckLog, End> {
        match AckLog::open_or_create(&FsStorage, &self.sh.dir, d) {
            Ok((l, rec)) => {
                if let Some(r) = rec.filter(|r| r.reason.is_some()) {
                    self.sh.log(format_args!(
                        "run {}: recovered log ({} bytes cut: {})",
                        d.run_id,
                        r.truncated_bytes,
                        r.reason.unwrap_or_default()
                    ));
                }
                Ok(l.with_journal(self.sh.journal.clone()))
            }
            Err(e) => Err(End::Protocol(format!("{e:#}"))),
        }
    }

    /// The `connect` event line of a writer whose Hello was accepted.
    fn note_connect(&self, d: &RunDescriptor, resume: bool, durable: u64, took_over: &str) {
        self.sh.event(
            "connect",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("run", &d.run_id.hex()),
                ("device", &d.device.key()),
                ("mode", &if resume { "resume" } else { "new" }),
                ("auth", &self.auth_name()),
                ("durable", &durable),
                (
                    "took_over",
                    &took_over.trim_start_matches("; took over from "),
                ),
            ],
        );
    }

    /// A batch of acks (Acks, CompactAcks), or of file acks with one name per ack
    /// (FileAcks; `names` is empty for the others): validated, then appended.
    pub(super) fn on_acks(
        &mut self,
        first: u64,
        acks: &[Ack],
        names: &[FileName],
    ) -> Result<(), End> {
        let Some((_, slot)) = &self.run else {
            return Err(End::Protocol(
                "Acks before Hello: a writer must introduce its run first".into(),
            ));
        };
        let rules = self.rules.as_ref().expect("set with run");
        {
            let mut guard = lock(slot);
            let s = &mut *guard;
            if s.owner != Some(self.id) {
                return Err(End::TakenOver);
            }
            let log = s.log.as_mut().expect("owner holds an open log");
            let appended = log.appended_acks();
            if s.seqs_at_acks != appended {
                s.seqs.reset();
            }
            // Only acks past the log's end are new (append_acks drops resent ones and
            // refuses a gap); they are checked before any is appended.
            if let Some(skip) = appended.checked_sub(first) {
                let skip = (skip as usize).min(acks.len());
                let new = &acks[skip..];
                let refused = |v| {
                    End::Protocol(format!(
                        "{v}; a plugpull writer never sends this: the frame is refused and \
                         nothing of it is stored"
                    ))
                };
                if !names.is_empty() {
                    validate::check_file_names(rules, appended, new, &names[skip..])
                        .map_err(refused)?;
                }
                s.seqs.check_batch(rules, appended, new).map_err(refused)?;
            }
            if names.is_empty() {
                log.append_acks(first, acks)
            } else {
                log.append_file_acks(first, acks, names)
            }
            .map_err(|e| End::Protocol(format!("{e:#}")))?;
            s.seqs_at_acks = log.appended_acks();
        }
        self.acks_received += acks.len() as u64;
        self.last_ack_at_ns = Some(now_ns());
        // Even a pure resend of durable acks deserves a Durable reply.
        self.dirty = true;
        Ok(())
    }

    /// Makes everything appended since the last commit durable (one journal sync,
    /// shared with every other run's commits of that moment), then Durable. Ends the
    /// connection only when the commit cannot be made (a failed Durable reply ends it
    /// after the frames already received: `Conn::reply`).
    pub(super) fn commit_and_reply(&mut self) -> Option<End> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let (_, slot) = self.run.as_ref()?;
        let mut s = lock(slot);
        if s.owner != Some(self.id) {
            return Some(End::TakenOver);
        }
        let durable = match s.log.as_mut()?.commit() {
            Ok(n) => n,
            Err(e) => return Some(End::Storage(format!("{e:#}"))),
        };
        drop(s);
        self.reply(&Msg::Durable {
            durable_acks: durable,
        });
        None
    }
}

/// Why a Hello for the run whose log is `log` must be refused, if it must.
fn hello_refusal(log: &AckLog, d: &RunDescriptor, resume: bool) -> Option<String> {
    if log.descriptor() != d {
        Some(format!(
            "run {} is already logged with a different run descriptor; a writer must \
             not reuse another run's id",
            d.run_id
        ))
    } else if !resume && log.durable_acks() > 0 {
        Some(format!(
            "run {} already has {} acks at this witness but the writer says it is \
             new; a new run needs a new run id",
            d.run_id,
            log.durable_acks()
        ))
    } else {
        None
    }
}
