//! `plugpull verify DIR`: every acknowledged file must exist under its final name with
//! its whole acknowledged content. Findings per file (docs/tree.md): intact, superseded,
//! missing, renamed-back, short, and inside the content the byte classes of the device
//! path (lost, stale, shorn, corrupt, misdirected, unreadable). Files never acknowledged
//! are counted as what survived, never as failures.
//!
//! Why the device judge is reused: each acked file is one record (stream 0, seq = file
//! id, offset 0), so its sectors tally exactly like a record's and `verify::judge_tallies`
//! gives the same verdict, counts, loss window, JSON and plain words as for a drive. The
//! file-level findings (which name, which layer the evidence points at) come on top.
//!
//! Reading bypasses the page cache: O_DIRECT where the file system allows it, else
//! posix_fadvise(DONTNEED) on the file before reading it (tmpfs, some FUSE file systems).

use crate::model::{Ack, RunLog};
use crate::record::{RecordId, RunId, RunKey, SECTOR, Stamp, decode_stamp, expected_sector};
use crate::tree::plan::{Arrival, FileStep, TreePlan, TreeScale, plan};
pub use crate::tree::uncached::read_uncached;
use crate::tree::{FILE_STREAM, PLAN_VERSION};
use crate::verify::classify::{SectorFinding, SectorTally, classify_sector};
use crate::verify::report::Report;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What one acknowledged file is, after the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileClass {
    Intact,
    /// A later version of the same path (acked or not) legitimately replaced it.
    Superseded,
    /// No directory entry under its final name.
    Missing,
    /// The name before a durable rename survived (the tmp name, or the replaced version).
    RenamedBack,
    /// The file is shorter than acknowledged; what is there is intact.
    Short,
    Lost,
    Stale,
    Shorn,
    Corrupt,
    Misdirected,
    Unreadable,
}

impl FileClass {
    pub const ALL: [FileClass; 11] = [
        FileClass::Intact,
        FileClass::Superseded,
        FileClass::Missing,
        FileClass::RenamedBack,
        FileClass::Short,
        FileClass::Lost,
        FileClass::Stale,
        FileClass::Shorn,
        FileClass::Corrupt,
        FileClass::Misdirected,
        FileClass::Unreadable,
    ];
    pub fn name(self) -> &'static str {
        match self {
            FileClass::Intact => "intact",
            FileClass::Superseded => "superseded",
            FileClass::Missing => "missing",
            FileClass::RenamedBack => "renamed-back",
            FileClass::Short => "short",
            FileClass::Lost => "lost",
            FileClass::Stale => "stale",
            FileClass::Shorn => "shorn",
            FileClass::Corrupt => "corrupt",
            FileClass::Misdirected => "misdirected",
            FileClass::Unreadable => "unreadable",
        }
    }
    pub fn is_failure(self) -> bool {
        !matches!(self, FileClass::Intact | FileClass::Superseded)
    }
}

/// One acknowledged file that did not survive as it should have.
#[derive(Clone, Debug, Serialize)]
pub struct FileFinding {
    pub path: String,
    pub id: u64,
    pub class: FileClass,
    pub len_bytes: u64,
    /// Bytes found under the final name (None: no such name).
    pub found_bytes: Option<u64>,
    /// Which layer the evidence points at, in words ("directory entry: ...").
    pub layer: String,
}

/// The tree part of the report (JSON key "tree", docs/tree.md).
#[derive(Clone, Debug, Serialize)]
pub struct TreeSection {
    pub root: String,
    pub files_acked: u64,
    pub file_counts: BTreeMap<&'static str, u64>,
    /// Files never acknowledged: found under their name, or not there. Never failures.
    pub unacked_present: u64,
    pub unacked_absent: u64,
    /// "O_DIRECT" or "posix_fadvise DONTNEED" (the first file read tells).
    pub read_mode: String,
    pub findings: Vec<FileFinding>,
}

