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
//! limit: a drive whose identity changed *and* that lost every record of its newest run
//! would be judged by the older run its stamps name; verify says on stderr which run it
//! took from the stamps and why.

use super::medium::{self, Sample};
use crate::device::identity::DeviceIdentity;
use crate::device::{Device, FileDevice};
use crate::exit::{ERROR, ExitCode};
use crate::model::{RunLog, RunSelector};
use crate::wire::auth::Key;
use crate::witness::client::fetch_with_key;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How to reach the witness.
pub struct Witness<'a> {
    pub addr: &'a str,
    pub key: Option<&'a Key>,
}

/// The latest run for the drive at `target`: the witness's newest run under the
/// drive's identity key, if it was written to this medium; else the run of the newest
/// stamp found on the medium; else the key's run (which [`check_identity`] then refuses
/// with both identities named). An error that says to pass --run when nothing names one.
pub fn latest_for_target(
    w: &Witness,
    target: &Path,
    device: &DeviceIdentity,
    read_timeout: Duration,
) -> Result<RunLog> {
    let key = device.key();
    let by_key = match fetch_with_key(w.addr, &RunSelector::LatestForDevice(key.clone()), w.key)
        .map_err(anyhow::Error::from)
    {
        Ok(log) => Some(log),
        Err(e) if is_no_run_for_device(&e) => None,
        Err(e) => return Err(e),
    };
    if let Some(log) = &by_key {
        if log.descriptor.device.same_medium(device) {
            return Ok(log.clone());
        }
    }
    let sample = sample(target, read_timeout, medium::newest_stamp);
    let why = match &by_key {
        None => format!("the witness has no run for {key}"),
        Some(l) => format!(
            "the witness's latest run for {key} ({}) was written to {}",
            l.descriptor.run_id,
            l.descriptor.device.describe()
        ),
    };
    if let Some(stamp) = sample.and_then(|s| s.newest) {
        let log = match by_key {
            Some(l) if l.descriptor.run_id == stamp.run => l,
            _ => {
                fetch_with_key(w.addr, &RunSelector::Run(stamp.run), w.key).with_context(|| {
                    format!(
                        "{why}, and the newest stamp on {} is of run {}",
                        target.display(),
                        stamp.run
                    )
                })?
            }
        };
        eprintln!(
            "plugpull verify: {why}; the newest stamp among the {} sectors sampled on {} is of run {} (written {}): verifying that run",
            sample.map_or(0, |s| s.sectors),
            target.display(),
            stamp.run,
            fmt_ns(stamp.record.write_time_ns),
        );
        return Ok(log);
    }
    match by_key {
        Some(log) => Ok(log),
        None => Err(ExitCode(
            ERROR,
            format!(
                "{why} at {}, and {}: pass --run RUN_ID (as printed by `write`)",
                w.addr,
                match sample {
                    Some(s) => format!(
                        "none of the {} sectors sampled on {} carries a plugpull stamp",
                        s.sectors,
                        target.display()
                    ),
                    None => format!("{} could not be read", target.display()),
                }
            ),
        )
        .into()),
    }
}

/// The witness's refusal of a device key it has no run for (its wording in
/// src/witness/server/ `on_fetch`), as opposed to any other failure to fetch.
fn is_no_run_for_device(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("no run for device")
}

/// Refuses (exit 2, naming both identities) to judge `log` against `target` when the
/// run was written to another medium and `target` carries none of its stamps, unless
/// `allow`. Says on stderr when a mismatch is let through, and why.
pub fn check_identity(
    log: &RunLog,
    target: &Path,
    device: &DeviceIdentity,
    allow: bool,
    read_timeout: Duration,
) -> Result<()> {
    let written = &log.descriptor.device;
    if written.same_medium(device) {
        return Ok(());
    }
    let run = log.descriptor.run_id;
    let points = medium::run_points(log);
    let sample = sample(target, read_timeout, move |d| {
        medium::find_run(d, run, &points)
    });
    let mismatch = format!(
        "run {run} was written to {}, but {} is {}",
        written.describe(),
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
        s => Err(ExitCode(
            ERROR,
            format!(
                "{mismatch}, and {}. Judging a drive by another drive's records would report them lost (a false FAIL). Verify the drive the run was written to, or name this drive's run with --run (leave it out to take this drive's latest run); if this really is the same medium under a new identity (a restored image, a re-created file), pass --allow-identity-mismatch",
                match s {
                    Some(s) => format!(
                        "none of the {} sectors read there from the run's region carries a stamp of that run",
                        s.sectors
                    ),
                    None => "it could not be read to look for the run's stamps".to_string(),
                }
            ),
        )
        .into()),
    }
}

/// Opens `target` for reading and runs `f` on it within `limit`; None if it cannot be
/// opened or does not answer in time.
fn sample(
    target: &Path,
    limit: Duration,
    f: impl FnOnce(&dyn Device) -> Sample + Send + 'static,
) -> Option<Sample> {
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open_read(target).ok()?);
    medium::within(dev, limit, f)
}

fn fmt_ns(ns: u64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns as i64)
        .format("%Y-%m-%d %H:%M:%S UTC")
        .to_string()
}
