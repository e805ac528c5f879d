//! `plugpull verify`: arguments to [`VerifyOptions`], the report rendered on stdout
//! (`render::verify`), the verdict noted at the witness, then the verdict to an exit
//! code (PASS, FAIL, INCONCLUSIVE). A log that holds what no writer can produce gives no
//! verdict: its error is printed and the exit code is INCONCLUSIVE, not ERROR. Ctrl-C
//! says there is no verdict and exits INTERRUPTED (130).

use crate::commands::ack_args;
use crate::commands::args::VerifyArgs;
use crate::commands::render::{self, Format};
use crate::exit;
use crate::verify::{self, VerifyError, VerifyOptions};

pub fn run(a: VerifyArgs) -> anyhow::Result<i32> {
    let options = options(a)?;
    // Verify only reads the target and the acks: nothing to undo, and stopping mid-scan
    // beats a half verdict.
    crate::commands::interrupt::on_ctrl_c_or_term_say(
        b"\nplugpull verify: interrupted (Ctrl-C): no verdict. Verify only reads the drive; run it again.\n",
        b"\nplugpull verify: terminated (SIGTERM): no verdict. Verify only reads the drive; run it again.\n",
    );
    let format = Format::from_flags(options.json, options.quiet);
    if options.target.is_dir() {
        return match crate::tree::verify_dir(&options) {
            Ok(t) => {
                render::out(&render::verify::tree(format, &t)?);
                verify::tell_the_witness(&options, t.run, &t.report.report);
                Ok(t.report.report.verdict.exit_code())
            }
            Err(e) if e.is_impossible_run() => {
                exit::print_error(&e);
                Ok(exit::INCONCLUSIVE)
            }
            Err(e) => Err(e.into()),
        };
    }
    match verify::run(&options) {
        Ok(v) => {
            // Also on stderr: JSON and the verdict line do not show it to people.
            if let Some(w) = &v.report.ram_warning {
                eprintln!("plugpull verify: WARNING: {w}");
            }
            render::out(&render::verify::report(format, &v.report)?);
            verify::tell_the_witness(&options, v.run, &v.report);
            Ok(v.report.verdict.exit_code())
        }
        Err(e @ VerifyError::ImpossibleRun(_)) => {
            exit::print_error(&e);
            eprintln!(
                "plugpull verify: in plain words: no verdict on the drive: the list of confirmed writes holds entries no writer could have made (damaged or forged), so it cannot be trusted to judge the drive."
            );
            Ok(exit::INCONCLUSIVE)
        }
        Err(e) => Err(e.into()),
    }
}

/// The options the command line asks for; an error if `--run` is not a run id.
pub fn options(a: VerifyArgs) -> anyhow::Result<VerifyOptions> {
    let run = ack_args::run_id(a.run.as_deref())?;
    let acks = ack_args::ack_source(a.acks, a.witness)?;
    Ok(VerifyOptions {
        target: a.target,
        acks,
        key_file: a.key_file,
        run,
        allow_identity_mismatch: a.allow_identity_mismatch,
        rehearsal: a.rehearsal,
        json: a.json,
        quiet: a.quiet,
        read_timeout: a.read_timeout,
        scan_region: a.scan_region,
        budget: crate::verify::budget::Budget {
            memory_bytes: a.memory,
            work_dir: a.work_dir,
        },
    })
}