/// A device report with the tree section beside it (one JSON object).
#[derive(Clone, Debug, Serialize)]
pub struct TreeReport {
    #[serde(flatten)]
    pub report: Report,
    pub tree: TreeSection,
}

#[derive(Debug, thiserror::Error)]
pub enum TreeVerifyError {
    #[error("run {0} is not a tree run (it wrote to a device or file): verify its device or file")]
    NotATree(RunId),
    #[error(
        "run {run} was written by plan version {found}; this plugpull knows version {PLAN_VERSION}"
    )]
    PlanVersion { run: RunId, found: u16 },
    #[error("the run's tree {} is not there: is {} the directory it wrote to?", .root.display(), .dir.display())]
    NoRoot { root: PathBuf, dir: PathBuf },
    /// An ack no tree writer could produce (exit 3, like any impossible run).
    #[error("ack {index} (file id {id}, {sectors} sectors) matches no file of the run's plan")]
    ImpossibleAck { index: usize, id: u64, sectors: u32 },
    /// A file ack whose name is not the one the plan gives its file (exit 3).
    #[error(transparent)]
    NameMismatch(#[from] crate::tree::names::NameMismatch),
    /// A file's read buffer could not be allocated: no verdict (exit 2), as for a device
    /// (`VerifyError::ReadBuffers`), rather than the file called unreadable.
    #[error(
        "verify could not read the tree's files, so there is no verdict: free some memory (or verify on a machine with more free) and verify again"
    )]
    ReadBuffers(#[source] std::io::Error),
}

/// Judges the tree of `log` under `dir`.
pub fn verify_tree(dir: &Path, log: &RunLog) -> Result<TreeReport, TreeVerifyError> {
    let run = log.descriptor.run_id;
    let ts = log
        .descriptor
        .tree
        .as_ref()
        .ok_or(TreeVerifyError::NotATree(run))?;
    if ts.plan_version != PLAN_VERSION {
        return Err(TreeVerifyError::PlanVersion {
            run,
            found: ts.plan_version,
        });
    }
    let root = dir.join(&ts.root);
    // A run with acknowledged files whose root is gone lost them all (a drive that lied
    // about the flush after the root's mkdir, or a file system that no longer mounts):
    // that is a verdict (FAIL, each file missing), never an error that hides it, as a
    // vanished device is with --run (docs/tree.md). The run was named or matched to DIR.
    if !root.is_dir() && log.acks.is_empty() {
        return Err(TreeVerifyError::NoRoot {
            root,
            dir: dir.to_path_buf(),
        });
    }
    let p = plan(
        ts.seed,
        TreeScale {
            files: ts.files,
            total_bytes: ts.total_bytes,
        },
    );
    let steps: HashMap<u64, &FileStep> = p.files().map(|f| (f.id, f)).collect();
    for (index, a) in log.acks.iter().enumerate() {
        let ok = a.record.stream == FILE_STREAM
            && a.record.offset == 0
            && steps
                .get(&a.record.seq)
                .is_some_and(|f| f.sectors == a.record.sectors);
        if !ok {
            return Err(TreeVerifyError::ImpossibleAck {
                index,
                id: a.record.seq,
                sectors: a.record.sectors,
            });
        }
    }
    crate::tree::names::check_names(log, &steps)?;
    let mut j = Judge::new(&root, dir, run, &p, log);
    let mut tallies = Vec::with_capacity(log.acks.len());
    for a in &log.acks {
        tallies.push(j.judge_file(a, steps[&a.record.seq])?);
    }
    let (mut report, _) = crate::verify::judge_tallies(&log.acks, &tallies, &Default::default());
    report.run = Some(log.descriptor.clone());
    report.target = dir.display().to_string();
    report.note_log_damage(crate::witness::store::checker::damage_details(log));
    let (present, absent) = j.unacked();
    let mut file_counts: BTreeMap<&'static str, u64> =
        FileClass::ALL.iter().map(|c| (c.name(), 0)).collect();
    for c in &j.classes {
        *file_counts.get_mut(c.name()).unwrap() += 1;
    }
    Ok(TreeReport {
        report,
        tree: TreeSection {
            root: root.display().to_string(),
            files_acked: log.acks.len() as u64,
            file_counts,
            unacked_present: present,
            unacked_absent: absent,
            read_mode: j.read_mode.unwrap_or("none").to_string(),
            findings: j.findings,
        },
    })
}

