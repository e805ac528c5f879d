//! The roof: clap's argument structs (`args`) and, per command, the conversion from
//! arguments to the typed options a domain module takes. Nothing below this layer imports
//! clap, so every domain module can be driven from tests and other modules without
//! inventing a command line.

pub mod ack_args;
pub mod agent;
pub mod args;
pub mod bench;
pub mod campaign;
pub mod clidocs;
pub mod completions;
pub mod demo;
pub mod fetch;
pub mod help;
pub mod interrupt;
pub mod listen;
pub mod man;
pub mod render;
pub mod replay;
pub mod report;
pub mod runs;
pub mod simdrive;
pub mod soak;
pub mod verify;
pub mod write;

use args::Command;

/// Runs one parsed command line; the exit code on success, errors for main to map.
pub fn dispatch(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Listen(a) => listen::run(a),
        Command::Write(a) => write::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Fetch(a) => fetch::run(a),
        Command::Runs(a) => runs::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Simdrive(a) => simdrive::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Soak(a) => soak::run(a),
        Command::Campaign(a) => campaign::run(a),
        Command::Report(a) => report::run(a),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
        Command::Agent(a) => agent::run(a),
    }
}
