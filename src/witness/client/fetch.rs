//! Fetching a run from the witness (what `verify` does without `--acks`), and the
//! `fetch` command's action: the run into a self-checking log file (what it wrote is
//! said by `commands::render::fetch`).
//!
//! Why the fetch stream is checked here too: a witness (or anyone on the path without a
//! key) could send acks out of order or skip some; a skip is accepted only when the
//! witness names damage in its log, so verify can never judge a silently partial run.

use crate::model::{Ack, FileName, RunDescriptor, RunLog, RunSelector, WitnessEvent};
use crate::record::RunId;
use crate::wire::auth::{self, Key};
use crate::wire::msg::{FETCHES_BUSY, Msg, NO_RUN_FOR_DEVICE};
use crate::witness::client::connect::{FrameReader, authenticate, connect_stream, encode_sealed};
use crate::witness::client::error::{ClientError, ClientResult, Context, refuse};
use crate::witness::store::{checker, export};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

const FETCH_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// What `plugpull fetch` runs with (`commands::fetch` fills it from the command line).
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// The witness, HOST:PORT.
    pub witness: String,
    /// The run id (32 hex digits) as given...
    pub run: Option<String>,
    /// ...or a target whose device's latest run is wanted.
    pub target: Option<PathBuf>,
    /// The file to write the run's log to.
    pub output: PathBuf,
    /// Where the fetch writes before the whole run is in (then renamed to `output`): a
    /// name the caller's signal handler removes; None: a random name beside `output`.
    pub part: Option<PathBuf>,
    /// The witness's pre-shared key file.
    pub key_file: Option<PathBuf>,
    /// Print what was fetched as JSON on stdout.
    pub json: bool,
}

/// Fetches a whole run from an unauthenticated witness; see [`fetch_with_key`].
pub fn fetch(addr: &str, sel: &RunSelector) -> ClientResult<RunLog> {
    fetch_with_key(addr, sel, None)
}

/// Fetches a whole run from the witness: descriptor, every durable ack in order, events.
/// With a key, every frame of the reply is authenticated.
pub fn fetch_with_key(addr: &str, sel: &RunSelector, key: Option<&Key>) -> ClientResult<RunLog> {
    let mut acks = Vec::new();
    let mut files = BTreeMap::new();
    let (descriptor, events) = fetch_streamed(addr, sel, key, &mut |_, a, names| {
        files.extend((acks.len()..).zip(names.iter().cloned()));
        acks.extend_from_slice(a);
        Ok(())
    })?;
    Ok(RunLog {
        descriptor,
        acks,
        events,
        files,
    })
}

/// What [`fetch_streamed`] hands on, ack frame by ack frame: the run's descriptor (it
/// comes first), the acks, and their file names when the frame was a FileAcks frame
/// (one per ack; empty for plain acks).
pub type AckSink<'a> = dyn FnMut(&RunDescriptor, &[Ack], &[FileName]) -> ClientResult<()> + 'a;

/// [`fetch_with_key`] without holding the acks: each frame's acks go to `sink` as they
/// arrive, in order, and only the descriptor and the events are returned (after the
/// same checks: counted, no unexplained gap). Why: a run of 100 M acks is 4 GB as
/// `Ack`s; `fetch -o` and `verify --witness` stream it into a file instead
/// ([`fetch_into_file`]).
pub fn fetch_streamed(
    addr: &str,
    sel: &RunSelector,
    key: Option<&Key>,
    sink: &mut AckSink,
) -> ClientResult<(RunDescriptor, Vec<WitnessEvent>)> {
    let mut s = connect_stream(addr)?;
    s.set_read_timeout(Some(FETCH_READ_TIMEOUT))?;
    let mut r = FrameReader::default();
    let mut session = authenticate(&mut s, &mut r, addr, key)?;
    s.write_all(&encode_sealed(&Msg::Fetch(sel.clone()), session.as_mut()))
        .with_context(|| format!("sending Fetch to the witness at {addr}"))?;
    let mut opener = session.map(|x| x.opener);
    let mut descriptor = None;
    let mut received = 0u64;
    let mut events: Vec<WitnessEvent> = Vec::new();
    // Number the next Acks frame should start at, and acks skipped over: a damaged
    // witness log has gaps, which it must name in a damage event.
    let (mut next_ack, mut skipped) = (0u64, 0u64);
    loop {
        let m = r
            .next(&mut s, opener.as_mut())
            .with_context(|| format!("fetching from the witness at {addr}"))?;
        match m {
            Some(Msg::FetchRun(d)) if descriptor.is_none() => descriptor = Some(d),
            Some(Msg::Acks { first, acks: a }) if descriptor.is_some() => {
                in_order(&mut next_ack, &mut skipped, first, a.len())?;
                received += a.len() as u64;
                sink(descriptor.as_ref().expect("checked"), &a, &[])?;
            }
            Some(Msg::FileAcks {
                first,
                acks: a,
                names,
            }) if descriptor.is_some() => {
                if names.len() != a.len() {
                    refuse!(
                        "a FileAcks frame with {} acks and {} names",
                        a.len(),
                        names.len()
                    );
                }
                in_order(&mut next_ack, &mut skipped, first, a.len())?;
                received += a.len() as u64;
                sink(descriptor.as_ref().expect("checked"), &a, &names)?;
            }
            Some(Msg::Event(e)) if descriptor.is_some() => events.push(e),
            Some(Msg::FetchEnd { acks: n }) if descriptor.is_some() => {
                if n != received {
                    refuse!("the witness announced {n} acks but sent {received}");
                }
                if skipped > 0 && !events.iter().any(|e| e.kind == checker::DAMAGE_EVENT) {
                    refuse!(
                        "the witness skipped {skipped} acks without naming damage in its \
                         log: broken fetch stream"
                    );
                }
                break;
            }
            Some(Msg::Error { message })
                if matches!(sel, RunSelector::LatestForDevice(_))
                    && message.starts_with(NO_RUN_FOR_DEVICE) =>
            {
                return Err(ClientError::NoRunForDevice {
                    addr: addr.to_string(),
                    message: crate::model::peer_text::shown(&message).into_owned(),
                });
            }
            Some(Msg::Error { message }) if message.starts_with(FETCHES_BUSY) => {
                return Err(ClientError::WitnessBusy {
                    addr: addr.to_string(),
                    message: crate::model::peer_text::shown(&message).into_owned(),
                });
            }
            Some(Msg::Error { message }) => refuse!(
                "the witness at {addr}: {}",
                crate::model::peer_text::shown(&message)
            ),
            Some(m) => refuse!("unexpected {:?} frame in the fetch reply", m.frame_type()),
            None => refuse!("the witness at {addr} closed the connection before the fetch ended"),
        }
    }
    Ok((descriptor.expect("checked above"), events))
}