struct Judge<'a> {
    root: &'a Path,
    dir: &'a Path,
    run: RunId,
    key: RunKey,
    plan: &'a TreePlan,
    /// Every version of each path, in plan order.
    versions: HashMap<&'a str, Vec<u64>>,
    /// The latest acked version of each path.
    latest_acked: HashMap<&'a str, u64>,
    /// Which file id each stray file (found by a walk) holds, built on first need.
    strays: Option<HashMap<u64, PathBuf>>,
    read_mode: Option<&'static str>,
    classes: Vec<FileClass>,
    findings: Vec<FileFinding>,
}

impl<'a> Judge<'a> {
    fn new(root: &'a Path, dir: &'a Path, run: RunId, p: &'a TreePlan, log: &RunLog) -> Self {
        let mut versions: HashMap<&str, Vec<u64>> = HashMap::new();
        let mut path_of: HashMap<u64, &str> = HashMap::new();
        for f in p.files() {
            versions.entry(f.path.as_str()).or_default().push(f.id);
            path_of.insert(f.id, f.path.as_str());
        }
        let mut latest_acked = HashMap::new();
        for a in &log.acks {
            latest_acked.insert(path_of[&a.record.seq], a.record.seq);
        }
        Judge {
            root,
            dir,
            run,
            // The content generator of the format the run was written in; a version this
            // build cannot regenerate has stamps it cannot decode either (foreign), so the
            // current key is as good as any there.
            key: RunKey::for_version(run, log.descriptor.format_version)
                .unwrap_or_else(|| RunKey::new(run)),
            plan: p,
            versions,
            latest_acked,
            strays: None,
            read_mode: None,
            classes: vec![],
            findings: vec![],
        }
    }

