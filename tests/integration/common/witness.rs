//! The one way tests get a witness. Most tests want the real `plugpull listen` as a child
//! process ([`WitnessProc`]): it is what users run, it can be SIGKILLed like a crashed
//! host and restarted on the same address and directory. It binds port 0 and the harness
//! reads the address it got back from its "listening on" line, so parallel tests never
//! race for a port that a probe found free a moment earlier. Its stderr goes to a file per
//! start ([`WitnessProc::log`]) so a test can assert on what the witness said.
//! [`InProcessWitness`] is the library witness for tests that only need the protocol.

use super::bin;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a witness may take to say it is listening (a loaded CI machine is slow).
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// What the witness prints once it accepts connections: `... witness: listening on ADDR
/// (protocol N), ...`. The warning about a public bind also says "listening on", but
/// inside `event=warning detail="..."`, never right after "witness: ".
const LISTENING: &str = " witness: listening on ";

/// How to start a `plugpull listen` child: `Listen::new(dir).key_file(k).start()`.
pub struct Listen {
    /// None: a directory of the harness's own, removed with the witness.
    dir: Option<PathBuf>,
    bind: String,
    /// A secret to write to a key file of the harness's own and pass as `--key-file`.
    secret: Option<Vec<u8>>,
    args: Vec<OsString>,
}

impl Listen {
    /// A witness keeping its logs in `dir`, on a free loopback port, without a key.
    pub fn new(dir: &Path) -> Listen {
        Listen {
            dir: Some(dir.to_owned()),
            ..Listen::temporary()
        }
    }

    /// A witness whose directory is the harness's own, removed when it is dropped: for
    /// tests that only look at the directory through the witness (or `WitnessProc::dir`).
    pub fn temporary() -> Listen {
        Listen {
            dir: None,
            bind: "127.0.0.1:0".into(),
            secret: None,
            args: vec![],
        }
    }

    /// Binds `addr` instead of a free loopback port (a restart on a known address, or a
    /// public bind).
    pub fn bind(mut self, addr: &str) -> Listen {
        self.bind = addr.into();
        self
    }

    /// `--key-file` with a file holding `secret` (see [`WitnessProc::key_file`]).
    pub fn key(mut self, secret: &[u8]) -> Listen {
        self.secret = Some(secret.to_vec());
        self
    }

    /// `--key-file PATH`, a key file the test wrote itself.
    pub fn key_file(mut self, path: &Path) -> Listen {
        self.args.push("--key-file".into());
        self.args.push(path.into());
        self
    }

    /// More `listen` flags (`--handshake-timeout 3s`, ...).
    pub fn args<I, S>(mut self, extra: I) -> Listen
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(extra.into_iter().map(Into::into));
        self
    }

    /// Starts the witness and waits until it listens; panics with its log if it exits or
    /// does not listen within [`START_TIMEOUT`].
    pub fn start(self) -> WitnessProc {
        let files = tempfile::Builder::new()
            .prefix("plugpull-witness")
            .tempdir()
            .unwrap();
        let mut args = self.args;
        if let Some(secret) = &self.secret {
            let path = files.path().join("witness.key");
            std::fs::write(&path, secret).unwrap();
            args.extend(["--key-file".into(), path.into()]);
        }
        let mut w = WitnessProc {
            child: None,
            addr: self.bind.clone(),
            dir: self.dir.unwrap_or_else(|| files.path().join("w")),
            args,
            files,
            starts: 0,
        };
        w.spawn(&self.bind);
        w
    }
}

/// A `plugpull listen` child process, SIGKILLed on drop.
pub struct WitnessProc {
    child: Option<Child>,
    /// The address it listens on (as read back from the witness).
    pub addr: String,
    /// Its `--dir`.
    pub dir: PathBuf,
    args: Vec<OsString>,
    /// Holds one stderr file per start, so each process's log is its own (and the
    /// witness directory of a [`Listen::temporary`] witness).
    files: tempfile::TempDir,
    starts: u32,
}

impl WitnessProc {
    /// A witness on `dir` with default flags: `Listen::new(dir).start()`.
    pub fn start(dir: &Path) -> WitnessProc {
        Listen::new(dir).start()
    }

    /// Starts a process on `bind` and waits for its "listening on" line.
    fn spawn(&mut self, bind: &str) {
        self.starts += 1;
        let log = self.log_path();
        let child = Command::new(bin())
            .args(["listen", "--bind", bind, "--dir"])
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start plugpull listen");
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            if let Some(addr) = listening_addr(&self.log()) {
                self.addr = addr;
                return;
            }
            if !self.alive() {
                panic!(
                    "the witness exited before listening on {bind}:\n{}",
                    self.log()
                );
            }
            assert!(
                t0.elapsed() < START_TIMEOUT,
                "the witness did not listen on {bind} within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.files
            .path()
            .join(format!("witness-{}.log", self.starts))
    }

    /// The key file given by [`Listen::key`].
    pub fn key_file(&self) -> PathBuf {
        self.files.path().join("witness.key")
    }

    /// What the current (or last) process wrote to stderr.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// SIGKILL: no chance to flush or clean up, like a crash. Idempotent.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the process and starts a new one on the same address, directory and flags:
    /// a witness host back from a crash.
    pub fn restart(&mut self) {
        self.kill();
        let addr = self.addr.clone();
        self.spawn(&addr);
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().unwrap().is_none())
    }

    /// The process id (for /proc/PID/...).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the witness is running").id()
    }
}

impl Drop for WitnessProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The address in the witness's "listening on ADDR (protocol N)" line, once that line
/// is complete (stderr is unbuffered: a line may be read half written).
fn listening_addr(log: &str) -> Option<String> {
    let complete = &log[..log.rfind('\n')?];
    complete.lines().find_map(|line| {
        let rest = &line[line.find(LISTENING)? + LISTENING.len()..];
        let (addr, _) = rest.split_once(" (protocol")?;
        Some(addr.to_string())
    })
}

/// The library witness in this process, on a free loopback port, quiet; shut down on
/// drop.
pub struct InProcessWitness {
    witness: Option<plugpull::witness::server::Witness>,
    pub addr: String,
}

impl InProcessWitness {
    pub fn start(dir: &Path) -> InProcessWitness {
        use plugpull::witness::server::{Witness, WitnessOptions};
        let w = Witness::start(
            "127.0.0.1:0",
            dir,
            WitnessOptions {
                quiet: true,
                ..Default::default()
            },
        )
        .unwrap();
        InProcessWitness {
            addr: w.addr.to_string(),
            witness: Some(w),
        }
    }
}

impl Drop for InProcessWitness {
    fn drop(&mut self) {
        if let Some(w) = self.witness.take() {
            w.shutdown();
        }
    }
}
