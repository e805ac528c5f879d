//! A temporary ack log: a witness's fetch streamed into a file (in the temporary
//! directory, `TMPDIR`) and judged from it, by `plugpull verify --witness` and by a
//! cycle's fetched run (`cycle::fetched`: campaigns, the agent, the demo). Removed when
//! dropped, and by Ctrl-C.
//!
//! Why one module: both make such a file, and a Ctrl-C handler exits at once, so no
//! `Drop` runs; the handler removes the live one itself ([`unlink_current`]), whoever
//! made it.

use std::ffi::{CStr, CString, c_char};
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// A temporary log file's path (`.0`), removed when dropped; `.1` is the same path for
/// the Ctrl-C handler.
pub struct TempLog(pub PathBuf, Option<&'static CStr>);

/// The temporary log made last and not yet dropped, for the Ctrl-C handler: a pointer,
/// so the handler reads it with one atomic load.
static CURRENT: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Temporary logs made by this process: two made within the clock's resolution still
/// get two names.
static MADE: AtomicU64 = AtomicU64::new(0);

impl TempLog {
    /// A new path `plugpull-KIND-PID-NANOS-N.acklog` in the temporary directory (the
    /// file is not created), registered for [`unlink_current`].
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
        if let Some(c) = c {
            CURRENT.store(c.as_ptr().cast_mut(), Ordering::SeqCst);
        }
        TempLog(path, c)
    }
}

impl Drop for TempLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        // No longer the live one (unless a later one took its place already).
        if let Some(c) = self.1 {
            let _ = CURRENT.compare_exchange(
                c.as_ptr().cast_mut(),
                std::ptr::null_mut(),
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }
}

/// The live temporary log, if any: what [`unlink_current`] removes.
pub fn current() -> Option<&'static CStr> {
    let p = CURRENT.load(Ordering::SeqCst);
    // SAFETY: a non-null `CURRENT` points to a NUL-terminated string leaked by
    // `TempLog::new`, never freed.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
}

/// Removes the live temporary log: for a Ctrl-C handler, so async-signal-safe (one
/// atomic load and unlink(2)).
pub fn unlink_current() {
    let p = CURRENT.load(Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: unlink(2) is async-signal-safe; `p` is a NUL-terminated string that
        // lives as long as the process (leaked by `TempLog::new`).
        unsafe { libc::unlink(p) };
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
        let c = b.1.expect("a path without NUL");
        assert_eq!(c.to_bytes(), b.0.as_os_str().as_encoded_bytes());
        std::fs::write(&a.0, b"acks").unwrap();
        std::fs::write(&b.0, b"acks").unwrap();
        let (pa, pb) = (a.0.clone(), b.0.clone());
        drop(a);
        assert!(!pa.exists(), "dropped, so removed");
        assert!(pb.exists(), "the other one is still in use");
        drop(b);
        assert!(!pb.exists());
        // Neither is registered any more: a Ctrl-C now removes neither.
        let now = current().map(|c| c.to_bytes().to_vec());
        assert_ne!(now.as_deref(), Some(pa.as_os_str().as_encoded_bytes()));
        assert_ne!(now.as_deref(), Some(pb.as_os_str().as_encoded_bytes()));
    }
}
