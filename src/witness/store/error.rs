//! The store's error: what went wrong, with the file and frame it went wrong in.
//!
//! Why one type for the store: every failure in it is either I/O on a named file or a
//! file whose content breaks a rule (the message says which), and the witness, fetch and
//! verify only ever report it. What they need is the whole chain of "where" around the
//! cause, which [`StoreError::Context`] keeps (and `std::error::Error::source` walks,
//! so `{:#}` through anyhow prints "reading ack log X: frame at byte N: why").

use crate::wire::msg::DecodeError;
use std::fmt::Display;
use std::io;

/// Shown with `{}`: this error's own message. With `{:#}`: the whole chain, as anyhow
/// shows one, so a caller that formats the error itself loses no cause.
#[derive(Debug)]
pub enum StoreError {
    /// A file's content breaks a rule of its format; the message says which and what to do.
    Invalid(String),
    /// A frame's payload is not the message its type says.
    Decode(DecodeError),
    Io(io::Error),
    /// Where an inner error happened (which file, which frame, doing what).
    Context {
        context: String,
        source: Box<StoreError>,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            return f.write_str(&self.detail());
        }
        match self {
            StoreError::Invalid(m) => f.write_str(m),
            StoreError::Decode(e) => write!(f, "{e}"),
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Context { context, .. } => f.write_str(context),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Invalid(_) => None,
            // Transparent: the wrapped error's own causes follow its message.
            StoreError::Decode(e) => e.source(),
            StoreError::Io(e) => e.source(),
            StoreError::Context { source, .. } => Some(&**source),
        }
    }
}

impl From<DecodeError> for StoreError {
    fn from(e: DecodeError) -> StoreError {
        StoreError::Decode(e)
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> StoreError {
        StoreError::Io(e)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

impl StoreError {
    /// The error with every cause after it, "outer: inner: cause" (a log line, an Error
    /// frame, a poisoned log's reason).
    pub fn detail(&self) -> String {
        crate::exit::error_chain(self)
    }
}

/// Adds where an error happened, as `anyhow::Context` does, keeping the error typed.
///
/// Why not one generic trait with the client's `witness::client::error::Context`: the
/// trait is what fixes the error a context is added to. The same `Result<_, StoreError>`
/// takes a store context (a `StoreError::Context`) inside the store and a client context
/// (a `ClientError::Context` around `ClientError::Store`) in the client; a trait generic
/// over the target error leaves every `.with_context(..)?` without a type to infer
/// (`?` converts through `From`), so each layer names its own, and the four lines
/// that build the variant are its own too.
pub trait Context<T> {
    fn context(self, context: impl Display) -> StoreResult<T>;
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> StoreResult<T>;
}

impl<T, E: Into<StoreError>> Context<T> for Result<T, E> {
    fn context(self, context: impl Display) -> StoreResult<T> {
        self.map_err(|e| StoreError::Context {
            context: context.to_string(),
            source: Box::new(e.into()),
        })
    }
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> StoreResult<T> {
        self.map_err(|e| StoreError::Context {
            context: context().to_string(),
            source: Box::new(e.into()),
        })
    }
}

/// Returns a [`StoreError::Invalid`] with a formatted message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        return Err($crate::witness::store::error::StoreError::Invalid(format!($($arg)*)))
    };
}
pub(crate) use invalid;
