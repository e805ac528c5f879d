//! Ctrl-C or SIGTERM in a command that only reads (verify, replay) or only fetches
//! (fetch): say so, remove the temporary files the process made (`verify::temp_log`),
//! and exit at once, 130 for Ctrl-C and 143 for SIGTERM as shells report them. Why at
//! once: the command changed nothing that needs undoing, and a half-judged run is no
//! verdict; why the files are removed here: exiting from a signal handler runs no
//! `Drop`; why SIGTERM too: it is what `kill`, systemd and a CI job's timeout send, and
//! its default action would leave the files behind just the same.

use crate::exit;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// The messages the handler writes, per signal (Ctrl-C, SIGTERM): each a `&'static
/// [u8]`, as a pointer and a length the handler reads with atomic loads.
static MESSAGES: [(AtomicPtr<u8>, AtomicUsize); 2] = [
    (AtomicPtr::new(std::ptr::null_mut()), AtomicUsize::new(0)),
    (AtomicPtr::new(std::ptr::null_mut()), AtomicUsize::new(0)),
];

/// From now on, Ctrl-C (SIGINT) writes `ctrl_c` to stderr and SIGTERM writes `term`;
/// either removes the live temporary files and exits ([`exit::INTERRUPTED`],
/// [`exit::TERMINATED`]).
pub fn on_ctrl_c_or_term_say(ctrl_c: &'static [u8], term: &'static [u8]) {
    for ((p, n), message) in MESSAGES.iter().zip([ctrl_c, term]) {
        n.store(message.len(), Ordering::SeqCst);
        p.store(message.as_ptr().cast_mut(), Ordering::SeqCst);
    }
    extern "C" fn on_signal(signal: libc::c_int) {
        crate::verify::temp_log::unlink_live();
        let (which, code) = match signal {
            libc::SIGTERM => (1, exit::TERMINATED),
            _ => (0, exit::INTERRUPTED),
        };
        let (p, n) = (
            MESSAGES[which].0.load(Ordering::SeqCst),
            MESSAGES[which].1.load(Ordering::SeqCst),
        );
        // SAFETY: write(2) and _exit(2) are async-signal-safe; `p` is null or points to
        // the `n` bytes of a static message stored above.
        unsafe {
            if !p.is_null() {
                libc::write(2, p.cast(), n);
            }
            libc::_exit(code);
        }
    }
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only calls async-signal-safe functions and atomic loads.
        unsafe { libc::signal(signal, on_signal as *const () as libc::sighandler_t) };
    }
}
