//! `plugpull write`: arguments to [`WriteOptions`], then the run; its outcome to an exit
//! code (PASS, TARGET_FAILED when a write or flush failed mid-run, INTERRUPTED on
//! Ctrl-C).

use crate::commands::args::{WriteArgs, WriteFlushArg};
use crate::exit;
use crate::tree::TreeFlush;
use crate::tree::plan::TreeScale;
use crate::tree::write::TreeWriteOptions;
use crate::write::uring::DepthSettings;
use crate::write::{self, WriteError, WriteOptions, WriteOutcome};

pub fn run(a: WriteArgs) -> anyhow::Result<i32> {
    if a.target.is_dir() {
        return run_tree(a);
    }
    let outcome = match write::run(&options(a)?) {
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

/// `plugpull write DIR`: the tree workload (docs/tree.md).
fn run_tree(a: WriteArgs) -> anyhow::Result<i32> {
    let json = a.json;
    let o = tree_options(a);
    let quiet = o.quiet;
    let s = write::tree_run(&o)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else if !quiet {
        eprintln!("{}", tree_line(&s));
    }
    Ok(match s.failure {
        Some(f) => {
            eprintln!("plugpull write: stopped: {f}; nothing after it was acknowledged");
            exit::TARGET_FAILED
        }
        None if write::interrupted_by_ctrl_c() => exit::INTERRUPTED,
        None => exit::PASS,
    })
}

/// The tree run's last line: the count grouped by thousands, the time as a span.
fn tree_line(s: &crate::tree::write::TreeWriteSummary) -> String {
    format!(
        "plugpull write: {} file(s), {} acknowledged in {} under {}",
        crate::units::thousands(s.files_acked),
        crate::units::fmt_bytes(s.bytes_acked),
        crate::units::fmt_duration_ms(s.elapsed_ms),
        s.root.display()
    )
}

/// The tree options the command line asks for.
pub fn tree_options(a: WriteArgs) -> TreeWriteOptions {
    TreeWriteOptions {
        dir: a.target,
        witness: a.witness,
        key_file: a.key_file,
        scale: TreeScale::scaled_down(a.files),
        flush: match a.flush.unwrap_or(WriteFlushArg::Fsync) {
            WriteFlushArg::Fsync => TreeFlush::Fsync,
            WriteFlushArg::Fdatasync => TreeFlush::Fdatasync,
            WriteFlushArg::Dsync => TreeFlush::Dsync,
            WriteFlushArg::None => TreeFlush::None,
            WriteFlushArg::TestingOnlySkipDirFsync => TreeFlush::TestingOnlySkipDirFsync,
        },
        count: a.count,
        duration: a.duration,
        seed: a.seed,
        quiet: a.quiet,
        max_unconfirmed: a.max_unconfirmed,
    }
}

/// The options the command line asks for.
pub fn options(a: WriteArgs) -> anyhow::Result<WriteOptions> {
    let Some(flush) = a.flush.unwrap_or(WriteFlushArg::Fdatasync).device() else {
        anyhow::bail!(
            "--flush testing-only-skip-dir-fsync is for directory targets only (docs/tree.md)"
        );
    };
    let depth = depth_settings(&a.depth, flush)?;
    Ok(WriteOptions {
        target: a.target,
        witness: a.witness,
        key_file: a.key_file,
        size_bytes: a.size,
        offset_bytes: a.offset,
        record_size: a.record_size,
        placement: a.placement.into(),
        streams: a.streams,
        flush,
        batch: a.batch as usize,
        depth,
        direct: !a.no_direct,
        duration: a.duration,
        count: a.count,
        seed: a.seed,
        destroy_data_on: a.destroy_data_on,
        json: a.json,
        quiet: a.quiet,
        max_unconfirmed: a.max_unconfirmed,
    })
}

/// `--flush-within` when not given: short enough that an ack waits little for a slow
/// trickle of completions, long enough that at fast devices `--flush-every` decides.
const FLUSH_WITHIN_DEFAULT: std::time::Duration = std::time::Duration::from_millis(10);

/// The io_uring engine's settings (None: the synchronous loop), or why the combination
/// makes no sense.
fn depth_settings(
    a: &crate::commands::args::DepthArgs,
    flush: crate::device::FlushMethod,
) -> anyhow::Result<Option<DepthSettings>> {
    use crate::device::FlushMethod;
    let interval_given = a.flush_every.is_some() || a.flush_within.is_some();
    if a.iodepth == 1 {
        if interval_given {
            anyhow::bail!(
                "--flush-every and --flush-within set the flush interval of --iodepth N (N > 1); without it every batch is flushed on its own (see --batch)"
            );
        }
        return Ok(None);
    }
    if interval_given && matches!(flush, FlushMethod::Dsync | FlushMethod::None) {
        anyhow::bail!(
            "--flush-every and --flush-within apply to --flush fdatasync and fsync; with --flush {flush} no flush is submitted (dsync: each write is durable on its own; none: a control run)"
        );
    }
    let within = a.flush_within.unwrap_or(FLUSH_WITHIN_DEFAULT);
    if within.is_zero() {
        anyhow::bail!("--flush-within must be longer than 0 (e.g. 500us, 10ms)");
    }
    Ok(Some(DepthSettings {
        iodepth: a.iodepth,
        flush_every: a.flush_every.unwrap_or(a.iodepth),
        flush_within: within,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_line_separates_thousands_and_reads_a_span() {
        let s = crate::tree::write::TreeWriteSummary {
            run: crate::record::RunId([7; 16]),
            root: "/mnt/t/tree".into(),
            seed: 1,
            flush: "fsync",
            files_acked: 53_000,
            bytes_acked: 53_000 * 4096,
            elapsed_ms: 12_340.0,
            failure: None,
        };
        assert_eq!(
            tree_line(&s),
            "plugpull write: 53,000 file(s), 207.0 MiB acknowledged in 12 s under /mnt/t/tree"
        );
    }
}
