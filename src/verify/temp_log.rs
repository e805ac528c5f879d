//! A temporary ack log: a witness's fetch streamed into a file (in the temporary
//! directory, `TMPDIR`) and judged from it, by `plugpull verify --witness` and by a
//! cycle's fetched run (`cycle::fetched`: campaigns, the agent, the demo). Removed when
//! dropped, and by Ctrl-C.
//!
//! Why one module: both make such a file, and a Ctrl-C handler exits at once, so no
//! `Drop` runs; the handler removes the live ones itself ([`unlink_live`]), whoever made
//! them. Several can be live at once (`verify --witness` fetches a later run beside the
//! one it holds), so each has a slot of its own: a second one dropped never unregisters
//! the first. A fetch is written to the log's part file first, renamed over the log
//! when the whole run is in ([`TempLog::fetch_into`]); the part file has a name known in
//! advance and a slot of its own too, so a Ctrl-C in the middle of a fetch leaves
//! nothing behind either.

use crate::model::RunSelector;
use crate::wire::auth::Key;
use crate::witness::client::FetchedFile;
use crate::witness::client::error::ClientResult;
use std::ffi::{CStr, CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// A temporary log file's path (`.0`), removed when dropped, with its part file: each
/// path also as the Ctrl-C handler reads it, in its slot of [`LIVE`].
pub struct TempLog(pub PathBuf, Registered, PathBuf, Registered);

/// A path registered for [`unlink_live`]: the same bytes, and the slot holding them.
type Registered = Option<(&'static CStr, usize)>;

/// The paths of temporary logs and their part files made and not yet dropped, for the
/// Ctrl-C handler: pointers, so the handler reads each with one atomic load. More than
/// this many at once (plugpull makes at most three logs, two paths each) go unregistered.
static LIVE: [AtomicPtr<c_char>; 16] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 16];

/// Temporary logs made by this process: two made within the clock's resolution still
/// get two names.
static MADE: AtomicU64 = AtomicU64::new(0);

impl TempLog {
    /// A new path `plugpull-KIND-PID-NANOS-N.acklog` in the temporary directory (the
    /// file is not created), registered for [`unlink_live`].
    pub fn new(kind: &str) -> TempLog {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "plugpull-{kind}-{}-{nanos}-{n}.acklog",
            std::process::id()
        ));
        let mut part = path.clone().into_os_string();
        part.push(".part");
        let part = PathBuf::from(part);
        let (log_slot, part_slot) = (register(&path), register(&part));
        TempLog(path, log_slot, part, part_slot)
    }

    /// Fetches `sel` from the witness at `addr` into this log (its end mark signed with
    /// `key` if given), through its part file.
    pub fn fetch_into(
        &self,
        addr: &str,
        sel: &RunSelector,
        key: Option<&Key>,
    ) -> ClientResult<FetchedFile> {
        crate::witness::client::fetch_into_file_via(addr, sel, key, &self.0, Some(&self.2))
    }
}

