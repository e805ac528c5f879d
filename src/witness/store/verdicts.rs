//! Verdicts verify reported on a run, kept beside the run's log in `RUN.verdicts`: one
//! JSON line per verdict, appended and fdatasynced, so `plugpull runs` can say which runs
//! were verified and how.
//!
//! Why a file of its own and not a frame in the ack log: the log is evidence, checked
//! frame by frame and never written after its run ends; a verdict is a note about the
//! evidence. Keeping notes out of the log means a damaged or hostile note can never make
//! a log look damaged or whole. A line that does not parse (a torn append) is skipped.
//!
//! Why the notes are checked ([`check_mark`]) and bounded: any peer may send one (the
//! witness key, when set, is the only gate). A note is what verify sends: a known
//! verdict word, a target path without control characters, an RFC 3339 time. A run
//! keeps at most [`MAX_NOTES_PER_RUN`] notes in at most [`MAX_FILE_BYTES`]; more are
//! refused, not rotated, so the notes a run has are never pushed out by later ones.

use crate::model::Verdict;
use crate::model::peer_text::{self, PeerTextError};
use crate::record::RunId;
use crate::wire::msg::VerdictMark;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// File name extension of a run's verdict notes in the witness directory.
pub const VERDICTS_EXTENSION: &str = "verdicts";
/// A note bigger than this is refused: verdict marks are a few hundred bytes.
pub const MAX_MARK_BYTES: usize = 4096;
/// Notes one run keeps; the next is refused.
pub const MAX_NOTES_PER_RUN: usize = 100;
/// Bytes of one run's notes file; a note that would make it longer is refused.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Bytes of a note's target (the path verify read).
pub const MAX_TARGET_BYTES: usize = 1024;
/// Bytes of a note's time (RFC 3339 needs about 35).
pub const MAX_TIME_BYTES: usize = 64;
/// The verdicts verify reports; `ERROR` is a campaign's, never a verify's.
pub const NOTE_VERDICTS: [Verdict; 3] = [Verdict::Pass, Verdict::Fail, Verdict::Inconclusive];

/// Why a note was not stored.
#[derive(Debug, thiserror::Error)]
pub enum NoteError {
    #[error("verdict note for '{0}', which is not a run id")]
    NotARunId(String),
    #[error("verdict note with verdict \"{0}\": a note's verdict is PASS, FAIL or INCONCLUSIVE")]
    UnknownVerdict(String),
    #[error("verdict note: {0}")]
    Text(#[from] PeerTextError),
    #[error("verdict note with verified_at \"{0}\", which is not an RFC 3339 time")]
    BadTime(String),
    #[error("verdict note of {bytes} bytes; at most {MAX_MARK_BYTES} are kept")]
    TooBig { bytes: usize },
    #[error("run {run} already has {MAX_NOTES_PER_RUN} verdict notes; no more are kept")]
    TooMany { run: String },
    #[error("run {run}'s verdict notes would pass {MAX_FILE_BYTES} bytes; no more are kept")]
    FileFull { run: String },
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl NoteError {
    /// The peer sent something no verify sends (as opposed to the witness failing to
    /// store it).
    pub fn is_refusal(&self) -> bool {
        !matches!(self, NoteError::Io(_))
    }
}

/// Where the verdict notes of `run` live.
pub fn verdicts_path(dir: &Path, run: RunId) -> PathBuf {
    dir.join(format!("{}.{VERDICTS_EXTENSION}", run.hex()))
}

/// Whether `mark` is a note verify could have sent; returns the run it names. Every
/// string in an error is escaped.
pub fn check_mark(mark: &VerdictMark) -> Result<RunId, NoteError> {
    let Some(run) = RunId::parse(&mark.run_id) else {
        return Err(NoteError::NotARunId(peer_text::shown_prefix(
            mark.run_id.as_bytes(),
            80,
        )));
    };
    if !NOTE_VERDICTS.iter().any(|v| v.name() == mark.verdict) {
        return Err(NoteError::UnknownVerdict(peer_text::shown_prefix(
            mark.verdict.as_bytes(),
            40,
        )));
    }
    peer_text::check("its target", &mark.target, MAX_TARGET_BYTES)?;
    peer_text::check("its verified_at", &mark.verified_at, MAX_TIME_BYTES)?;
    if chrono::DateTime::parse_from_rfc3339(&mark.verified_at).is_err() {
        return Err(NoteError::BadTime(
            peer_text::shown(&mark.verified_at).into(),
        ));
    }
    Ok(run)
}

/// Checks `mark` ([`check_mark`]), appends it as one line and makes it durable; returns
/// how many notes the run has. A note past the run's bounds is refused.
pub fn append(dir: &Path, run: RunId, mark: &VerdictMark) -> Result<u64, NoteError> {
    check_mark(mark)?;
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
    if line.len() > MAX_MARK_BYTES {
        return Err(NoteError::TooBig { bytes: line.len() });
    }
    if f.metadata()?.len() + line.len() as u64 > MAX_FILE_BYTES {
        return Err(NoteError::FileFull { run: run.hex() });
    }
    if read(dir, run).len() >= MAX_NOTES_PER_RUN {
        return Err(NoteError::TooMany { run: run.hex() });
    }
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

/// Every readable note of `run` that passes [`check_mark`], oldest first, from the first
/// [`MAX_FILE_BYTES`] of its file (a file an older witness let grow is not read whole);
/// none when the file is absent.
pub fn read(dir: &Path, run: RunId) -> Vec<VerdictMark> {
    let Ok(f) = std::fs::File::open(verdicts_path(dir, run)) else {
        return vec![];
    };
    io::BufReader::new(f.take(MAX_FILE_BYTES))
        .split(b'\n')
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_slice::<VerdictMark>(&l).ok())
        .filter(|m| m.run_id == run.hex() && check_mark(m).is_ok())
        .take(MAX_NOTES_PER_RUN)
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
