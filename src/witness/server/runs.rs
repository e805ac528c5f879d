//! Serving `plugpull runs`: a summary of every run the witness holds (a Fetch with the
//! list selector), one RunInfo per run, then FetchEnd with the number of runs.
//!
//! Why the logs are read rather than an index kept: the counts must be what a fetch
//! would serve now (the durable prefix, checked frame by frame, damage noted). Why not
//! read all of every log each time: an hour at full rate is a 1.4 GB log that took 31 s
//! to list, and a vendor keeps hundreds. So each listing remembers, per run, how far it
//! read a log that checked clean and the checker's state there ([`ListedPrefix`]); the
//! next listing goes on from that byte. Logs only grow while the witness runs (they are
//! repaired only at start, before anything is listed), and a log that is shorter or
//! another file than remembered is read from the start again. What this gives up: a bit
//! flipped in bytes a listing already read shows only after a restart of the witness;
//! fetch and verify read every byte every time.

use crate::record::RunId;
use crate::wire::msg::{Msg, RunInfo, VerdictMark};
use crate::witness::server::connection::{Conn, End, Next};
use crate::witness::server::shared::{LISTED_TAIL_BYTES, ListedPrefix, lock};
use crate::witness::store::checker::{LogChecker, LogItem};
use crate::witness::store::layout::{self, LOG_EXTENSION};
use crate::witness::store::log;
use crate::witness::store::scan;
use crate::witness::store::verdicts;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::os::unix::fs::MetadataExt;

