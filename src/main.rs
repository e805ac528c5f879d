//! Thin entry point: parse, dispatch, exit with the command's code; an error is printed
//! and exits with `exit::ERROR` (commands map the errors that mean another code).

use clap::Parser;
use plugpull::commands::args::Cli;
use plugpull::exit;

fn main() {
    let cli = Cli::parse();
    match plugpull::commands::dispatch(cli.command) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            exit::print_error(e.as_ref());
            std::process::exit(exit::ERROR)
        }
    }
}
