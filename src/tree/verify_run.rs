//! `plugpull verify DIR` end to end: load the run as for a device, judge the tree
//! (`tree::verify`), print the report. Apart from `verify.rs` so the judging stays a
//! pure function of a directory and a log.

use crate::tree::verify;

/// Why a tree verify gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error(transparent)]
    Verify(#[from] crate::verify::VerifyError),
    #[error(transparent)]
    Tree(#[from] verify::TreeVerifyError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The tree would not fit `--memory` (`tree::budget`).
    #[error(transparent)]
    Memory(#[from] crate::tree::budget::TooBig),
}

impl TreeError {
    /// A log or ack no writer could produce: no verdict (exit 3), as for devices.
    pub fn is_impossible_run(&self) -> bool {
        matches!(
            self,
            TreeError::Verify(crate::verify::VerifyError::ImpossibleRun(_))
                | TreeError::Tree(verify::TreeVerifyError::ImpossibleAck { .. })
                | TreeError::Tree(verify::TreeVerifyError::NameMismatch(_))
        )
    }
}

/// `plugpull verify DIR`: loads the run (as for a device, within `--memory`) and judges
/// the tree; the command renders the report (text, `--quiet` verdict line, or JSON with
/// a "tree" section) and then tells the witness.
pub fn verify_dir(o: &crate::verify::VerifyOptions) -> Result<TreeVerified, TreeError> {
    // Counted, and checked against --memory, before a single ack is held.
    let loaded = crate::verify::load::load_run_counted(o, |d, acks| {
        crate::tree::budget::check(d.tree.as_ref(), acks, o.budget.memory_bytes)
            .map_err(TreeError::from)
    })?;
    crate::witness::validate::refuse_impossible_run(&loaded.log)
        .map_err(crate::verify::VerifyError::from)?;
    let mut r = verify::verify_tree(&o.target, &loaded.log)?;
    r.report
        .note_log_wholeness(loaded.source, loaded.wholeness.whole, loaded.wholeness.how);
    r.report.note_writer_end(&loaded.log.events, o.rehearsal);
    // The plain words speak of a drive; here the whole stack under DIR was tested.
    r.report.plain = for_a_tree(&r.report.plain);
    Ok(TreeVerified {
        report: r,
        run: loaded.log.descriptor.run_id,
    })
}

/// What `verify DIR` found: the report and the run it judged.
pub struct TreeVerified {
    pub report: verify::TreeReport,
    pub run: crate::record::RunId,
}

/// Words about a drive made words about the storage under a directory: the file system
/// and the drive were tested together.
pub fn for_a_tree(text: &str) -> String {
    text.replacen(
        "This drive",
        "The storage under this directory (file system and drive)",
        1,
    )
    .replace("on this drive", "on this storage")
}
