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

/// `plugpull verify DIR`: loads the run (as for a device), judges the tree, prints the
/// report (text, `--quiet` verdict line, or JSON with a "tree" section).
pub fn verify_dir(o: &crate::verify::VerifyOptions) -> Result<crate::model::Verdict, TreeError> {
    let loaded = crate::verify::load_run_checked(o)?;
    crate::witness::validate::refuse_impossible_run(&loaded.log)
        .map_err(crate::verify::VerifyError::from)?;
    let mut r = verify::verify_tree(&o.target, &loaded.log)?;
    r.report
        .note_log_wholeness(loaded.source, loaded.wholeness.whole, loaded.wholeness.how);
    r.report.note_writer_end(&loaded.log.events, o.rehearsal);
    // The plain words speak of a drive; here the whole stack under DIR was tested.
    r.report.plain = r
        .report
        .plain
        .replacen(
            "This drive",
            "The storage under this directory (file system and drive)",
            1,
        )
        .replace("on this drive", "on this storage");
    if o.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else if o.quiet {
        println!(
            "VERDICT: {} - {}",
            r.report.verdict.name(),
            r.report.summary
        );
    } else {
        let text = r
            .report
            .to_text()
            .replacen(
                "In plain words: This drive",
                "In plain words: The storage under this directory (file system and drive)",
                1,
            )
            .replace("on this drive", "on this storage");
        print!("{text}");
        print!("{}", verify::tree_text(&r.tree));
    }
    crate::verify::tell_the_witness(o, &loaded.log, &r.report);
    Ok(r.report.verdict)
}
