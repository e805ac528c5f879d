//! Which run verify judges, and whether it may judge it against this target.
//!
//! Why identity and not path: /dev names change across reboots and loop devices are
//! renumbered, so a path can name another drive than the one a run wrote to, and the
//! same drive can come back under another path. Judging a run against a drive it never
//! wrote to reports every record lost: a false FAIL, the worst answer this tool can give.
//! So a run belongs to a drive when the identities agree ([`DeviceIdentity::same_medium`]:
//! WWN/serial, a loop device's backing file, a file's inode and file system) or when the
//! drive's own sectors carry the run's stamps (a copy of a target, an image restored
//! elsewhere). Anything else is refused unless the user says `--allow-identity-mismatch`.
//!
//! The stamps only name a run when the identity key finds none: a drive that kept its
//! identity is always judged by its newest run, even when that run left no stamp (a
//! drive that lost everything must FAIL, not PASS on an older run's leftovers). The
//! stamps are read from a sample of the drive, so a later run whose records lie where the
//! sample did not look is found another way: `plugpull verify` asks the witness for the
//! runs of the same drive begun after the stamped run ended and takes the newest whose
//! stamps the drive carries where its acks say (`verify::witnessed`). The limit: a drive
//! whose identity changed *and* that lost every record of its newest run would be judged
//! by the older run its stamps name; verify says on stderr which run it took from the
//! stamps and why.

use super::medium::{self, Sample};
use crate::device::identity::DeviceIdentity;
use crate::device::{Device, FileDevice};
use crate::exit::BoxedError;
use crate::model::{RunDescriptor, RunLog, RunSelector};
use crate::record::RunId;
use crate::wire::auth::Key;
use crate::witness::client::error::ClientError;
use crate::witness::client::fetch_with_key;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// No run to verify could be chosen, or the chosen run may not be judged on this drive.
/// Both are usage errors (exit 2): the message says what to pass.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The witness could not be asked.
    #[error(transparent)]
    Fetch(BoxedError),
    /// The run named by the newest stamp on the drive could not be fetched.
    #[error("{why}, and the newest stamp on {} is of run {run}", .target.display())]
    FetchStampedRun {
        why: String,
        target: PathBuf,
        run: RunId,
        #[source]
        source: BoxedError,
    },
    /// Neither the drive's identity nor its stamps name a run.
    #[error("{why} at {addr}, and {sample}: pass --run RUN_ID (as printed by `write`)")]
    NoRunFound {
        why: String,
        addr: String,
        sample: String,
    },
    /// The run was written to another medium and the drive carries none of its stamps.
    #[error(
        "{mismatch}, and {sample}. Judging a drive by another drive's records would report them lost (a false FAIL). Verify the drive the run was written to, or name this drive's run with --run (leave it out to take this drive's latest run); if this really is the same medium under a new identity (a restored image, a re-created file), pass --allow-identity-mismatch"
    )]
    IdentityMismatch { mismatch: String, sample: String },
    /// No memory for the block buffer that samples the drive's stamps.
    #[error("cannot look for plugpull stamps on {}", .target.display())]
    SampleBuffer {
        target: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How to reach the witness.
pub struct Witness<'a> {
    pub addr: &'a str,
    pub key: Option<&'a Key>,
}

/// The latest run for the drive at `target`, held whole: the witness's newest run under
/// the drive's identity key, if it was written to this medium; else as [`by_stamps`]
/// chooses. For the callers that hold a run in memory (the tree mode, replay);
/// `plugpull verify` streams the same choice (`verify::witnessed`).
pub fn latest_for_target(
    w: &Witness,
    target: &Path,
    device: &DeviceIdentity,
    read_timeout: Duration,
) -> Result<RunLog, SelectError> {
    let by_key = match fetch_with_key(w.addr, &RunSelector::LatestForDevice(device.key()), w.key) {
        Ok(log) => Some(log),
        Err(ClientError::NoRunForDevice { .. }) => None,
        Err(e) => return Err(SelectError::Fetch(e.into())),
    };
    if let Some(log) = by_key
        .as_ref()
        .filter(|l| l.descriptor.device.same_medium(device))
    {
        return Ok(log.clone());
    }
    // A witness that sends another run than the one asked for is refused: the drive
    // would be judged against another run's promises.
    let fetch_stamped = |run| match fetch_with_key(w.addr, &RunSelector::Run(run), w.key) {
        Ok(log) if log.descriptor.run_id == run => Ok(log),
        Ok(log) => Err(BoxedError::from(format!(
            "asked the witness for run {run} and it sent run {}",
            log.descriptor.run_id
        ))),
        Err(e) => Err(BoxedError::from(e)),
    };
    let descriptor = by_key.as_ref().map(|l| &l.descriptor);
    match by_stamps(
        w.addr,
        target,
        device,
        descriptor,
        read_timeout,
        fetch_stamped,
    )? {
        Some(log) => Ok(log),
        None => Ok(by_key.expect("by_stamps names a run when the key has none")),
    }
}

