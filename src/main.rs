//! Thin entry point: parse, dispatch, exit with the command's code; an error is printed
//! and exits with `exit::ERROR` (commands map the errors that mean another code).

use clap::FromArgMatches;
use plugpull::commands::args::Cli;
use plugpull::exit;

fn main() {
    return_large_frees_to_the_system();
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

/// Large allocations (1 MiB and up) get pages of their own, returned when freed. Why:
/// glibc otherwise raises its threshold to the largest block freed so far, and serves
/// the next ones from per-thread arenas that keep what is freed; verify judging a run in
/// parts allocates each part's tallies on a new thread, and a run of 10 GiB of 4 KiB
/// records under `--memory 128M` peaked at 168 MB (108 MB with this; docs/performance.md
/// "Scale").
fn return_large_frees_to_the_system() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a tuning parameter of the allocator, before any thread
    // is started.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}
