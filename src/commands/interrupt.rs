//! Ctrl-C in a command that only reads (verify, replay): say so, remove the temporary
//! files the process made (`verify::temp_log`), and exit 130 at once. Why at once: the
//! command changed nothing that needs undoing, and a half-judged run is no verdict; why
//! the files are removed here: exiting from a signal handler runs no `Drop`.

use crate::exit;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The message the handler writes: a `&'static [u8]`, as a pointer and a length the
/// handler reads with atomic loads.
static MESSAGE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static MESSAGE_LEN: AtomicUsize = AtomicUsize::new(0);

/// From now on, Ctrl-C (SIGINT) writes `message` to stderr, removes the live temporary
/// logs and exits with [`exit::INTERRUPTED`].
pub fn on_ctrl_c_say(message: &'static [u8]) {
    MESSAGE_LEN.store(message.len(), Ordering::SeqCst);
    MESSAGE.store(message.as_ptr().cast_mut(), Ordering::SeqCst);
    extern "C" fn on_sigint(_: libc::c_int) {
        crate::verify::temp_log::unlink_live();
        let (p, n) = (
            MESSAGE.load(Ordering::SeqCst),
            MESSAGE_LEN.load(Ordering::SeqCst),
        );
        // SAFETY: write(2) and _exit(2) are async-signal-safe; `p` is null or points to
        // the `n` bytes of a static message stored above.
        unsafe {
            if !p.is_null() {
                libc::write(2, p.cast(), n);
            }
            libc::_exit(exit::INTERRUPTED);
        }
    }
    // SAFETY: the handler only calls async-signal-safe functions and atomic loads.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
}
