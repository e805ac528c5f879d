//! `plugpull verify --witness ADDR`: the run fetched once, streamed into a temporary log
//! file (in `TMPDIR`, removed after) and judged from it as `--acks FILE` is
//! (`streamed`), so memory does not grow with the run.
//!
//! Which run: the one named with `--run`; else the witness's newest run under the
//! drive's identity key when it was written to this medium; else the run of the newest
//! stamp on the medium (`select::by_stamps`), fetched in its place.

use super::options::{VerifyError, VerifyOptions};
use super::temp_log::TempLog;
use super::{Verified, engine, evidence, medium, select, streamed};
use crate::device::identity::DeviceIdentity;
use crate::model::RunSelector;
use crate::record::RunId;
use crate::wire::auth::Key;
use crate::witness::client::FetchedFile;
use crate::witness::client::error::ClientError;
use std::path::Path;
use std::time::{Duration, Instant};

/// Judges the target of `o` (identified as `device`; None: it is not there, and `o.run`
/// names the run) against the run the witness at `addr` holds for it.
pub(super) fn run_witnessed(
    o: &VerifyOptions,
    device: Option<&DeviceIdentity>,
    addr: &str,
) -> Result<Verified, VerifyError> {
    let key = crate::wire::auth::load_key(o.key_file.as_deref())
        .map_err(|e| VerifyError::Key(e.into()))?;
    let tmp = TempLog::new("verify");
    // The run asked for, or an error: a witness that sends another run (one that mixed
    // up its runs, a hostile one) would have the drive judged against promises made for
    // another run.
    let fetch_run_to = |run, into: &TempLog| {
        let f = fetch_waiting(o, addr, &RunSelector::Run(run), key.as_ref(), into)?;
        match f {
            Some(f) if f.descriptor.run_id == run => Ok(f),
            Some(f) => Err(VerifyError::Fetch(
                format!(
                    "asked the witness at {addr} for run {run} and it sent run {}: not judged",
                    f.descriptor.run_id
                )
                .into(),
            )),
            None => Err(VerifyError::Fetch(
                format!("the witness at {addr} answered no run to run {run}").into(),
            )),
        }
    };
    let fetch_run = |run| fetch_run_to(run, &tmp);
    let fetched = match (o.run, device) {
        (Some(run), _) => fetch_run(run)?,
        (None, None) => return Err(VerifyError::TargetMissing(o.target.clone())),
        (None, Some(device)) => {
            let sel = RunSelector::LatestForDevice(device.key());
            match fetch_waiting(o, addr, &sel, key.as_ref(), &tmp)? {
                Some(f) if f.descriptor.device.same_medium(device) => f,
                by_key => {
                    // The stamps are read from the target: the work directory first.
                    engine::refuse_unusable_work_dir(o, None)?;
                    let descriptor = by_key.as_ref().map(|f| &f.descriptor);
                    let stamped = select::by_stamps(
                        addr,
                        &o.target,
                        device,
                        descriptor,
                        o.read_timeout,
                        |run| fetch_run(run).map_err(crate::exit::BoxedError::from),
                    )?;
                    let chosen = match (stamped, by_key) {
                        (Some(f), _) | (None, Some(f)) => f,
                        (None, None) => unreachable!("by_stamps names a run when the key has none"),
                    };
                    newest_carried(o, key.as_ref(), chosen, &tmp.0, &fetch_run_to)?
                }
            }
        }
    };
    let how = super::load::witness_how(fetched.acks, key.is_some());
    let source = (format!("witness {addr}"), how);
    streamed::run_streamed(o, device, &tmp.0, Some(source), None)
}

