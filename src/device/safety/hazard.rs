//! What can make a target unsafe to overwrite, worded for the refusal message. Why its
//! own file: the checks that find hazards (`system`, `probe`, `signature`) and the rules that
//! judge them (the module root) both name them.

/// What was found that makes a target unsafe to overwrite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hazard {
    Mounted {
        device: String,
        at: String,
    },
    Swap(String),
    Held(String),
    /// A loop device reads and writes the target's bytes (it is its backing file or
    /// device, or shares one with it).
    LoopBacked(String),
    /// A loop device whose backing file could not be identified: it may be the target.
    LoopUnknown(String),
    RootOrBoot(String),
    /// Found by the hand-kept list.
    Signature(&'static str),
    /// Found by libblkid, described.
    Found(String),
    /// libblkid could not be asked, so what the target holds is unknown.
    NoProbe(String),
    ForeignFile,
    NotWritableKind,
    Unreadable(String),
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hazard::Mounted { device, at } => write!(f, "{device} is mounted at {at}"),
            Hazard::Swap(d) => write!(f, "{d} is in use as swap"),
            Hazard::Held(h) => write!(f, "it is held by {h} (device-mapper, RAID or LVM)"),
            Hazard::LoopBacked(l) => write!(
                f,
                "loop device {l} uses its bytes (detach it with `losetup -d {l}` first)"
            ),
            Hazard::LoopUnknown(l) => write!(
                f,
                "loop device {l} maps a file plugpull cannot identify (it may be this one; \
                 run as root so its backing file can be asked, or detach it with `losetup -d {l}`)"
            ),
            Hazard::RootOrBoot(m) => write!(f, "it holds the {m} file system of this machine"),
            Hazard::Signature(s) => write!(f, "it holds {s}"),
            Hazard::Found(s) => write!(f, "it holds {s}"),
            Hazard::NoProbe(why) => write!(f, "{why}"),
            Hazard::ForeignFile => write!(f, "the file exists and is not a plugpull target"),
            Hazard::NotWritableKind => write!(f, "it is neither a regular file nor a block device"),
            Hazard::Unreadable(e) => write!(
                f,
                "its first 128 KiB cannot be read to check for data ({e})"
            ),
        }
    }
}
