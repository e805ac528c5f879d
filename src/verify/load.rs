//! Where a run's acks come from: a log file, or the witness (a named run, or the latest
//! run for the drive, see `select`), and whether they prove they are all of them. Why
//! this matters: verify judges only what the witness holds, so it must say where that
//! came from and whether a truncated file could be hiding acks.

use super::options::{AckSource, VerifyError, VerifyOptions};
use super::select;
use crate::device::identity;
use crate::model::{RunLog, RunSelector};
use crate::witness::store::checker::Wholeness;

/// Where a run's acks came from and whether they proved they are all of them.
pub struct LoadedRun {
    pub log: RunLog,
    /// "witness HOST:PORT" or the file's path.
    pub source: String,
    pub wholeness: Wholeness,
}

/// Loads the run's acks from a log file or the witness.
pub fn load_run(o: &VerifyOptions) -> Result<RunLog, VerifyError> {
    Ok(load_run_checked(o)?.log)
}

/// [`load_run`], also saying whether the acks are provably all of them: a file must end
/// in a matching end mark (module `witness::store::log`); a fetch from the witness ends
/// in the witness's count of what it sent, over the (authenticated, with a key)
/// connection.
pub fn load_run_checked(o: &VerifyOptions) -> Result<LoadedRun, VerifyError> {
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let loaded = match &o.acks {
        AckSource::File(path) => {
            let (log, wholeness) =
                crate::witness::store::reader::read_log_file_checked(path, key.as_ref()).map_err(
                    |e| VerifyError::ReadingAcks {
                        path: path.clone(),
                        source: e.into(),
                    },
                )?;
            LoadedRun {
                log,
                source: path.display().to_string(),
                wholeness,
            }
        }
        AckSource::Witness(witness) => {
            let log = fetch(o, witness, key.as_ref())?;
            let how = witness_how(log.acks.len() as u64, key.is_some());
            LoadedRun {
                log,
                source: format!("witness {witness}"),
                wholeness: Wholeness { whole: true, how },
            }
        }
    };
    if let Some(r) = o.run {
        if loaded.log.descriptor.run_id != r {
            return Err(VerifyError::WrongRun {
                found: loaded.log.descriptor.run_id,
                asked: r,
            });
        }
    }
    Ok(loaded)
}

/// The named run from the witness, or the latest run for the drive at the target.
fn fetch(
    o: &VerifyOptions,
    witness: &str,
    key: Option<&crate::wire::auth::Key>,
) -> Result<RunLog, VerifyError> {
    match o.run {
        Some(r) => crate::witness::client::fetch_with_key(witness, &RunSelector::Run(r), key)
            .map_err(|e| VerifyError::Fetch(e.into())),
        None => Ok(select::latest_for_target(
            &select::Witness { addr: witness, key },
            &o.target,
            &identity::identify(&o.target),
            o.read_timeout,
        )?),
    }
}

/// [`load_run_checked`] for a caller that holds every ack at once (the tree mode): the
/// acks are first counted without being held, and `fits(descriptor, acks)` may refuse
/// the run before they are loaded. A file is counted by streaming it (a witness
/// directory's log with its journal overlaid into a temporary copy, as verify does); the
/// witness's run (the one `--run` names, or its latest for the target's key) is fetched
/// a frame at a time into a temporary file, counted, and loaded from there. When the
/// witness's latest run for the key was written to another medium, the run is chosen by
/// the stamps on the target as [`load_run_checked`] does, loaded first.
pub fn load_run_counted<E: From<VerifyError>>(
    o: &VerifyOptions,
    fits: impl Fn(&crate::model::RunDescriptor, u64) -> Result<(), E>,
) -> Result<LoadedRun, E> {
    use crate::witness::store::reader::{copy_overlaid, stream_log_file};
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let reading = |path: &std::path::Path| {
        let path = path.to_path_buf();
        move |e: crate::witness::store::error::StoreError| VerifyError::ReadingAcks {
            path,
            source: e.into(),
        }
    };
    let copy = super::temp_log::TempLog::new("counted");
    let (file, fetched) = match &o.acks {
        AckSource::File(path) => match copy_overlaid(path, &copy.0).map_err(reading(path))? {
            Some(_) => (copy.0.clone(), Err(path)),
            None => (path.clone(), Err(path)),
        },
        AckSource::Witness(addr) => {
            let sel = match o.run {
                Some(r) => RunSelector::Run(r),
                None => RunSelector::LatestForDevice(identity::identify(&o.target).key()),
            };
            let f = match copy.fetch_into(addr, &sel, key.as_ref()) {
                Ok(f) => f,
                Err(crate::witness::client::error::ClientError::NoRunForDevice { .. }) => {
                    return Ok(load_run_checked(o)?);
                }
                Err(e) => return Err(VerifyError::Fetch(e.into()).into()),
            };
            if o.run.is_none()
                && !f
                    .descriptor
                    .device
                    .same_medium(&identity::identify(&o.target))
            {
                return Ok(load_run_checked(o)?);
            }
            (copy.0.clone(), Ok((addr, f.acks)))
        }
    };
    let mut acks = 0u64;
    let (head, _) = stream_log_file(&file, key.as_ref(), &mut |a| acks += a.len() as u64)
        .map_err(reading(&file))?;
    fits(&head.descriptor, acks)?;
    let (log, mut wholeness) =
        crate::witness::store::reader::read_log_file_checked(&file, key.as_ref())
            .map_err(reading(&file))?;
    // Ok: fetched from the witness at `addr`, which sent `sent` acks; Err: the file named.
    let source = match fetched {
        Err(path) => path.display().to_string(),
        Ok((addr, sent)) => {
            wholeness = Wholeness {
                whole: true,
                how: witness_how(sent, key.is_some()),
            };
            format!("witness {addr}")
        }
    };
    if let Some(r) = o.run.filter(|&r| r != log.descriptor.run_id) {
        return Err(VerifyError::WrongRun {
            found: log.descriptor.run_id,
            asked: r,
        }
        .into());
    }
    Ok(LoadedRun {
        log,
        source,
        wholeness,
    })
}

/// How a fetch from the witness proved it whole: its count of what it sent.
pub(super) fn witness_how(acks: u64, authenticated: bool) -> String {
    format!(
        "fetched from the witness, which counted {} acks and sent them all{}",
        crate::units::thousands(acks),
        if authenticated {
            " over a connection authenticated with --key-file"
        } else {
            ""
        }
    )
}
