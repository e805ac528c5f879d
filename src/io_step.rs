//! An I/O error with the step it struck in ("opening /dev/sdb for writing", "creating the
//! witness directory /var/lib/plugpull"). Why one type for every layer that reports I/O
//! this way (the device layer, the witness): the user needs the step and the operating
//! system's reason beneath it, and each layer's error only wraps this one
//! (`#[error(transparent)]`), so "step: reason" prints the same everywhere and the
//! helper that names the step is written once.

use std::io;

/// An I/O call failed while plugpull was `doing` something; the reason stays the
/// `source`, so an error chain prints "doing: reason".
#[derive(Debug, thiserror::Error)]
#[error("{doing}")]
pub struct IoStep {
    pub doing: String,
    #[source]
    pub source: io::Error,
}

/// Names the step an I/O call belongs to. The result's error is an [`IoStep`] whatever
/// the caller returns: `?` turns it into the caller's own error (each wraps `IoStep`
/// with `#[from]`), so one trait serves every layer and the error stays typed.
pub trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, IoStep>;
}

impl<T> Doing<T> for io::Result<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, IoStep> {
        self.map_err(|source| IoStep {
            doing: what(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The step is the message and the OS's reason its cause, as every caller prints it.
    #[test]
    fn the_step_is_the_message_and_the_reason_its_cause() {
        let e = Err::<(), _>(io::Error::from_raw_os_error(libc::ENOENT))
            .doing(|| "opening /dev/sdz".into())
            .unwrap_err();
        assert_eq!(e.to_string(), "opening /dev/sdz");
        assert_eq!(
            crate::exit::error_chain(&e),
            format!(
                "opening /dev/sdz: {}",
                io::Error::from_raw_os_error(libc::ENOENT)
            )
        );
    }
}
