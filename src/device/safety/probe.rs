//! What libblkid finds on an open target. Why libblkid: it is what blkid, wipefs, udev and
//! mkfs consult, so it knows every file system, RAID and LVM member, partition table,
//! swap area and encrypted volume those tools make, and a hand-kept list of magic numbers
//! never keeps up.
//!
//! Why through util-linux's `wipefs` and `blkid` and not linked in: the shipped binary is
//! static (scripts/build-static.sh) and Debian's libblkid is a shared library whose Rust
//! bindings need bindgen and libclang at build time; both tools are in util-linux, which
//! every Linux system this runs on has. Both are asked: `wipefs` lists every signature
//! with the offset of its magic (so one lying inside plugpull's own record sectors can be
//! told apart, as for the hand-kept list), `blkid -p` (superblocks and partition tables,
//! no cache) also reports what libblkid recognises without a magic string.
//!
//! The tools probe the handle plugpull will write, never a name: the handle's duplicate
//! is their standard input and they open `/proc/self/fd/0`, which is that same inode.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the tools are looked for first (a root shell's PATH may lack sbin, or be the
/// caller's), then PATH.
const SYSTEM_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The handle, as the probing child sees its standard input.
const CHILD_FD: &str = "/proc/self/fd/0";

/// One thing libblkid found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    /// libblkid's name: `ext4`, `linux_raid_member`, `dos`, `gpt`, `crypto_LUKS`...
    pub kind: String,
    /// libblkid's usage class: filesystem, raid, crypto, other; "partition table" for
    /// a partition table.
    pub usage: String,
    /// Where its magic is, and how long (None: libblkid reported none).
    pub magic: Option<(u64, u64)>,
}

impl Found {
    /// Worded for the refusal message: `a file system "minix" (libblkid: magic at byte
    /// 1048)`.
    pub fn describe(&self) -> String {
        let what = match self.usage.as_str() {
            "file system" => "a file system",
            "raid" => "a RAID or LVM member",
            "crypto" => "an encrypted volume",
            "partition table" => "a partition table",
            _ => "a signature",
        };
        let at = match self.magic {
            Some((off, _)) => format!(": magic at byte {off}"),
            None => String::new(),
        };
        format!("{what} \"{}\" (libblkid{at})", self.kind)
    }
}

/// Why libblkid could not be asked.
#[derive(Debug, thiserror::Error)]
pub(super) enum ProbeError {
    #[error(
        "neither wipefs nor blkid (util-linux) was found in {} or PATH, so what the target holds \
         cannot be checked; install util-linux",
        SYSTEM_DIRS.join(", ")
    )]
    NoTool,
    #[error("{tool} failed on it: {detail}")]
    Failed { tool: String, detail: String },
}

/// Everything libblkid finds on `file`.
pub(super) fn probe(file: &File) -> Result<Vec<Found>, ProbeError> {
    probe_with(file, &find_tool("wipefs"), &find_tool("blkid"))
}

/// [`probe`] with the tools given (None: not installed).
pub(super) fn probe_with(
    file: &File,
    wipefs: &Option<PathBuf>,
    blkid: &Option<PathBuf>,
) -> Result<Vec<Found>, ProbeError> {
    if wipefs.is_none() && blkid.is_none() {
        return Err(ProbeError::NoTool);
    }
    let mut found = match wipefs {
        Some(w) => run_wipefs(w, file)?,
        None => vec![],
    };
    if let Some(b) = blkid {
        for f in run_blkid(b, file)? {
            // wipefs named it already, with its magic's offset: that entry decides.
            if !found.iter().any(|w| w.kind == f.kind) {
                found.push(f);
            }
        }
    }
    Ok(found)
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .chain(std::env::split_paths(&path))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `tool args... /proc/self/fd/0` with the handle as standard input: (exit code,
/// stdout, stderr).
fn run_on(tool: &Path, args: &[&str], file: &File) -> Result<(i32, String, String), ProbeError> {
    let failed = |detail: String| ProbeError::Failed {
        tool: tool.display().to_string(),
        detail,
    };
    let stdin = file.try_clone().map_err(|e| failed(e.to_string()))?;
    let out = Command::new(tool)
        .args(args)
        .arg(CHILD_FD)
        .stdin(Stdio::from(stdin))
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| failed(e.to_string()))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).trim().to_string(),
    ))
}

#[derive(serde::Deserialize)]
struct WipefsList {
    #[serde(default)]
    signatures: Vec<WipefsSig>,
}

#[derive(serde::Deserialize)]
struct WipefsSig {
    offset: String,
    #[serde(default)]
    length: Option<u64>,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    usage: Option<String>,
}

/// `wipefs --json`: every signature libblkid finds at this level, with its magic.
fn run_wipefs(tool: &Path, file: &File) -> Result<Vec<Found>, ProbeError> {
    let (code, out, err) = run_on(tool, &["--json", "-O", "OFFSET,LENGTH,TYPE,USAGE"], file)?;
    let failed = |detail: String| ProbeError::Failed {
        tool: tool.display().to_string(),
        detail,
    };
    if code != 0 {
        return Err(failed(format!("exit {code}: {err}")));
    }
    // No signature at all prints nothing in some versions.
    if out.trim().is_empty() {
        return Ok(vec![]);
    }
    let list: WipefsList =
        serde_json::from_str(&out).map_err(|e| failed(format!("unexpected output ({e})")))?;
    list.signatures
        .into_iter()
        .map(|s| {
            let hex = s.offset.trim_start_matches("0x");
            let off = u64::from_str_radix(hex, 16)
                .map_err(|_| failed(format!("unexpected offset {:?}", s.offset)))?;
            Ok(Found {
                kind: s.kind,
                usage: usage_name(s.usage.as_deref()),
                magic: Some((off, s.length.unwrap_or(1).max(1))),
            })
        })
        .collect()
}

/// `blkid -p -o export` (low-level probe of superblocks and partition tables, no
/// cache): what it names, magic or not.
fn run_blkid(tool: &Path, file: &File) -> Result<Vec<Found>, ProbeError> {
    let (code, out, err) = run_on(tool, &["-p", "-o", "export"], file)?;
    match code {
        // Found something.
        0 => {}
        // Nothing found.
        2 => return Ok(vec![]),
        // Several signatures that contradict each other: something is there.
        8 => {
            return Ok(vec![Found {
                kind: "several signatures".into(),
                usage: "ambivalent".into(),
                magic: None,
            }]);
        }
        _ => {
            return Err(ProbeError::Failed {
                tool: tool.display().to_string(),
                detail: format!("exit {code}: {err}"),
            });
        }
    }
    let value = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    let mut found = vec![];
    if let Some(kind) = value("TYPE") {
        found.push(Found {
            kind,
            usage: usage_name(value("USAGE").as_deref()),
            magic: None,
        });
    }
    if let Some(kind) = value("PTTYPE") {
        found.push(Found {
            kind,
            usage: usage_name(None),
            magic: None,
        });
    }
    if found.is_empty() {
        // Exit 0 means libblkid matched something, even if it named no type.
        found.push(Found {
            kind: "unnamed".into(),
            usage: "unknown".into(),
            magic: None,
        });
    }
    Ok(found)
}

/// libblkid's usage word as a reader knows it; a partition table has none.
fn usage_name(usage: Option<&str>) -> String {
    match usage {
        None | Some("") | Some("partition-table") | Some("partition table") => {
            "partition table".into()
        }
        Some("filesystem") => "file system".into(),
        Some(u) => u.into(),
    }
}
