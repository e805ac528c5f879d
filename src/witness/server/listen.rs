//! `plugpull listen`: the witness in the foreground, with its typed options.
//!
//! Why apart from `Witness`: the library witness (tests, demo, campaign) takes
//! `WitnessOptions` and a bind address; the command adds what only a long-running
//! foreground process needs: a key file to load, the frame-size bounds a user may set,
//! the open-files limit and a banner.

use crate::wire::auth;
use crate::wire::frame;
use crate::wire::msg::PROTOCOL_VERSION;
use crate::witness::server::accept::{FETCH_CONNECTIONS, MAX_PENDING_HANDSHAKES};
use crate::witness::server::error::WitnessError;
use crate::witness::server::shared::WitnessOptions;
use crate::witness::server::witness::Witness;
use crate::witness::store::journal::JournalOptions;
use std::path::PathBuf;
use std::time::Duration;

/// Smallest `--max-frame-bytes`: room for a full 4096-ack batch and a run descriptor.
pub const MIN_MAX_FRAME_BYTES: usize = 256 << 10;

/// What `plugpull listen` runs with (`commands::listen` fills it from the command line).
#[derive(Clone, Debug)]
pub struct ListenOptions {
    /// Address to listen on.
    pub bind: String,
    /// The witness directory: ack logs, journal, lock file.
    pub dir: PathBuf,
    pub max_connections: usize,
    pub idle_timeout: Duration,
    pub handshake_timeout: Duration,
    /// Largest frame accepted from a peer; between [`MIN_MAX_FRAME_BYTES`] and
    /// `frame::MAX_FRAME_BYTES`.
    pub max_frame_bytes: usize,
    /// Pre-shared key file; every frame must then carry a MAC made with it.
    pub key_file: Option<PathBuf>,
}

/// `plugpull listen`: runs the witness in the foreground, one log line per event.
pub fn listen(a: ListenOptions) -> Result<(), WitnessError> {
    let key = auth::load_key(a.key_file.as_deref())?;
    let keyed = key.is_some();
    if a.max_frame_bytes < MIN_MAX_FRAME_BYTES || a.max_frame_bytes > frame::MAX_FRAME_BYTES {
        return Err(WitnessError::FrameLimit {
            min: MIN_MAX_FRAME_BYTES,
            max: frame::MAX_FRAME_BYTES,
        });
    }
    let fds = raise_fd_limit();
    let w = Witness::start(
        &a.bind,
        &a.dir,
        WitnessOptions {
            max_connections: a.max_connections,
            idle_timeout: a.idle_timeout,
            handshake_timeout: a.handshake_timeout,
            max_frame_bytes: a.max_frame_bytes,
            key,
            quiet: false,
            journal: JournalOptions::default(),
        },
    )?;
    w.shared.log(format_args!(
        "listening on {} (protocol {PROTOCOL_VERSION}), logs in {}, {}",
        w.addr,
        a.dir.display(),
        if keyed {
            "every frame authenticated with --key-file"
        } else {
            "no authentication"
        }
    ));
    // Each pending handshake, writer, fetch and open run log holds a descriptor.
    let need = (MAX_PENDING_HANDSHAKES + 2 * a.max_connections + FETCH_CONNECTIONS + 64) as u64;
    if fds < need {
        w.shared.event(
            "warning",
            &[(
                "detail",
                &format_args!(
                    "the open-files limit is {fds}, below the {need} that \
                     --max-connections {} needs: raise it (ulimit -n) or lower \
                     --max-connections",
                    a.max_connections
                ),
            )],
        );
    }
    w.wait();
    Ok(())
}

/// Raises this process's soft open-files limit to its hard limit and returns the limit
/// in force. The usual soft limit, 1024, is below what the connection caps allow.
fn raise_fd_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct we pass, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    r.rlim_cur
}
