//! `plugpull verify`: arguments to [`VerifyOptions`], then the verdict to an exit code
//! (PASS, FAIL, INCONCLUSIVE). A log that holds what no writer can produce gives no
//! verdict: its error is printed and the exit code is INCONCLUSIVE, not ERROR.

use crate::commands::args::VerifyArgs;
use crate::exit;
use crate::record::RunId;
use crate::verify::{self, AckSource, VerifyError, VerifyOptions};
use anyhow::Context;

pub fn run(a: VerifyArgs) -> anyhow::Result<i32> {
    match verify::run(&options(a)?) {
        Ok(verdict) => Ok(verdict.exit_code()),
        Err(e @ VerifyError::ImpossibleRun(_)) => {
            exit::print_error(&e);
            Ok(exit::INCONCLUSIVE)
        }
        Err(e) => Err(e.into()),
    }
}

/// The options the command line asks for; an error if `--run` is not a run id.
pub fn options(a: VerifyArgs) -> anyhow::Result<VerifyOptions> {
    let run = match &a.run {
        Some(r) => Some(
            RunId::parse(r)
                .with_context(|| format!("--run '{r}' is not a run id (32 hex digits)"))?,
        ),
        None => None,
    };
    let acks = match (a.acks, a.witness) {
        (Some(path), _) => AckSource::File(path),
        (None, Some(addr)) => AckSource::Witness(addr),
        (None, None) => anyhow::bail!("--witness or --acks is required"),
    };
    Ok(VerifyOptions {
        target: a.target,
        acks,
        key_file: a.key_file,
        run,
        allow_identity_mismatch: a.allow_identity_mismatch,
        json: a.json,
        quiet: a.quiet,
        read_timeout: a.read_timeout,
        scan_region: a.scan_region,
    })
}