    /// The sector tally of acked file `a` (for the device judge), recording its class.
    /// An error only when the file's read buffer could not be had (no verdict then).
    fn judge_file(&mut self, a: &Ack, f: &FileStep) -> Result<SectorTally, TreeVerifyError> {
        let rec = a.record;
        let mut t = SectorTally::default();
        if self.latest_acked[f.path.as_str()] != f.id {
            // A later acknowledged version replaced it; that one is judged.
            t.superseded = rec.sectors;
            self.classes.push(FileClass::Superseded);
            return Ok(t);
        }
        let final_path = self.root.join(&f.path);
        let content = match self.read(&final_path) {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
                return Err(TreeVerifyError::ReadBuffers(e));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                t.blank = rec.sectors;
                let (class, layer) = self.explain_missing(f);
                self.finding(f, class, None, layer);
                return Ok(t);
            }
            Err(e) => {
                t.unreadable = rec.sectors;
                self.finding(f, FileClass::Unreadable, None, format!("read failed: {e}"));
                return Ok(t);
            }
        };
        let later = |id: u64| id > f.id;
        let mine = &self.versions[f.path.as_str()];
        // An in-place overwrite under way at the cut: open(O_TRUNC) emptied the name
        // before the later, unacknowledged version's bytes landed. Legitimate.
        let overwrite_under_way = || {
            self.plan
                .files()
                .any(|g| g.path == f.path && g.id > f.id && g.arrival == Arrival::InPlace)
        };
        if content.is_empty() && overwrite_under_way() {
            t.superseded = rec.sectors;
            self.classes.push(FileClass::Superseded);
            return Ok(t);
        }
        // A later, unacknowledged version under the name: a legitimate replacement.
        if let Some(s) = first_stamp(&content)
            && s.run == self.run
            && mine.contains(&s.record.seq)
            && later(s.record.seq)
        {
            t.superseded = rec.sectors;
            self.classes.push(FileClass::Superseded);
            return Ok(t);
        }
        for i in 0..rec.sectors {
            let at = i as usize * SECTOR;
            let Some(sector) = content.get(at..at + SECTOR) else {
                t.add(SectorFinding::Blank);
                continue;
            };
            t.add(self.classify(sector, &rec, i, mine));
        }
        let class = match crate::verify::classify::classify_record(&t, false) {
            crate::model::RecordClass::Intact => FileClass::Intact,
            _ if (content.len() as u64) < rec.len_bytes()
                && t.intact as u64 * SECTOR as u64 == content.len() as u64 =>
            {
                FileClass::Short
            }
            // The older version under the name after an atomic replace: the rename undone.
            crate::model::RecordClass::Lost
                if matches!(f.arrival, Arrival::Renamed { .. }) && t.old > 0 =>
            {
                FileClass::RenamedBack
            }
            c => by_record_class(c),
        };
        if class == FileClass::Intact {
            self.classes.push(class);
        } else {
            let layer = layer_of(class, f);
            self.finding(f, class, Some(content.len() as u64), layer);
        }
        Ok(t)
    }

    /// One sector of acked file `rec`: the device classifier's rules, with file
    /// semantics for a valid stamp of this run (another file's data is misdirected, an
    /// earlier version of this path is old, a later one superseded).
    fn classify(&self, sector: &[u8], rec: &RecordId, i: u32, mine: &[u64]) -> SectorFinding {
        let stamp = decode_stamp(sector);
        match &stamp {
            Ok(s) if s.run == self.run && s.record.seq != rec.seq => {
                match mine.contains(&s.record.seq) && s.index == i {
                    true if s.record.seq < rec.seq => SectorFinding::Old,
                    true => SectorFinding::Superseded,
                    false => SectorFinding::Misplaced,
                }
            }
            Ok(s) if s.run == self.run && s.index != i => SectorFinding::Misplaced,
            _ => {
                let ok = stamp
                    .as_ref()
                    .is_ok_and(|s| crate::record::content_matches(sector, s));
                classify_sector(sector, &stamp, ok, self.run, &[], rec, i, || {
                    let mut e = [0u8; SECTOR];
                    expected_sector(&mut e, &self.key, self.run, rec, i);
                    e
                })
            }
        }
    }

    /// Why an acked file has no name: its data under the tmp name (a rename undone), or
    /// under another name or in lost+found (the directory entry lost), or nowhere.
    fn explain_missing(&mut self, f: &FileStep) -> (FileClass, String) {
        if let Arrival::Renamed { tmp } = &f.arrival
            && let Ok(c) = self.read(&self.root.join(tmp))
            && first_stamp(&c).is_some_and(|s| s.run == self.run && s.record.seq == f.id)
        {
            return (
                FileClass::RenamedBack,
                format!(
                    "directory: the rename to the final name was lost; the data survived under {tmp}"
                ),
            );
        }
        let strays = self
            .strays
            .get_or_insert_with(|| walk_strays(self.root, self.dir, self.run));
        match strays.get(&f.id) {
            Some(p) => (
                FileClass::Missing,
                format!(
                    "directory entry: the file's data survived under {}",
                    p.display()
                ),
            ),
            None if !self.root.is_dir() => (
                FileClass::Missing,
                format!(
                    "directory: the run's root {} is gone from {} (its entry was lost, the \
                     file system did not mount there, or it is not where the run wrote)",
                    self.root.display(),
                    self.dir.display()
                ),
            ),
            None => (
                FileClass::Missing,
                "directory entry and data: neither the name nor the data was found".into(),
            ),
        }
    }

    fn finding(&mut self, f: &FileStep, class: FileClass, found: Option<u64>, layer: String) {
        self.classes.push(class);
        if self.findings.len() < crate::verify::report::MAX_FINDINGS {
            self.findings.push(FileFinding {
                path: f.path.clone(),
                id: f.id,
                class,
                len_bytes: f.len_bytes(),
                found_bytes: found,
                layer,
            });
        }
    }

    /// Paths whose versions were all unacknowledged: (present under the name, absent).
    fn unacked(&self) -> (u64, u64) {
        let (mut present, mut absent) = (0, 0);
        for path in self.versions.keys() {
            if self.latest_acked.contains_key(path) {
                continue;
            }
            match self.root.join(path).exists() {
                true => present += 1,
                false => absent += 1,
            }
        }
        (present, absent)
    }

    /// The whole file, read past the page cache.
    fn read(&mut self, path: &Path) -> std::io::Result<Vec<u8>> {
        let (bytes, mode) = read_uncached(path)?;
        self.read_mode.get_or_insert(mode);
        Ok(bytes)
    }
}

