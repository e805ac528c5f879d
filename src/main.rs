//! Thin entry point: parse, dispatch, map errors to exit codes (see `plugpull::exit`).

use clap::Parser;
use plugpull::commands::args::Cli;
use plugpull::exit;

fn main() {
    let cli = Cli::parse();
    let result = plugpull::commands::dispatch(cli.command);
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