/// The newest run the target carries, from `f` (the run in `path`'s log, chosen by the stamps
/// a sample of the target found): a run the witness heard of on the same drive after
/// `f`'s writer stopped, whose stamps the target carries where its acks say, is newer
/// on the medium, and takes its place (moved into `path`), until none does. Why: the
/// sample reads a few thousand sectors, and a later run's records may lie where it did
/// not look; judged by the older run, the drive would be called FAIL for the sectors the
/// later run overwrote (or, the later run's losses never named).
fn newest_carried(
    o: &VerifyOptions,
    key: Option<&Key>,
    mut f: FetchedFile,
    path: &Path,
    fetch_run_to: &dyn Fn(RunId, &TempLog) -> Result<FetchedFile, VerifyError>,
) -> Result<FetchedFile, VerifyError> {
    // Each step moves to a run begun after the last one's writer stopped, never back
    // to one already judged (a witness whose runs list each other), and a bound keeps a
    // hostile witness from leading this on.
    let mut seen = vec![f.descriptor.run_id];
    for _ in 0..64 {
        let mut newer = None;
        let mut not_carried = vec![];
        let later = evidence::runs_after_the_end(&f.events);
        for run in later.into_iter().rev().filter(|r| !seen.contains(r)) {
            let candidate = TempLog::new("later");
            let g = fetch_run_to(run, &candidate)?;
            let mut points = medium::RunPoints::default();
            crate::witness::store::reader::stream_log_file(&candidate.0, key, &mut |chunk| {
                points.add(chunk)
            })
            .map_err(|e| VerifyError::ReadingAcks {
                path: candidate.0.clone(),
                source: e.into(),
            })?;
            let points = points.finish(&g.descriptor);
            if select::carries_stamps(&o.target, o.read_timeout, run, points)? {
                std::fs::rename(&candidate.0, path).map_err(|e| VerifyError::ReadingAcks {
                    path: candidate.0.clone(),
                    source: e.into(),
                })?;
                newer = Some(g);
                break;
            }
            not_carried.push(run);
        }
        let Some(g) = newer else {
            // Said, not hidden: a later run the witness holds that left no stamp here is
            // a copy made before it, or a drive that lost every record of it; only the
            // user knows which.
            for run in not_carried {
                eprintln!(
                    "plugpull verify: run {run}, begun on the same drive after run {} ended, left no stamp on {} where its acks say (a copy made before it, or a drive that lost all of it); verifying run {} (if this medium did hold run {run}, `--run {run} --allow-identity-mismatch` judges it)",
                    f.descriptor.run_id,
                    o.target.display(),
                    f.descriptor.run_id
                );
            }
            return Ok(f);
        };
        seen.push(g.descriptor.run_id);
        eprintln!(
            "plugpull verify: run {}, begun on the same drive after run {} ended, left its stamps on {}: verifying that run",
            g.descriptor.run_id,
            f.descriptor.run_id,
            o.target.display()
        );
        f = g;
    }
    Ok(f)
}

/// Fetches the run `sel` names into the log `into`; None when the witness has no run under the
/// drive's key. A writer the witness has not heard from for a while is probably gone
/// with its host; the witness decides after its idle timeout. Judging before then would
/// give no verdict (the log could still grow), so this waits for it, within reason.
fn fetch_waiting(
    o: &VerifyOptions,
    addr: &str,
    sel: &RunSelector,
    key: Option<&Key>,
    into: &TempLog,
) -> Result<Option<FetchedFile>, VerifyError> {
    let t0 = Instant::now();
    loop {
        let fetched = match into.fetch_into(addr, sel, key) {
            Ok(f) => f,
            Err(ClientError::NoRunForDevice { .. }) => return Ok(None),
            Err(e) => return Err(VerifyError::Fetch(e.into())),
        };
        if !evidence::worth_waiting_for_the_witness(&fetched.events)
            || t0.elapsed() >= WAIT_FOR_THE_WITNESS
        {
            return Ok(Some(fetched));
        }
        if !o.quiet && t0.elapsed() < Duration::from_secs(1) {
            eprintln!(
                "plugpull verify: the witness still holds the writer's connection but has \
                 not heard from it for a while; waiting up to {} s for it to see the writer \
                 gone (its --idle-timeout)",
                WAIT_FOR_THE_WITNESS.as_secs()
            );
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// How long `verify --witness` waits for the witness to see a silent writer gone: past
/// the witness's default `--idle-timeout` (60 s).
const WAIT_FOR_THE_WITNESS: Duration = Duration::from_secs(75);
