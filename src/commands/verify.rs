//! `plugpull verify`: arguments to [`VerifyOptions`], the report rendered on stdout
//! (`render::verify`), the verdict noted at the witness, then the verdict to an exit
//! code (PASS, FAIL, INCONCLUSIVE). A log that holds what no writer can produce gives no
//! verdict: its error is printed and the exit code is INCONCLUSIVE, not ERROR. Ctrl-C
//! says there is no verdict and exits INTERRUPTED (130). `--format ocp` is one OCP test
//! run (`render::ocp`), also when there is no report: then its error and no result.

use crate::commands::ack_args;
use crate::commands::args::{OutputFormat, VerifyArgs};
use crate::commands::render::ocp::Invocation;
use crate::commands::render::{self, Format};
use crate::exit;
use crate::ocp::Status;
use crate::verify::{self, AckSource, VerifyError, VerifyOptions};

pub fn run(a: VerifyArgs) -> anyhow::Result<i32> {
    let ocp = a.output.resolve().map_err(anyhow::Error::msg)? == OutputFormat::Ocp;
    let options = options(a)?;
    if ocp {
        return run_ocp(&options);
    }
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
        json: a.output.resolve().map_err(anyhow::Error::msg)? == OutputFormat::Json,
        quiet: a.quiet,
        read_timeout: a.read_timeout,
        scan_region: a.scan_region,
        budget: crate::verify::budget::Budget {
            memory_bytes: a.memory,
            work_dir: a.work_dir,
        },
    })
}

/// `verify --format ocp`: as [`run`], the report as an OCP test run on stdout; an error
/// that leaves no report is the run's error, its result NOT_APPLICABLE.
fn run_ocp(options: &VerifyOptions) -> anyhow::Result<i32> {
    let inv = Invocation::now("plugpull-verify", parameters(options));
    let target = options.target.display().to_string();
    if options.target.is_dir() {
        return match crate::tree::verify_dir(options) {
            Ok(t) => {
                render::out(&render::ocp::verify(&inv, &t.report.report));
                verify::tell_the_witness(options, t.run, &t.report.report);
                Ok(t.report.report.verdict.exit_code())
            }
            Err(e) => {
                let impossible = e.is_impossible_run();
                no_report(&inv, &target, impossible, &e);
                if impossible {
                    exit::print_error(&e);
                    return Ok(exit::INCONCLUSIVE);
                }
                Err(e.into())
            }
        };
    }
    match verify::run(options) {
        Ok(v) => {
            if let Some(w) = &v.report.ram_warning {
                eprintln!("plugpull verify: WARNING: {w}");
            }
            render::out(&render::ocp::verify(&inv, &v.report));
            verify::tell_the_witness(options, v.run, &v.report);
            Ok(v.report.verdict.exit_code())
        }
        Err(e @ VerifyError::ImpossibleRun(_)) => {
            no_report(&inv, &target, true, &e);
            exit::print_error(&e);
            Ok(exit::INCONCLUSIVE)
        }
        Err(e) => {
            no_report(&inv, &target, false, &e);
            Err(e.into())
        }
    }
}

/// Prints the OCP run of a verify that gave no report: an impossible run (no verdict,
/// SKIP) or an error (ERROR).
fn no_report(
    inv: &Invocation,
    target: &str,
    impossible: bool,
    e: &(dyn std::error::Error + 'static),
) {
    let (status, symptom) = if impossible {
        (Status::Skip, "ack-log-impossible")
    } else {
        (Status::Error, "verify-error")
    };
    let message = exit::error_chain(e);
    render::out(&render::ocp::no_report(
        inv, target, status, symptom, &message,
    ));
}

/// The options as `testRunStart` parameters.
fn parameters(o: &VerifyOptions) -> serde_json::Map<String, serde_json::Value> {
    let (kind, acks) = match &o.acks {
        AckSource::Witness(w) => ("witness", w.clone()),
        AckSource::File(f) => ("acks", f.display().to_string()),
    };
    let v = serde_json::json!({
        "target": o.target.display().to_string(),
        kind: acks,
        "run": o.run.map(|r| r.to_string()),
        "rehearsal": o.rehearsal,
        "scan_region": o.scan_region,
        "allow_identity_mismatch": o.allow_identity_mismatch,
        "read_timeout_ms": o.read_timeout.as_millis() as u64,
        "memory_bytes": o.budget.memory_bytes,
    });
    match v {
        serde_json::Value::Object(m) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => unreachable!("an object literal"),
    }
}