/// A run fetched into a log file by [`fetch_into_file`].
pub struct FetchedFile {
    pub descriptor: RunDescriptor,
    pub acks: u64,
    pub events: Vec<WitnessEvent>,
}

/// Fetches a run straight into a log file at `path` (end mark signed with `key` if
/// given), holding no more than a frame of acks: `fetch -o` and `verify --witness` on
/// runs of any length. Nothing is left at `path` if the fetch fails, and a file already
/// there is replaced only when the whole run is in (written beside it, then renamed).
pub fn fetch_into_file(
    addr: &str,
    sel: &RunSelector,
    key: Option<&Key>,
    path: &std::path::Path,
) -> ClientResult<FetchedFile> {
    fetch_into_file_via(addr, sel, key, path, None)
}

/// [`fetch_into_file`] written first to `part` if given, a name the caller removes
/// itself if it is interrupted (`verify::temp_log`), else to a random name beside `path`.
pub fn fetch_into_file_via(
    addr: &str,
    sel: &RunSelector,
    key: Option<&Key>,
    path: &std::path::Path,
    part: Option<&std::path::Path>,
) -> ClientResult<FetchedFile> {
    let create = |d: &_| export::LogFileWriter::create_via(path, part, d);
    let mut file: Option<export::LogFileWriter> = None;
    let (descriptor, events) = fetch_streamed(addr, sel, key, &mut |d, a, names| {
        let w = match &mut file {
            Some(w) => w,
            None => file.insert(create(d)?),
        };
        Ok(w.push_named(a, names)?)
    })?;
    let w = match file {
        Some(w) => w,
        None => create(&descriptor)?,
    };
    let acks = w.acks();
    w.finish(&events, key)?;
    Ok(FetchedFile {
        descriptor,
        acks,
        events,
    })
}

/// Checks that a fetched batch of `n` acks numbered from `first` comes in order; a gap
/// (acks a damaged witness log lost) is counted in `skipped`.
fn in_order(next_ack: &mut u64, skipped: &mut u64, first: u64, n: usize) -> ClientResult<()> {
    if first < *next_ack {
        refuse!("the witness sent acks from {first} after ack {next_ack}: broken fetch stream");
    }
    *skipped += first - *next_ack;
    *next_ack = first + n as u64;
    Ok(())
}

/// `plugpull fetch`: copies a run's ack log from the witness into a file.
pub fn fetch_to_file(a: FetchOptions) -> ClientResult<FetchedRun> {
    let sel = match (&a.run, &a.target) {
        (Some(r), _) => RunSelector::Run(RunId::parse(r).ok_or_else(|| {
            ClientError::Witness(format!(
                "--run '{r}' is not a run id: expected 32 hex digits as printed by `write`"
            ))
        })?),
        (None, Some(t)) => RunSelector::LatestForDevice(crate::device::identity::identify(t).key()),
        (None, None) => refuse!("name the run with --run RUN_ID or the device with --target PATH"),
    };
    let key = auth::load_key(a.key_file.as_deref())?;
    // Streamed into the file as the frames arrive, so memory does not grow with the run;
    // the same bytes as the whole run through `export::write_log_file_keyed` (tests/
    // fetch_streamed.rs). The end mark lets `verify --acks` prove the file whole; signed
    // with the key if any.
    let got = fetch_into_file_via(&a.witness, &sel, key.as_ref(), &a.output, a.part.as_deref())?;
    let damage = checker::damage_in(&got.events);
    Ok(FetchedRun {
        got,
        damage,
        output: a.output,
    })
}

/// What `plugpull fetch` wrote, for the command to say.
pub struct FetchedRun {
    pub got: FetchedFile,
    /// Damage the witness named in its log.
    pub damage: Vec<String>,
    pub output: PathBuf,
}