/// Which run to judge `target` by when the witness's newest run under the drive's key
/// (`by_key`; None: it has none) was not written to this medium: the run of the newest
/// stamp found on the medium, fetched with `fetch` (said on stderr, with why); else
/// None, the key's run (which [`check_identity_at`] then refuses with both identities
/// named). An error that says to pass --run when nothing names a run.
pub fn by_stamps<T>(
    addr: &str,
    target: &Path,
    device: &DeviceIdentity,
    by_key: Option<&RunDescriptor>,
    read_timeout: Duration,
    fetch: impl FnOnce(RunId) -> Result<T, BoxedError>,
) -> Result<Option<T>, SelectError> {
    let key = device.key();
    let sample = sample(target, read_timeout, medium::newest_stamp)?;
    let why = match by_key {
        None => format!("the witness has no run for {key}"),
        Some(d) => format!(
            "the witness's latest run for {key} ({}) was written to {}",
            d.run_id,
            crate::model::peer_text::shown(&d.device.describe())
        ),
    };
    if let Some(stamp) = sample.and_then(|s| s.newest) {
        if by_key.is_some_and(|d| d.run_id == stamp.run) {
            return Ok(None);
        }
        let run = fetch(stamp.run).map_err(|source| SelectError::FetchStampedRun {
            why: why.clone(),
            target: target.to_owned(),
            run: stamp.run,
            source,
        })?;
        eprintln!(
            "plugpull verify: {why}; the newest stamp among the {} sectors sampled on {} is of run {} (written {}): verifying that run",
            sample.map_or(0, |s| s.sectors),
            target.display(),
            stamp.run,
            crate::units::fmt_utc_ns(stamp.record.write_time_ns),
        );
        return Ok(Some(run));
    }
    match by_key {
        Some(_) => Ok(None),
        None => Err(SelectError::NoRunFound {
            why,
            addr: addr.to_string(),
            sample: match sample {
                Some(s) => format!(
                    "none of the {} sectors sampled on {} carries a plugpull stamp",
                    s.sectors,
                    target.display()
                ),
                None => format!("{} could not be read", target.display()),
            },
        }),
    }
}

/// Refuses (exit 2, naming both identities) to judge run `d` against `target` when the
/// run was written to another medium and `target` carries none of its stamps, unless
/// `allow`; `points`: where the acks say to look for them (`medium::RunPoints`, gathered
/// as they streamed by). Says on stderr when a mismatch is let through, and why.
pub fn check_identity_at(
    d: &RunDescriptor,
    points: std::collections::BTreeSet<u64>,
    target: &Path,
    device: &DeviceIdentity,
    allow: bool,
    read_timeout: Duration,
) -> Result<(), SelectError> {
    let written = &d.device;
    if written.same_medium(device) {
        return Ok(());
    }
    let run = d.run_id;
    let sample = sample(target, read_timeout, move |d| {
        medium::find_run(d, run, &points)
    })?;
    let mismatch = format!(
        "run {run} was written to {}, but {} is {}",
        crate::model::peer_text::shown(&written.describe()),
        target.display(),
        device.describe()
    );
    match sample {
        Some(s) if s.found => {
            eprintln!(
                "plugpull verify: {mismatch}; it carries stamps of that run (a copy, or the same medium under a new name): verifying it"
            );
            Ok(())
        }
        _ if allow => {
            eprintln!(
                "plugpull verify: {mismatch}, and no stamp of that run was found there; verifying anyway (--allow-identity-mismatch)"
            );
            Ok(())
        }
        s => Err(SelectError::IdentityMismatch {
            mismatch,
            sample: match s {
                Some(s) => format!(
                    "none of the {} sectors read there from the run's region carries a stamp of that run",
                    s.sectors
                ),
                None => "it could not be read to look for the run's stamps".to_string(),
            },
        }),
    }
}

/// Whether `target` carries stamps of `run` at `points` (where its acks say to look,
/// `medium::RunPoints`); false when it cannot be read in time.
pub fn carries_stamps(
    target: &Path,
    read_timeout: Duration,
    run: RunId,
    points: std::collections::BTreeSet<u64>,
) -> Result<bool, SelectError> {
    let s = sample(target, read_timeout, move |d| {
        medium::find_run(d, run, &points)
    })?;
    Ok(s.is_some_and(|s| s.found))
}

/// Opens `target` for reading and runs `f` on it within `limit`; None if it cannot be
/// opened or does not answer in time (the drive's answer), an error if `f` could not
/// sample at all (this machine's failure, not the drive's).
fn sample(
    target: &Path,
    limit: Duration,
    f: impl FnOnce(&dyn Device) -> std::io::Result<Sample> + Send + 'static,
) -> Result<Option<Sample>, SelectError> {
    let Ok(dev) = FileDevice::open_read(target) else {
        return Ok(None);
    };
    let dev: Arc<dyn Device> = Arc::new(dev);
    medium::within(dev, limit, f)
        .transpose()
        .map_err(|source| SelectError::SampleBuffer {
            target: target.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use crate::model::RunSelector;
    use crate::record::RunId;
    use crate::witness::client::error::ClientError;
    use crate::witness::client::fetch;
    use crate::witness::server::{Witness, WitnessOptions};

    /// The witness's answer to a device key it has no run for is an error of its own
    /// (what `latest_for_target` tells from other failures), with the text users saw.
    #[test]
    fn no_run_for_device_is_its_own_error() {
        let dir = tempfile::tempdir().unwrap();
        let options = WitnessOptions {
            quiet: true,
            ..Default::default()
        };
        let w = Witness::start("127.0.0.1:0", dir.path(), options).unwrap();
        let addr = w.addr.to_string();
        let e = fetch(&addr, &RunSelector::LatestForDevice("serial:NONE".into())).unwrap_err();
        assert!(matches!(e, ClientError::NoRunForDevice { .. }), "{e:#}");
        assert_eq!(
            e.to_string(),
            format!(
                "the witness at {addr}: no run for device serial:NONE at this witness; pass --run RUN_ID"
            )
        );
        // Any other refusal stays a refusal.
        let e = fetch(&addr, &RunSelector::Run(RunId::random())).unwrap_err();
        assert!(matches!(e, ClientError::Witness(_)), "{e:#}");
        w.shutdown();
    }
}
