//! `plugpull write`: arguments to [`WriteOptions`], then the run; its outcome to an exit
//! code (PASS, TARGET_FAILED when a write or flush failed mid-run, INTERRUPTED on
//! Ctrl-C).

use crate::commands::args::WriteArgs;
use crate::exit;
use crate::write::{self, WriteError, WriteOptions, WriteOutcome};

pub fn run(a: WriteArgs) -> anyhow::Result<i32> {
    let outcome = match write::run(&options(a)) {
        Ok(o) => o,
        Err(e @ WriteError::InterruptedBeforeFirstRecord(_)) if write::interrupted_by_ctrl_c() => {
            exit::print_error(&e);
            return Ok(exit::INTERRUPTED);
        }
        Err(e) => return Err(e.into()),
    };
    Ok(match outcome {
        WriteOutcome::Finished => exit::PASS,
        WriteOutcome::Interrupted => exit::INTERRUPTED,
        WriteOutcome::TargetFailed => exit::TARGET_FAILED,
    })
}

/// The options the command line asks for.
pub fn options(a: WriteArgs) -> WriteOptions {
    WriteOptions {
        target: a.target,
        witness: a.witness,
        key_file: a.key_file,
        size_bytes: a.size,
        offset_bytes: a.offset,
        record_size: a.record_size,
        placement: a.placement.into(),
        streams: a.streams,
        batch: a.batch as usize,
        flush: a.flush.into(),
        direct: !a.no_direct,
        duration: a.duration,
        count: a.count,
        seed: a.seed,
        destroy_data_on: a.destroy_data_on,
        json: a.json,
        quiet: a.quiet,
        max_unconfirmed: a.max_unconfirmed,
    }
}
