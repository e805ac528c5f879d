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
            let how = format!(
                "fetched from the witness, which counted {} acks and sent them all{}",
                crate::units::thousands(log.acks.len() as u64),
                if key.is_some() {
                    " over a connection authenticated with --key-file"
                } else {
                    ""
                }
            );
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
