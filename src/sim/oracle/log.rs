//! The oracle log on disk: appended one JSON line per event with one write(2), read back
//! (tolerating a torn last line) for resolution.
//!
//! Why apart from the resolver: the log is the format (docs/fault-model.md) and the
//! durability rule (a line written survives a SIGKILL); the resolver is the meaning.

use super::resolver::resolve_events;
use super::{Event, Fault};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::Path;

/// Append-only oracle log: one write(2) per line, optionally mirrored in memory.
pub struct OracleLog {
    file: Option<File>,
    pub(super) events: Vec<Event>,
    /// How far `check_invariants` has read `events`, and what it learnt on the way: each
    /// check reads only the events appended since the last one (see `invariants`).
    pub(super) checked: Cell<usize>,
    pub(super) seen: RefCell<LogSeen>,
}

impl OracleLog {
    pub fn new(path: Option<&Path>) -> io::Result<OracleLog> {
        let file = match path {
            Some(p) => Some(open_oracle(p)?),
            None => None,
        };
        Ok(OracleLog {
            file,
            events: Vec::new(),
            checked: Cell::new(0),
            seen: RefCell::new(LogSeen::default()),
        })
    }

    /// Appends one event. The line reaches the host's page cache before this returns,
    /// so killing the process afterwards loses nothing.
    pub fn append(&mut self, ev: Event) -> io::Result<()> {
        if let Some(f) = &mut self.file {
            let mut line = serde_json::to_vec(&ev).map_err(io::Error::other)?;
            line.push(b'\n');
            f.write_all(&line)?;
        }
        self.events.push(ev);
        Ok(())
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }
}

/// Parses an oracle log into events.
pub fn read_events(path: &Path) -> io::Result<Vec<Event>> {
    let f = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("oracle {}: {e}", path.display())))?;
    let lines: Vec<String> = io::BufReader::new(f).lines().collect::<io::Result<_>>()?;
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(ev) => events.push(ev),
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("oracle {} line {}: {e}", path.display(), i + 1),
                ));
            }
        }
    }
    Ok(events)
}

/// Reads an oracle log and resolves it. A torn last line (the writer of the log died
/// mid-line, which only a host crash could cause) is ignored; any other bad line is an
/// error naming its line number.
pub fn resolve(path: &Path) -> io::Result<Vec<Fault>> {
    Ok(resolve_events(&read_events(path)?))
}

/// What the log check learnt from the events it has read so far.
#[derive(Default)]
pub(crate) struct LogSeen {
    /// A Start event was read: before the first, only the reconciliation of an earlier
    /// session's held writes (Destaged events) may appear.
    pub(super) started: bool,
    /// The last event read was a Cut: only a Start may follow.
    pub(super) cut: bool,
    pub(super) last_fault_id: u64,
    /// Hole faults of this session no HoleWitness has named yet.
    pub(super) open_holes: BTreeSet<u64>,
}

/// Opens (or creates) the oracle log for appending. Why checked: `--oracle` names a file
/// appended to at will, so a link is not followed, and an existing file is taken only if
/// it is a regular file that is empty or starts like an oracle log (a JSON line with an
/// "event"); a text file named by mistake is refused, not appended to.
fn open_oracle(p: &Path) -> io::Result<File> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let refuse = |why: &str| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing --oracle {}: {why}", p.display()),
        )
    };
    if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse(
            "it is a symbolic link; give the path of the log itself",
        ));
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| io::Error::new(e.kind(), format!("oracle {}: {e}", p.display())))?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    if m.len() > 0 {
        const START: &[u8] = b"{\"event\":";
        let mut head = [0u8; START.len()];
        let n = (&f).take(START.len() as u64).read(&mut head)?;
        if n == 0 || !START.starts_with(&head[..n]) {
            return Err(refuse(
                "it exists and is not an oracle log; give a new path or the log of this drive",
            ));
        }
    }
    Ok(f)
}
