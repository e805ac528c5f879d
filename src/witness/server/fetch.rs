//! Serving a run to `verify` / `fetch`: the durable prefix of its log, checked frame by
//! frame on the way out, damage turned into events so verify cannot say PASS, then
//! FetchEnd with the ack count.
//!
//! Why checked here: a fetcher must never receive a log the witness could not read as
//! valid without being told what is wrong with it.

use crate::model::{LATER_RUN_EVENT, RunSelector, WRITER_CONNECTED_EVENT, WitnessEvent, now_ns};
use crate::record::RunId;
use crate::wire::auth;
use crate::wire::frame;
use crate::wire::msg::{Msg, NO_RUN_FOR_DEVICE};
use crate::witness::server::connection::{Conn, End, Next};
use crate::witness::server::shared::{Shared, lock};
use crate::witness::store::checker::{LogChecker, LogItem};
use crate::witness::store::layout;
use crate::witness::store::log;
use crate::witness::store::scan;
use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Fetch replies are written in pieces of about this size.
const FETCH_FLUSH_BYTES: usize = 1 << 20;

impl Conn {
    /// Streams the run `sel` names; the connection then ends (`End::Fetched`).
    pub(super) fn on_fetch(&mut self, sel: &RunSelector) -> Result<Next, End> {
        let run = self.resolve_run(sel)?;
        let path = layout::log_path(&self.sh.dir, run);
        let (file, limit) = self.open_durable_prefix(run, &path)?;
        let sh = self.sh.clone();
        let mut checker = LogChecker::default();
        let mut scratch = Vec::new();
        let mut out = Vec::with_capacity(FETCH_FLUSH_BYTES * 2);
        let stream = &mut self.stream;
        let mut sealer = self.session.as_mut().map(|s| &mut s.sealer);
        let reader = io::BufReader::new(file.take(limit));
        let r = scan::scan_frames_resync(reader, log::is_log_frame, |f, damage| {
            if let Some(d) = damage {
                checker.note_damage(d);
            }
            let start = out.len();
            match checker.check(f, &mut scratch)? {
                LogItem::Header | LogItem::EndMark => {}
                LogItem::Descriptor(d) => Msg::FetchRun(d.clone()).encode_into(&mut out),
                LogItem::Acks { .. } | LogItem::Event(_) => {
                    frame::encode_into(&mut out, f.ty, f.payload)
                }
            }
            if out.len() > start {
                auth::seal_opt(sealer.as_deref_mut(), &mut out, start);
            }
            if out.len() >= FETCH_FLUSH_BYTES {
                stream.write_all(&out)?;
                out.clear();
            }
            Ok(())
        });
        let end = match r {
            Ok(end) => end,
            Err(e) => return Err(End::Storage(format!("reading {}: {e:#}", path.display()))),
        };
        if checker.descriptor.is_none() {
            return Err(End::Protocol(format!(
                "run {run}'s log has no complete descriptor yet"
            )));
        }
        // Damage in the log reaches the fetcher as events, so verify cannot say PASS; so
        // do what the witness knows now and the log cannot: a writer still connected,
        // and the later runs of the same drive.
        let what = format!("the witness's ack log {}", path.display());
        let mut events = checker.damage_events(&what, &end);
        events.extend(fetch_time_events(&sh, run));
        for e in events {
            let start = out.len();
            Msg::Event(e).encode_into(&mut out);
            auth::seal_opt(sealer.as_deref_mut(), &mut out, start);
        }
        let start = out.len();
        Msg::FetchEnd { acks: checker.acks }.encode_into(&mut out);
        auth::seal_opt(sealer, &mut out, start);
        self.stream.write_all(&out).map_err(End::Io)?;
        self.sh.event(
            "fetch",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("run", &run.hex()),
                ("auth", &self.auth_name()),
                ("acks", &checker.acks),
            ],
        );
        Ok(ControlFlow::Break(End::Fetched))
    }

    /// The run a Fetch names: itself, or the newest run of a device.
    fn resolve_run(&self, sel: &RunSelector) -> Result<RunId, End> {
        match sel {
            RunSelector::Run(r) => Ok(*r),
            RunSelector::LatestForDevice(key) => match self.sh.latest_run(key) {
                Some(r) => Ok(r),
                None => Err(End::Protocol(format!(
                    "{NO_RUN_FOR_DEVICE} {key} at this witness; pass --run RUN_ID"
                ))),
            },
        }
    }

    /// Opens `run`'s log at `path` and says how many bytes of it may be served: only the
    /// durable prefix of a log that a writer is appending to.
    pub(super) fn open_durable_prefix(&self, run: RunId, path: &Path) -> Result<(File, u64), End> {
        let limit = match lock(&self.sh.runs).get(&run).cloned() {
            Some(slot) => lock(&slot).log.as_ref().map(|l| l.durable_len_bytes()),
            None => None,
        };
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(End::Protocol(format!("no run {run} at this witness")));
            }
            Err(e) => return Err(End::Storage(format!("opening {}: {e}", path.display()))),
        };
        Ok((file, limit.unwrap_or(u64::MAX)))
    }
}

/// What the witness knows at the time of a fetch that the run's log does not say:
/// whether the run's writer is still connected (and how long it has been silent),
/// and which runs of the same drive it first heard of after this one
/// (docs/protocol.md "Fetch-time events").
fn fetch_time_events(sh: &Shared, run: RunId) -> Vec<WitnessEvent> {
    let now = now_ns();
    let mut out = vec![];
    let slot = lock(&sh.runs).get(&run).cloned();
    if let Some(slot) = slot {
        let s = lock(&slot);
        if let (Some(_), Some(heard)) = (s.owner, s.owner_heard.as_ref()) {
            let heard = heard.load(Ordering::Relaxed);
            out.push(WitnessEvent {
                at_ns: now,
                kind: WRITER_CONNECTED_EVENT.into(),
                peer: String::new(),
                durable_acks: s.log.as_ref().map_or(0, |l| l.durable_acks()),
                last_ack_at_ns: None,
                last_frame_at_ns: Some(heard),
                detail: format!(
                    "the writer was still connected when this fetch was served; its \
                     last frame came {} ms before",
                    now.saturating_sub(heard) / 1_000_000
                ),
            });
        }
    }
    for (heard, later) in sh.runs_after(run) {
        out.push(WitnessEvent {
            at_ns: heard,
            kind: LATER_RUN_EVENT.into(),
            peer: String::new(),
            durable_acks: 0,
            last_ack_at_ns: None,
            last_frame_at_ns: None,
            detail: later.hex(),
        });
    }
    out
}