/// `path` in a free slot of [`LIVE`], if there is one (and the path holds no NUL).
fn register(path: &Path) -> Registered {
    // Leaked on purpose (a hundred bytes per path): a signal handler may be reading it
    // at any moment, so it is never freed.
    let c = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        .ok()
        .map(|c| &*Box::leak(c.into_boxed_c_str()));
    c.and_then(|c| {
        let p = c.as_ptr().cast_mut();
        let free = |slot: &AtomicPtr<c_char>| {
            let null = std::ptr::null_mut();
            slot.compare_exchange(null, p, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        };
        LIVE.iter().position(free).map(|i| (c, i))
    })
}

impl Drop for TempLog {
    fn drop(&mut self) {
        // As the handler does: never a file someone else put at the name.
        let ours = std::fs::symlink_metadata(&self.0).is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid(2) has no preconditions.
            m.file_type().is_file() && m.uid() == unsafe { libc::geteuid() }
        });
        if ours {
            let _ = std::fs::remove_file(&self.0);
        }
        // The part file is not removed here: the fetch removes its own on failure
        // (checking it is the file it made) and renames it on success.
        for (_, slot) in [self.1, self.3].into_iter().flatten() {
            LIVE[slot].store(std::ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

/// The live temporary logs: what [`unlink_live`] removes.
pub fn live() -> Vec<&'static CStr> {
    LIVE.iter()
        .map(|slot| slot.load(Ordering::SeqCst))
        .filter(|p| !p.is_null())
        // SAFETY: a non-null slot points to a NUL-terminated string leaked by
        // `TempLog::new`, never freed.
        .map(|p| unsafe { CStr::from_ptr(p) })
        .collect()
}

/// Removes the live temporary logs: for a Ctrl-C handler, so async-signal-safe (atomic
/// loads, lstat(2) and unlink(2), no allocation).
pub fn unlink_live() {
    for slot in &LIVE {
        let p = slot.load(Ordering::SeqCst);
        if p.is_null() {
            continue;
        }
        // SAFETY: a non-null slot points to a NUL-terminated string that lives as long
        // as the process (leaked by `register`).
        let path = unsafe { CStr::from_ptr(p) };
        if made_by_this_user(path) {
            // SAFETY: unlink(2) is async-signal-safe; `p` is that same string.
            unsafe { libc::unlink(p) };
        }
    }
}

/// Whether `path` is a regular file of this process's user (lstat(2): a symlink is
/// never one). Why: the name is known to anyone who saw the part file appear in a
/// shared TMPDIR, and a file someone else put at it first is theirs, which root could
/// otherwise unlink; a file of this user's is this process's (in a sticky TMPDIR no one
/// else can put one there). Async-signal-safe: one lstat(2), no allocation.
fn made_by_this_user(path: &CStr) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: lstat(2) and geteuid(2) are async-signal-safe; `path` is NUL-terminated
    // and `st` is a buffer of the size lstat writes, read only when it succeeded.
    unsafe {
        libc::lstat(path.as_ptr(), st.as_mut_ptr()) == 0 && {
            let st = st.assume_init();
            st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_uid == libc::geteuid()
        }
    }
}

/// The name a fetch into `output` writes first (`.NAME.PID-NANOS-N.part` beside it),
/// registered for [`unlink_live`] until dropped: `plugpull fetch -o FILE` interrupted
/// mid-fetch leaves nothing beside FILE, and FILE itself is replaced only when the
/// whole run is in. Dropping it removes nothing: the fetch removes its own part file on
/// failure and renames it on success.
pub struct PartFile(pub PathBuf, Registered);

impl PartFile {
    pub fn beside(output: &Path) -> PartFile {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let name = output
            .file_name()
            .map_or("fetch".into(), |n| n.to_string_lossy());
        let part =
            output.with_file_name(format!(".{name}.{}-{nanos}-{n}.part", std::process::id()));
        let slot = register(&part);
        PartFile(part, slot)
    }
}

impl Drop for PartFile {
    fn drop(&mut self) {
        if let Some((_, slot)) = self.1 {
            LIVE[slot].store(std::ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each temporary log has its own name in the temporary directory, is registered
    /// for the Ctrl-C handler under the same path, and is removed (and no longer
    /// registered) when dropped.
    #[test]
    fn a_temporary_log_is_named_anew_registered_and_removed_when_dropped() {
        let a = TempLog::new("test");
        let b = TempLog::new("test");
        assert_ne!(a.0, b.0);
        assert_eq!(a.0.parent(), Some(std::env::temp_dir().as_path()));
        let name = a.0.file_name().unwrap().to_string_lossy().into_owned();
        let mine = format!("plugpull-test-{}-", std::process::id());
        assert!(name.starts_with(&mine), "{name}");
        // What the handler would remove is the same path, byte for byte.
        let (c, _) = b.1.expect("a path without NUL");
        assert_eq!(c.to_bytes(), b.0.as_os_str().as_encoded_bytes());
        // And its part file, where a fetch writes before the log is whole, in a slot of
        // its own.
        let (part, part_slot) = b.3.expect("a path without NUL");
        assert_eq!(part.to_bytes(), b.2.as_os_str().as_encoded_bytes());
        assert_ne!(Some(part_slot), b.1.map(|(_, slot)| slot));
        assert!(b.2.to_string_lossy().ends_with(".acklog.part"));
        std::fs::write(&a.0, b"acks").unwrap();
        std::fs::write(&b.0, b"acks").unwrap();
        let (pa, pb) = (a.0.clone(), b.0.clone());
        let live_now =
            || -> Vec<Vec<u8>> { live().iter().map(|c| c.to_bytes().to_vec()).collect() };
        let (ba, bb) = (
            pa.as_os_str().as_encoded_bytes().to_vec(),
            pb.as_os_str().as_encoded_bytes().to_vec(),
        );
        assert!(live_now().contains(&ba) && live_now().contains(&bb));
        drop(b);
        assert!(!pb.exists(), "dropped, so removed");
        assert!(pa.exists(), "the other one is still in use");
        // The one made first stays registered when the one made after it goes: a
        // Ctrl-C now still removes it.
        assert!(live_now().contains(&ba), "the first is still live");
        assert!(!live_now().contains(&bb));
        drop(a);
        assert!(!pa.exists());
        // Neither is registered any more: a Ctrl-C now removes neither.
        assert!(!live_now().contains(&ba) && !live_now().contains(&bb));
    }
}
