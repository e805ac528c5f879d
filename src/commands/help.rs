//! What `--help` adds to the clap definitions of `args.rs`: an Examples section for every
//! subcommand (the two or three commands people actually run) and the simulated drive's
//! profile names, which come from `sim::profile` so the list never drifts.
//!
//! Why here and not in `args.rs`: the examples are prose, long, and change with the
//! guides; `args.rs` stays the list of options. `cli()` is what main parses with and what
//! the man pages and completions are generated from, so all three show the same help.

use crate::commands::args::Cli;
use crate::sim::profile::Kind;
use clap::CommandFactory;

/// Each subcommand's examples, shown under "Examples:" by `-h` and `--help`.
const EXAMPLES: &[(&str, &str)] = &[
    (
        "listen",
        "  # The witness, on a machine that keeps power when the drive's is cut:
  plugpull listen --bind 0.0.0.0:7420
  # With a pre-shared key (give the same file to write, verify, fetch and runs):
  head -c 32 /dev/urandom | base64 > witness.key
  plugpull listen --bind 0.0.0.0:7420 --key-file witness.key",
    ),
    (
        "write",
        "  # Write to a whole drive (its data is destroyed; the drive must be named twice):
  plugpull write /dev/sdX --witness witness-host:7420 --destroy-data-on /dev/sdX
  # A 1 GiB file on the file system under test, for five minutes:
  plugpull write /mnt/test/plugpull.img --witness witness-host:7420 --size 1G --duration 5m
  # A directory: the whole-stack tree workload (files, fsyncs, renames; docs/tree.md):
  plugpull write /mnt/test --witness witness-host:7420 --files 2000
  # Then cut the power while it runs, restore it, and run `plugpull verify`.",
    ),
    (
        "verify",
        "  # After the cut: judge the drive's latest run with the acks the witness holds:
  plugpull verify /dev/sdX --witness witness-host:7420
  # From a fetched ack log instead (no network needed), as JSON:
  plugpull verify /dev/sdX --acks run.acklog --json > report.json
  # A directory written by `plugpull write DIR` (after the file system's own recovery):
  plugpull verify /mnt/test --witness witness-host:7420",
    ),
    (
        "fetch",
        "  # Copy the latest run of a drive from the witness into a file:
  plugpull fetch --witness witness-host:7420 --target /dev/sdX -o run.acklog
  # A run by id (from `plugpull runs`):
  plugpull fetch --witness witness-host:7420 --run 0123456789abcdef0123456789abcdef -o run.acklog",
    ),
    (
        "runs",
        "  # Which runs the witness holds, newest first, and whether each was verified:
  plugpull runs --witness witness-host:7420
  plugpull runs --witness witness-host:7420 --json",
    ),
    (
        "replay",
        "  # Judge every crash state of a dm-log-writes log of a run (docs/replay.md):
  plugpull replay /dev/vdc --witness witness-host:7420
  plugpull replay log.img --acks run.acklog --drops 20 --json",
    ),
    (
        "bench",
        "  # The flush-latency fingerprint of a drive (it writes: its data is destroyed):
  plugpull bench /dev/sdX --destroy-data-on /dev/sdX
  # A quick look at a file on the file system under test:
  plugpull bench /mnt/test/bench.img --quick
  # The untar test: files/s and fsync latency of a file system, per flush method
  # (a directory gets it; --in-file gives a directory the device tables instead):
  plugpull bench /mnt/test --files 2000",
    ),
    (
        "simdrive",
        "  # A lying drive on /tmp/pp/mnt (it shows one file, disk.img), ready when it says so:
  plugpull simdrive /tmp/pp/mnt --backing /dev/shm/pp-drive.img --size 64M --profile lying
  # Cut its power: kill -9 its pid (unflushed data is lost as the profile says);
  # power it back on: start it again on the same --backing.
  # The whole cycle, step by step: docs/GUIDE-simdrive.md",
    ),
    (
        "demo",
        "  # One cycle on an honest simulated drive, then on one that lies about flushes:
  plugpull demo
  plugpull demo --profile lying --seed 7",
    ),
    (
        "soak",
        "  # Many seeded cycles, honest and faulty; a failing one prints how to replay it:
  plugpull soak --cycles 200
  plugpull soak --seed 42 --cycles 1 --only faulty --verbose",
    ),
    (
        "campaign",
        "  # Unattended cuts through a power switch (hardware/examples/ has configs):
  plugpull campaign --config hardware/examples/simdrive.toml
  # The summary of the results so far, cutting nothing:
  plugpull campaign --config my-drive.toml --summary",
    ),
    (
        "report",
        "  # One HTML page from one verify report, or from a whole campaign:
  plugpull verify /dev/sdX --witness witness-host:7420 --json > report.json
  plugpull report report.json -o report.html
  plugpull report results.jsonl -o campaign.html",
    ),
    (
        "agent",
        "  # On the host under test, at every boot (hardware/systemd/plugpull-agent.service):
  plugpull agent --config /etc/plugpull/agent.toml",
    ),
    (
        "completions",
        "  plugpull completions bash > /etc/bash_completion.d/plugpull
  plugpull completions zsh > ~/.zfunc/_plugpull",
    ),
    ("man", "  plugpull man --dir /usr/local/share/man/man1"),
];

/// The command line with the examples and profile names added.
pub fn cli() -> clap::Command {
    let profiles = format!(
        "Fault profile: {} (knobs after a colon, see docs/fault-model.md)",
        Kind::ALL.map(|k| k.name()).join(", ")
    );
    let mut cmd = Cli::command();
    for (name, text) in EXAMPLES {
        let examples = format!("Examples:\n{text}");
        cmd = cmd.mut_subcommand(*name, |c| {
            let long = c
                .get_after_long_help()
                .map(|legend| format!("{examples}\n\n{legend}"));
            let c = c.after_help(examples.clone());
            match long {
                Some(l) => c.after_long_help(l),
                None => c,
            }
        });
    }
    for name in ["simdrive", "demo"] {
        cmd = cmd.mut_subcommand(name, |c| c.mut_arg("profile", |a| a.help(profiles.clone())));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand teaches: an Examples section whose commands name the subcommand,
    /// and a description for every option.
    #[test]
    fn every_subcommand_has_examples_and_every_option_a_description() {
        let mut cmd = cli();
        cmd.build();
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            if name == "help" {
                continue;
            }
            let after = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(after.starts_with("Examples:\n"), "{name} has no Examples");
            assert!(
                after.contains(&format!("plugpull {name}")),
                "{name}'s examples do not run it: {after}"
            );
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                assert!(
                    arg.get_help()
                        .is_some_and(|h| !h.to_string().trim().is_empty()),
                    "{name} --{id} has no description"
                );
            }
        }
    }

    #[test]
    fn profile_help_lists_every_profile() {
        let cmd = cli();
        let sim = cmd.find_subcommand("simdrive").unwrap();
        let arg = sim
            .get_arguments()
            .find(|a| a.get_id() == "profile")
            .unwrap();
        let help = arg.get_help().unwrap().to_string();
        for k in Kind::ALL {
            assert!(help.contains(k.name()), "{} missing from {help}", k.name());
        }
    }

    /// verify's long help keeps its legend of classes after the examples.
    #[test]
    fn verify_long_help_has_examples_then_the_legend() {
        let cmd = cli();
        let v = cmd.find_subcommand("verify").unwrap();
        let long = v.get_after_long_help().unwrap().to_string();
        assert!(long.starts_with("Examples:\n"), "{long}");
        assert!(long.len() > v.get_after_help().unwrap().to_string().len() + 100);
    }
}
