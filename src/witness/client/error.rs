//! The client's error: why a run could not be sent to or fetched from the witness.
//!
//! Why a chain of contexts: a user needs both the cause ("connection refused") and where
//! it struck ("sending Hello to the witness at HOST:PORT"); `{}` shows this error's own
//! message, `{:#}` the whole chain, "outer: inner: cause".

use crate::wire::auth::KeyError;
use crate::wire::msg::DecodeError;
use crate::witness::store::error::StoreError;
use std::fmt::Display;
use std::io;

#[derive(Debug)]
pub enum ClientError {
    /// The witness refused, cannot be reached, or broke the protocol; the message says
    /// which and what to check.
    Witness(String),
    /// A frame from the witness does not decode.
    Decode(DecodeError),
    Io(io::Error),
    /// The witness has no run for the device key a fetch named: `addr` answered
    /// `message`, which begins with [`NO_RUN_FOR_DEVICE`](crate::wire::msg::NO_RUN_FOR_DEVICE).
    /// Verify then looks for the run elsewhere.
    NoRunForDevice {
        addr: String,
        message: String,
    },
    /// The witness is serving as many fetches as it serves at once: `addr` answered
    /// `message`, which begins with [`FETCHES_BUSY`](crate::wire::msg::FETCHES_BUSY).
    WitnessBusy {
        addr: String,
        message: String,
    },
    /// The key file cannot be used.
    Key(KeyError),
    /// The fetched run cannot be written to its file.
    Store(StoreError),
    /// Where an inner error happened (which witness, doing what).
    Context {
        context: String,
        source: Box<ClientError>,
    },
}

pub type ClientResult<T> = Result<T, ClientError>;

impl Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() {
            return f.write_str(&crate::exit::error_chain(self));
        }
        match self {
            ClientError::Witness(m) => f.write_str(m),
            ClientError::NoRunForDevice { addr, message }
            | ClientError::WitnessBusy { addr, message } => {
                write!(f, "the witness at {addr}: {message}")
            }
            ClientError::Decode(e) => write!(f, "{e}"),
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Key(e) => write!(f, "{e}"),
            ClientError::Store(e) => write!(f, "{e}"),
            ClientError::Context { context, .. } => f.write_str(context),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Wrapped errors are transparent: their own causes follow their message.
        match self {
            ClientError::Witness(_)
            | ClientError::NoRunForDevice { .. }
            | ClientError::WitnessBusy { .. } => None,
            ClientError::Decode(e) => e.source(),
            ClientError::Io(e) => e.source(),
            ClientError::Key(e) => e.source(),
            ClientError::Store(e) => e.source(),
            ClientError::Context { source, .. } => Some(&**source),
        }
    }
}

impl From<DecodeError> for ClientError {
    fn from(e: DecodeError) -> ClientError {
        ClientError::Decode(e)
    }
}
impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> ClientError {
        ClientError::Io(e)
    }
}
impl From<KeyError> for ClientError {
    fn from(e: KeyError) -> ClientError {
        ClientError::Key(e)
    }
}
impl From<StoreError> for ClientError {
    fn from(e: StoreError) -> ClientError {
        ClientError::Store(e)
    }
}

/// Adds where an error happened, keeping the error typed.
///
/// Why not one generic trait with the store's `witness::store::error::Context`: the
/// trait is what fixes the error a context is added to. A `Result<_, StoreError>` here
/// must become a `ClientError::Context` around `ClientError::Store` (the client's chain),
/// not a `StoreError::Context`; a trait generic over the target error leaves every
/// `.with_context(..)?` without a type to infer (`?` converts through `From`), so each
/// layer names its own.
pub trait Context<T> {
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> ClientResult<T>;
}

impl<T, E: Into<ClientError>> Context<T> for Result<T, E> {
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> ClientResult<T> {
        self.map_err(|e| ClientError::Context {
            context: context().to_string(),
            source: Box::new(e.into()),
        })
    }
}

/// Returns a [`ClientError::Witness`] with a formatted message.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::witness::client::error::ClientError::Witness(format!($($arg)*)))
    };
}
pub(crate) use refuse;
