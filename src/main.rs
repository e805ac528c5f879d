//! Thin entry point: parse, dispatch, map errors to exit codes (see `plugpull::exit`).

use clap::Parser;
use plugpull::cli::{Cli, Command};
use plugpull::exit;

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Listen(a) => plugpull::ack::server::run(a).map(|()| exit::PASS),
        Command::Write(a) => plugpull::write::run(a),
        Command::Verify(a) => plugpull::verify::run(a),
        Command::Fetch(a) => plugpull::ack::client::run_fetch(a).map(|()| exit::PASS),
        Command::Bench(a) => plugpull::bench::run(a),
        Command::Simdrive(a) => plugpull::sim::run(a),
        Command::Demo(a) => plugpull::demo::run(a),
        Command::Soak(a) => plugpull::soak::run(a),
        Command::Campaign(a) => plugpull::campaign::run(a),
        Command::Report(a) => plugpull::report::run(a),
        Command::Completions(a) => plugpull::report::clidocs::completions(a),
        Command::Man(a) => plugpull::report::clidocs::man(a),
        Command::Agent(a) => plugpull::campaign::agent::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let code = e
                .downcast_ref::<exit::ExitCode>()
                .map(|c| c.0)
                .unwrap_or(exit::ERROR);
            eprintln!("plugpull: error: {e:#}");
            std::process::exit(code)
        }
    }
}
