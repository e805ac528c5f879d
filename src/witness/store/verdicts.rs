//! Verdicts verify reported on a run, kept beside the run's log in `RUN.verdicts`: one
//! JSON line per verdict, appended and fdatasynced, so `plugpull runs` can say which runs
//! were verified and how.
//!
//! Why a file of its own and not a frame in the ack log: the log is evidence, checked
//! frame by frame and never written after its run ends; a verdict is a note about the
//! evidence. Keeping notes out of the log means a damaged or hostile note can never make
//! a log look damaged or whole. A line that does not parse (a torn append) is skipped.

use crate::record::RunId;
use crate::wire::msg::VerdictMark;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// File name extension of a run's verdict notes in the witness directory.
pub const VERDICTS_EXTENSION: &str = "verdicts";
/// A note bigger than this is refused: verdict marks are a few hundred bytes.
pub const MAX_MARK_BYTES: usize = 4096;

/// Where the verdict notes of `run` live.
pub fn verdicts_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.{VERDICTS_EXTENSION}", run.hex()))
}

/// Appends `mark` as one line and makes it durable; returns how many notes the run has.
pub fn append(dir: &Path, run: RunId, mark: &VerdictMark) -> io::Result<u64> {
    let path = verdicts_path(dir, run);
    let created = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)?;
    let mut line = Vec::new();
    // A torn earlier append left no newline: end it, so this line stays whole.
    if !ends_with_newline(&f)? {
        line.push(b'\n');
    }
    serde_json::to_writer(&mut line, mark).map_err(io::Error::other)?;
    line.push(b'\n');
    f.write_all(&line)?;
    f.sync_data()?;
    if created {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(read(dir, run).len() as u64)
}

fn ends_with_newline(f: &std::fs::File) -> io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    f.read_exact_at(&mut last, len - 1)?;
    Ok(last[0] == b'\n')
}

/// Every readable note of `run`, oldest first; none when the file is absent.
pub fn read(dir: &Path, run: RunId) -> Vec<VerdictMark> {
    let Ok(f) = std::fs::File::open(verdicts_path(dir, run)) else {
        return vec![];
    };
    io::BufReader::new(f)
        .split(b'\n')
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_slice::<VerdictMark>(&l).ok())
        .filter(|m| m.run_id == run.hex())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(run: RunId, verdict: &str) -> VerdictMark {
        VerdictMark {
            run_id: run.hex(),
            verdict: verdict.into(),
            failing: 0,
            target: "/dev/x".into(),
            verified_at: "2026-11-30T12:00:00Z".into(),
        }
    }

    #[test]
    fn appended_marks_read_back_in_order_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunId([7; 16]);
        assert!(read(dir.path(), run).is_empty());
        assert_eq!(append(dir.path(), run, &mark(run, "FAIL")).unwrap(), 1);
        // A torn append: half a line, no newline, then a good one after it.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(verdicts_path(dir.path(), run))
            .unwrap();
        f.write_all(b"{\"run_id\":\"07").unwrap();
        drop(f);
        assert_eq!(append(dir.path(), run, &mark(run, "PASS")).unwrap(), 2);
        let got: Vec<String> = read(dir.path(), run)
            .into_iter()
            .map(|m| m.verdict)
            .collect();
        assert_eq!(got, ["FAIL", "PASS"]);
    }

    #[test]
    fn a_mark_naming_another_run_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunId([7; 16]);
        append(dir.path(), run, &mark(RunId([8; 16]), "PASS")).unwrap();
        assert!(read(dir.path(), run).is_empty());
    }
}