fn by_record_class(c: crate::model::RecordClass) -> FileClass {
    use crate::model::RecordClass as R;
    match c {
        R::Intact => FileClass::Intact,
        R::Superseded => FileClass::Superseded,
        R::Lost => FileClass::Lost,
        R::Stale => FileClass::Stale,
        R::Shorn => FileClass::Shorn,
        R::Corrupt => FileClass::Corrupt,
        R::Misdirected => FileClass::Misdirected,
        R::Unreadable => FileClass::Unreadable,
    }
}

/// Which layer a content finding points at.
fn layer_of(class: FileClass, f: &FileStep) -> String {
    match class {
        FileClass::Short => "file size (inode): the acknowledged length was lost".into(),
        FileClass::RenamedBack => {
            "directory: the rename over the older version was lost; the older version is under the name".into()
        }
        FileClass::Lost if f.replaces.is_some() => {
            "data: the overwrite did not reach the medium (older or no content under the name)".into()
        }
        FileClass::Misdirected => "data: another file's blocks are under this name".into(),
        _ => "data: the name survived, the content did not".into(),
    }
}

fn first_stamp(content: &[u8]) -> Option<Stamp> {
    content.get(..SECTOR).and_then(|s| decode_stamp(s).ok())
}

/// Every regular file under `root` and `dir/lost+found` whose first sector is a stamp of
/// `run`: file id -> where it is.
fn walk_strays(root: &Path, dir: &Path, run: RunId) -> HashMap<u64, PathBuf> {
    let mut out = HashMap::new();
    let mut todo = vec![root.to_path_buf(), dir.join("lost+found")];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                todo.push(e.path());
            } else if ft.is_file() {
                let mut head = [0u8; SECTOR];
                let got = File::open(e.path()).and_then(|mut f| f.read_exact(&mut head));
                if got.is_ok()
                    && let Ok(s) = decode_stamp(&head)
                    && s.run == run
                {
                    out.insert(s.record.seq, e.path());
                }
            }
        }
    }
    out
}

/// The tree section for people: counts per file class, then each failing file.
pub fn tree_text(t: &TreeSection) -> String {
    use crate::units::thousands;
    let mut o = format!(
        "\nTree {} ({} acknowledged file versions; read with {}):\n",
        t.root,
        thousands(t.files_acked),
        t.read_mode
    );
    for (name, n) in &t.file_counts {
        if *n > 0 {
            o += &format!("  {name:<13} {}\n", thousands(*n));
        }
    }
    o += &format!(
        "  never acknowledged: {} present, {} absent (not failures)\n",
        thousands(t.unacked_present),
        thousands(t.unacked_absent)
    );
    for f in &t.findings {
        o += &format!(
            "  {:<13} {} (file id {}, {} bytes acked, {}): {}\n",
            f.class.name(),
            f.path,
            f.id,
            f.len_bytes,
            match f.found_bytes {
                Some(b) => format!("{b} bytes found"),
                None => "no such name".into(),
            },
            f.layer
        );
    }
    o
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
