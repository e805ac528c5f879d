//! A running witness: start (lock the directory, replay, recover, bind, start the gate),
//! shutdown, and waiting for it (what `plugpull listen` does).

use crate::witness::server::accept::gate_loop;
use crate::witness::server::dirlock::lock_dir;
use crate::witness::server::error::{Doing, WitnessError};
use crate::witness::server::recovery::{note_replayed, recover_dir};
use crate::witness::server::shared::{Shared, WitnessOptions, lock};
use crate::witness::store::journal::Journal;
use crate::witness::store::journal_replay;
use crate::witness::store::storage::FsStorage;
use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running witness. Dropping it without [`Witness::shutdown`] leaves its threads
/// serving until the process exits.
pub struct Witness {
    pub addr: SocketAddr,
    pub(super) shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Witness {
    /// Recovers every log in `dir` (truncating torn tails), indexes runs by device, binds
    /// `bind` and starts serving. Returns once the socket is listening.
    pub fn start(bind: &str, dir: &Path, opts: WitnessOptions) -> Result<Witness, WitnessError> {
        std::fs::create_dir_all(dir)
            .doing(|| format!("creating the witness directory {}", dir.display()))?;
        let dir_lock = lock_dir(dir)?;
        // Replay first: a log must hold everything its journal confirmed before recovery
        // decides where its torn tail starts.
        let replayed = journal_replay::replay(&FsStorage, dir)?;
        let journal = Arc::new(Journal::open(
            FsStorage::shared(),
            dir,
            opts.journal.clone(),
        )?);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            _dir_lock: dir_lock,
            journal,
            opts,
            stop: AtomicBool::new(false),
            next_conn: AtomicU64::new(1),
            runs: Mutex::new(HashMap::new()),
            listed: Mutex::new(HashMap::new()),
            by_device: Mutex::new(HashMap::new()),
            devices: Mutex::new(HashMap::new()),
            conns: Mutex::new(HashMap::new()),
            writers: AtomicUsize::new(0),
            fetchers: AtomicUsize::new(0),
            threads: Mutex::new(Vec::new()),
        });
        note_replayed(&shared, &replayed);
        recover_dir(&shared)?;
        let listener = TcpListener::bind(bind).doing(|| {
            format!("cannot listen on {bind}: is another witness already running there?")
        })?;
        let addr = listener.local_addr()?;
        if shared.opts.key.is_none() && !addr.ip().is_loopback() {
            shared.event(
                "warning",
                &[(
                    "detail",
                    &format_args!(
                        "listening on {addr} without --key-file: anyone who can reach this \
                         port can forge or replay acks and make a good drive look bad; \
                         give the witness and its writers the same --key-file"
                    ),
                )],
            );
        }
        let sh = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("witness-gate".into())
            .spawn(move || gate_loop(sh, listener))?;
        Ok(Witness {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// Stops accepting, closes every connection and waits for their threads. Every ack
    /// already reported durable stays in the logs.
    pub fn shutdown(mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for s in lock(&self.shared.conns).values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for t in threads {
            let _ = t.join();
        }
    }

    /// Blocks until the acceptor ends (it does not, except on a listener error).
    pub(super) fn wait(mut self) {
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}
