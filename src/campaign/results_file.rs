//! The results file on disk: one JSON header line, then one JSON line per finished cycle,
//! each fsync'd before the next cycle starts.
//!
//! Why the file is the campaign's only state: a controller killed at any moment loses at
//! most the cycle in progress (never a finished one), and restarting it with the same
//! config resumes after the last complete line. A torn last line (killed mid-write) is cut
//! off on resume.
//!
//! Why it is opened once, checked on the handle, and kept: `campaign.results` is a path
//! a user types, and a path checked by name can be something else by the time it is
//! opened. A block device reports length 0 and once passed for a new, empty file, and
//! its file system was overwritten from offset 0. So the file is opened once with
//! O_NOFOLLOW (a symbolic link is refused, never followed: name the real file instead),
//! the open handle must be a regular file (fstat on the handle), a new file is created
//! with O_CREAT|O_EXCL, an existing one is appended to only when its first line is a
//! campaign header, and every later write goes through that same handle.

use super::results::{CycleResult, Header};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why the results file could not be opened, read or appended to.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// `what` says which step: "creating DIR", "reading PATH", "writing to PATH", ...
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Sync(std::io::Error),
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    #[error(
        "{} is not a plugpull campaign results file: it was left as it is. Choose a new campaign.results path (or --results) for a new campaign",
        path.display()
    )]
    NotResults {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{} has no header line, so it is not a plugpull campaign results file: it was left as it is. Choose a new campaign.results path (or --results)",
        path.display()
    )]
    NoHeader { path: PathBuf },
    #[error(
        "{} belongs to a campaign with a different configuration: restore the original config to resume it, or choose a new campaign.results file",
        path.display()
    )]
    OtherConfig { path: PathBuf },
    #[error(
        "{} is a symbolic link: a results file is never reached through one (it could lead to any file). Name the file itself in campaign.results (or --results)",
        path.display()
    )]
    Symlink { path: PathBuf },
    #[error(
        "{} is {kind}, not a regular file: results are only ever written to a file of their own. Name a new file in campaign.results (or --results), e.g. results.jsonl beside the campaign file",
        path.display()
    )]
    NotRegular { path: PathBuf, kind: &'static str },
}

type Result<T, E = ResultsError> = std::result::Result<T, E>;

/// Wraps an I/O error with the step that failed.
fn step(what: impl FnOnce() -> String) -> impl FnOnce(std::io::Error) -> ResultsError {
    move |source| ResultsError::Io {
        what: what(),
        source,
    }
}

/// The open results file.
pub struct ResultsFile {
    pub path: PathBuf,
    file: File,
    pub header: Header,
    pub cycles: Vec<CycleResult>,
}

impl ResultsFile {
    /// Opens `path`, creating it with `header` if new; on resume checks the config is the
    /// same and cuts off a torn last line. Refuses (and leaves untouched) anything that
    /// is not a regular file holding a campaign's results.
    pub fn open_or_create(path: &Path, header: Header) -> Result<ResultsFile> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(step(|| format!("creating {}", dir.display())))?;
            }
        }
        let created = open_checked(path, Access::CreateNew);
        let (mut file, data) = match created {
            Ok(file) => (file, Vec::new()),
            Err(ResultsError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                let mut file = open_checked(path, Access::Append)?;
                let mut data = Vec::new();
                file.read_to_end(&mut data)
                    .map_err(step(|| format!("reading {}", path.display())))?;
                (file, data)
            }
            Err(e) => return Err(e),
        };
        if data.is_empty() {
            // Ours (just created) or an empty regular file: nothing in it to lose.
            let line = serde_json::to_string(&header)? + "\n";
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.write_all(line.as_bytes()))
                .and_then(|()| file.sync_all())
                .map_err(ResultsError::Sync)?;
            sync_dir(path);
            return Ok(ResultsFile {
                path: path.into(),
                file,
                header,
                cycles: vec![],
            });
        }
        let (old, cycles, good_len) = parse(path, &data)?;
        if old.config != header.config {
            return Err(ResultsError::OtherConfig { path: path.into() });
        }
        file.set_len(good_len)
            .and_then(|()| file.seek(SeekFrom::End(0)))
            .and_then(|_| file.sync_all())
            .map_err(ResultsError::Sync)?;
        Ok(ResultsFile {
            path: path.into(),
            file,
            header: old,
            cycles,
        })
    }

    /// Appends one cycle's result durably.
    pub fn append(&mut self, r: CycleResult) -> Result<()> {
        let line = serde_json::to_string(&r)? + "\n";
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(step(|| format!("writing to {}", self.path.display())))?;
        self.cycles.push(r);
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Append,
    CreateNew,
}

/// Opens `path` without following a symbolic link and checks, on the handle, that it is
/// a regular file. O_NONBLOCK and O_NOCTTY keep the open itself harmless when the path
/// turns out to be a FIFO or a terminal (it is then refused, never read or written).
fn open_checked(path: &Path, access: Access) -> Result<File> {
    let mut o = OpenOptions::new();
    o.read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
    match access {
        Access::Read => {}
        Access::Append => {
            o.write(true);
        }
        Access::CreateNew => {
            o.write(true).create_new(true).mode(0o644);
        }
    }
    let file = o.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => ResultsError::Symlink { path: path.into() },
        Some(libc::EISDIR) => ResultsError::NotRegular {
            path: path.into(),
            kind: "a directory",
        },
        _ => step(|| format!("opening the results file {}", path.display()))(e),
    })?;
    let t = file
        .metadata()
        .map_err(step(|| format!("fstat of {}", path.display())))?
        .file_type();
    let kind = if t.is_file() {
        None
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    };
    if let Some(kind) = kind {
        return Err(ResultsError::NotRegular {
            path: path.into(),
            kind,
        });
    }
    Ok(file)
}

fn sync_dir(path: &Path) {
    if let Some(d) = path.parent() {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if let Ok(f) = File::open(d) {
            let _ = f.sync_all();
        }
    }
}

/// Reads a results file (under the same rules as opening it for a campaign): header,
/// complete cycles, and the byte length up to the last complete line.
pub fn read(path: &Path) -> Result<(Header, Vec<CycleResult>, u64)> {
    let mut data = Vec::new();
    open_checked(path, Access::Read)?
        .read_to_end(&mut data)
        .map_err(step(|| format!("reading {}", path.display())))?;
    parse(path, &data)
}

fn parse(path: &Path, data: &[u8]) -> Result<(Header, Vec<CycleResult>, u64)> {
    let mut pos = 0usize;
    let mut header = None;
    let mut cycles = vec![];
    let mut good = 0u64;
    while let Some(nl) = data[pos..].iter().position(|&b| b == b'\n') {
        let line = &data[pos..pos + nl];
        if header.is_none() {
            let h: Header =
                serde_json::from_slice(line).map_err(|source| ResultsError::NotResults {
                    path: path.into(),
                    source,
                })?;
            if h.format != super::results::HEADER_FORMAT {
                return Err(ResultsError::NoHeader { path: path.into() });
            }
            header = Some(h);
        } else {
            match serde_json::from_slice::<CycleResult>(line) {
                Ok(c) => cycles.push(c),
                // Only a torn tail can be unparseable; anything after it is dropped too.
                Err(_) => break,
            }
        }
        pos += nl + 1;
        good = pos as u64;
    }
    let header = header.ok_or_else(|| ResultsError::NoHeader { path: path.into() })?;
    Ok((header, cycles, good))
}
