//! A temporary ack log: a witness's fetch streamed into a file (in the temporary
//! directory, `TMPDIR`) and judged from it, by `plugpull verify --witness` and by a
//! cycle's fetched run (`cycle::fetched`: campaigns, the agent, the demo). Removed when
//! dropped, and by Ctrl-C.
//!
//! Why one module: both make such a file, and a Ctrl-C handler exits at once, so no
//! `Drop` runs; the handler removes the live ones itself ([`unlink_live`]), whoever made
//! them. Several can be live at once (`verify --witness` fetches a later run beside the
//! one it holds), so each has a slot of its own: a second one dropped never unregisters
//! the first.

use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// A temporary log file's path (`.0`), removed when dropped; `.1` is the same path for
/// the Ctrl-C handler, and its slot in [`LIVE`].
pub struct TempLog(pub PathBuf, Option<(&'static CStr, usize)>);

/// The temporary logs made and not yet dropped, for the Ctrl-C handler: pointers, so
/// the handler reads each with one atomic load. More than this many at once (plugpull
/// makes at most three) go unregistered.
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
        // Leaked on purpose (a hundred bytes per temporary log): a signal handler may be
        // reading it at any moment, so it is never freed.
        let c = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
            .ok()
            .map(|c| &*Box::leak(c.into_boxed_c_str()));
        let registered = c.and_then(|c| {
            let p = c.as_ptr().cast_mut();
            let free = |slot: &AtomicPtr<c_char>| {
                let null = std::ptr::null_mut();
                slot.compare_exchange(null, p, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            };
            LIVE.iter().position(free).map(|i| (c, i))
        });
        TempLog(path, registered)
    }
}

impl Drop for TempLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        if let Some((_, slot)) = self.1 {
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
/// loads and unlink(2), no allocation).
pub fn unlink_live() {
    for slot in &LIVE {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: unlink(2) is async-signal-safe; `p` is a NUL-terminated string
            // that lives as long as the process (leaked by `TempLog::new`).
            unsafe { libc::unlink(p) };
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
