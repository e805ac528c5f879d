//! Thin entry point: parse, dispatch, exit with the command's code; an error is printed
//! and exits with `exit::ERROR` (commands map the errors that mean another code).

use clap::FromArgMatches;
use plugpull::commands::args::Cli;
use plugpull::exit;

fn main() {
    // Parsed from `help::cli()`: the clap definitions plus examples and profile names.
    let matches = plugpull::commands::help::cli().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match plugpull::commands::dispatch(cli.command) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            exit::print_error(e.as_ref());
            std::process::exit(exit::ERROR)
        }
    }
}
