//! What the witness does at start, before it accepts anyone: replay the journal into
//! the logs, then open every log once (cutting torn tails) and index runs by device.
//!
//! Why before listening: a log must hold everything its journal confirmed before its
//! torn tail is judged, and a fetch by device must find the newest run from the start.

use crate::model::{WitnessEvent, disconnect, now_ns};
use crate::units::thousands;
use crate::witness::server::error::{Doing, WitnessError};
use crate::witness::server::shared::Shared;
use crate::witness::store::journal_replay::Replayed;
use crate::witness::store::layout::LOG_EXTENSION;
use crate::witness::store::log::{self, AckLog};
use crate::witness::store::storage::FsStorage;

/// Says what the journal replay did, when there was a journal to replay.
pub(super) fn note_replayed(sh: &Shared, replayed: &Replayed) {
    if replayed.journals > 0 {
        sh.log(format_args!(
            "replayed {} journal files: {} entries into {} run logs{}",
            thousands(replayed.journals as u64),
            thousands(replayed.entries),
            thousands(replayed.runs as u64),
            match (replayed.orphaned_entries, replayed.skipped_entries) {
                (0, 0) => String::new(),
                (o, s) => format!(
                    "; skipped {} entries whose run log is gone and {} that would \
                     have left a hole in their log",
                    thousands(o),
                    thousands(s)
                ),
            }
        ));
    }
}

/// Opens every log once at startup: truncates torn tails and builds the device index.
pub(super) fn recover_dir(sh: &Shared) -> Result<(), WitnessError> {
    let rd = std::fs::read_dir(&sh.dir)
        .doing(|| format!("reading the witness directory {}", sh.dir.display()))?;
    let mut n = 0u64;
    for e in rd {
        let path = e?.path();
        if path.extension().and_then(|x| x.to_str()) != Some(LOG_EXTENSION) {
            continue;
        }
        match AckLog::open(&FsStorage, &path) {
            Ok((mut l, rec)) => {
                if rec.truncated_bytes > 0 {
                    sh.log(format_args!(
                        "recovered {}: cut a torn tail of {} bytes ({}); kept {} acks",
                        path.display(),
                        thousands(rec.truncated_bytes),
                        rec.reason.as_deref().unwrap_or("?"),
                        thousands(l.durable_acks())
                    ));
                }
                let heard = l.first_event_at_ns().unwrap_or_else(|| modified_ns(&path));
                sh.note_run(l.descriptor(), heard);
                if l.connection_open() {
                    end_the_open_connection(sh, &mut l, &path);
                }
                n += 1;
            }
            Err(e) => {
                sh.log(format_args!("skipping {}: {e:#}", path.display()));
                // A damaged log stays fetchable (verify then names the damage), also
                // by device: otherwise an older run of the device would be served.
                if let Ok(d) = log::read_descriptor(&FsStorage, &path) {
                    sh.note_run(&d, modified_ns(&path));
                }
            }
        }
    }
    sh.log(format_args!(
        "{} run logs in {}",
        thousands(n),
        sh.dir.display()
    ));
    Ok(())
}

/// Records that the witness restarted while the run's writer was connected: the
/// connection's end, so a later run of the drive is known to have come after it. The
/// writer was last heard at the latest when the log was last written (its mtime).
fn end_the_open_connection(sh: &Shared, l: &mut AckLog, path: &std::path::Path) {
    let heard = modified_ns(path);
    l.append_event(&WitnessEvent {
        at_ns: now_ns(),
        kind: "disconnect".into(),
        peer: String::new(),
        durable_acks: l.durable_acks(),
        last_ack_at_ns: None,
        last_frame_at_ns: Some(heard),
        detail: format!(
            "{}; writer last heard at the latest when its log was last written",
            disconnect::WITNESS_RESTARTED
        ),
    });
    if let Err(e) = l.commit() {
        sh.log(format_args!(
            "{}: recording the restart: {e:#}",
            path.display()
        ));
    }
}

/// When the log was last changed, by the witness's own clock: the time a run is indexed
/// at when its log holds no event (a witness killed between creating a log and
/// recording its first connect, or a damaged log). At least as late as the first Hello.
fn modified_ns(path: &std::path::Path) -> u64 {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}
