//! The protocol version and the error of a Hello from another one, apart from `msg`
//! (which re-exports both) so that file stays under the size every file of src/ keeps.

/// Wire protocol version sent in Hello and Welcome. Bump on any incompatible change.
pub const PROTOCOL_VERSION: u16 = 1;

/// A Hello from a different protocol version; carried as an error so the server can
/// answer with the version it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionMismatch(pub u16);

impl std::fmt::Display for VersionMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "protocol version {} is not supported; this witness speaks version {}: \
             run the same plugpull version on the writer and the witness",
            self.0, PROTOCOL_VERSION
        )
    }
}
impl std::error::Error for VersionMismatch {}