impl Conn {
    /// Sends a RunInfo for every readable run log, then FetchEnd(runs); the connection
    /// then ends (`End::Fetched`). A log without a complete descriptor is left out.
    pub(super) fn on_list_runs(&mut self) -> Result<Next, End> {
        let dir = self.sh.dir.clone();
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| End::Storage(format!("listing {}: {e}", dir.display())))?;
        let mut runs: Vec<RunId> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                RunId::parse(name.strip_suffix(&format!(".{LOG_EXTENSION}"))?)
            })
            .collect();
        runs.sort_by_key(|r| r.hex());
        let mut sent = 0u64;
        for run in runs {
            let Some(info) = self.run_info(run)? else {
                continue;
            };
            self.send(&Msg::RunInfo(Box::new(info)))?;
            sent += 1;
        }
        self.send(&Msg::FetchEnd { acks: sent })?;
        self.sh.event(
            "list-runs",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("auth", &self.auth_name()),
                ("runs", &sent),
            ],
        );
        Ok(ControlFlow::Break(End::Fetched))
    }

    /// Stores a verify's verdict beside the run's log, then FetchEnd(notes the run has);
    /// the connection then ends. A run the witness does not hold, a note no verify sends
    /// (`verdicts::check_mark`) and a note past the run's bounds are refused.
    pub(super) fn on_record_verdict(&mut self, mark: &VerdictMark) -> Result<Next, End> {
        let bytes = serde_json::to_vec(mark).map_or(usize::MAX, |v| v.len());
        if bytes > verdicts::MAX_MARK_BYTES {
            return Err(End::Protocol(format!(
                "verdict note of {bytes} bytes; at most {} are kept",
                verdicts::MAX_MARK_BYTES
            )));
        }
        let run = verdicts::check_mark(mark).map_err(|e| End::Protocol(e.to_string()))?;
        if !layout::log_path(&self.sh.dir, run).exists() {
            return Err(End::Protocol(format!(
                "verdict for run {}, which this witness does not hold",
                run.hex()
            )));
        }
        let notes = verdicts::append(&self.sh.dir, run, mark).map_err(|e| match e {
            e if e.is_refusal() => End::Protocol(e.to_string()),
            e => End::Storage(format!("storing a verdict for run {}: {e}", run.hex())),
        })?;
        self.send(&Msg::FetchEnd { acks: notes })?;
        self.sh.event(
            "verdict",
            &[
                ("conn", &self.id),
                ("peer", &self.peer),
                ("run", &run.hex()),
                ("verdict", &mark.verdict),
            ],
        );
        Ok(ControlFlow::Break(End::Fetched))
    }

    /// The summary of one run's durable log; None when it has no descriptor yet.
    fn run_info(&self, run: RunId) -> Result<Option<RunInfo>, End> {
        let path = layout::log_path(&self.sh.dir, run);
        let (mut file, limit) = match self.open_durable_prefix(run, &path) {
            Ok(x) => x,
            // Removed since the listing: not a run any more.
            Err(End::Protocol(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let meta = file
            .metadata()
            .map_err(|e| End::Storage(format!("reading {}: {e}", path.display())))?;
        let limit = limit.min(meta.len());
        let known = lock(&self.sh.listed)
            .remove(&run)
            .filter(|p| p.ino == meta.ino() && p.len_bytes <= limit)
            .filter(|p| tail_digest(&mut file, p.len_bytes).ok() == Some(p.tail_digest));
        let (mut checker, start, mut last_flushed_ns) = match known {
            Some(p) => (p.checker, p.len_bytes, p.last_flushed_ns),
            None => (LogChecker::default(), 0, None),
        };
        file.seek(SeekFrom::Start(start))
            .map_err(|e| End::Storage(format!("reading {}: {e}", path.display())))?;
        let mut scratch = Vec::new();
        let reader = io::BufReader::new(file.take(limit - start));
        let r = scan::scan_frames_resync(reader, log::is_log_frame, |f, damage| {
            if let Some(d) = damage {
                checker.note_damage(d);
            }
            if let LogItem::Acks { acks, .. } = checker.check(f, &mut scratch)? {
                if let Some(a) = acks.last() {
                    last_flushed_ns = Some(a.flushed_ns);
                }
            }
            Ok(())
        });
        let end = match r {
            Ok(end) => end,
            // A log that cannot be read as a whole still shows, marked damaged, if its
            // descriptor was read.
            Err(_) => {
                return Ok(checker.descriptor.take().map(|descriptor| RunInfo {
                    first_heard_ns: self.sh.heard_at(&descriptor.device.key(), run),
                    descriptor,
                    acks: checker.acks,
                    last_flushed_ns,
                    damaged: true,
                    verified: verdicts::read(&self.sh.dir, run).pop(),
                }));
            }
        };
        let damaged = !checker.damage_events("", &end).is_empty();
        if !damaged && end.tail_bytes == 0 && end.damage.is_empty() {
            let len_bytes = start + end.valid_len_bytes;
            let prefix = ListedPrefix {
                ino: meta.ino(),
                len_bytes,
                tail_digest: tail_digest(&mut file_again(&path)?, len_bytes)
                    .map_err(|e| End::Storage(format!("reading {}: {e}", path.display())))?,
                checker: checker.clone(),
                last_flushed_ns,
            };
            lock(&self.sh.listed).insert(run, prefix);
        }
        Ok(checker.descriptor.take().map(|descriptor| RunInfo {
            first_heard_ns: self.sh.heard_at(&descriptor.device.key(), run),
            descriptor,
            acks: checker.acks,
            last_flushed_ns,
            damaged,
            verified: verdicts::read(&self.sh.dir, run).pop(),
        }))
    }
}

/// BLAKE3 of the (up to) [`LISTED_TAIL_BYTES`] bytes before `end`.
fn tail_digest(file: &mut std::fs::File, end: u64) -> io::Result<[u8; 32]> {
    let from = end.saturating_sub(LISTED_TAIL_BYTES);
    file.seek(SeekFrom::Start(from))?;
    let mut buf = vec![0; (end - from) as usize];
    file.read_exact(&mut buf)?;
    Ok(*blake3::hash(&buf).as_bytes())
}

fn file_again(path: &std::path::Path) -> Result<std::fs::File, End> {
    std::fs::File::open(path).map_err(|e| End::Storage(format!("reading {}: {e}", path.display())))
}
