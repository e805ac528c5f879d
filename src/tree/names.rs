//! The names a tree run's file acks carry (FileAcks entries, docs/protocol.md), checked
//! against the run's plan by verify.
//!
//! Why both: the plan (from the descriptor's seed) says where every file must be; the
//! witness's copy of the names says where the writer said it put each file it
//! acknowledged. A difference is a log no writer could produce (exit 3), caught before a
//! file is judged, so verify judges each file by the path the witness holds.

use crate::model::RunLog;
use crate::tree::plan::{Arrival, FileStep};
use std::collections::HashMap;

/// A file ack whose name is not the one the plan gives its file.
#[derive(Debug, thiserror::Error)]
#[error(
    "ack {index} (file id {id}) names the file {acked}, but the run's plan puts that file at \
     {planned}: no tree writer sends this"
)]
pub struct NameMismatch {
    pub index: usize,
    pub id: u64,
    pub acked: String,
    pub planned: String,
}

/// A file's path and, if it arrived by rename, its temporary name, as `a -> b`.
fn shown(path: &str, from: Option<&str>) -> String {
    match from {
        Some(t) => format!("{t:?} -> {path:?}"),
        None => format!("{path:?}"),
    }
}

/// Checks the names the witness holds (FileAcks entries) against the plan: each file
/// ack must name its file's final path and temporary name. A log of a tree run from
/// before file entries has no names; the plan alone says where each file is.
pub(crate) fn check_names(
    log: &RunLog,
    steps: &HashMap<u64, &FileStep>,
) -> Result<(), NameMismatch> {
    for (&index, n) in &log.files {
        let id = log.acks[index].record.seq;
        let f = steps[&id];
        let tmp = match &f.arrival {
            Arrival::InPlace => None,
            Arrival::Renamed { tmp } => Some(tmp.as_str()),
        };
        if n.path != f.path || n.renamed_from.as_deref() != tmp {
            return Err(NameMismatch {
                index,
                id,
                acked: shown(&n.path, n.renamed_from.as_deref()),
                planned: shown(&f.path, tmp),
            });
        }
    }
    Ok(())
}
