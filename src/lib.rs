//! plugpull: does this drive keep the writes it acknowledged as flushed when the power is
//! cut? See README.md for the tool and docs/ for formats and the fault model.

pub mod bench;
pub mod campaign;
pub mod commands;
pub mod cycle;
pub mod demo;
pub mod device;
pub mod exit;
pub mod fleet;
pub mod io_step;
pub mod latency;
pub mod le;
pub mod logwrites;
pub mod model;
pub mod ocp;
pub mod placer;
pub mod power;
pub mod record;
pub mod report;
pub mod rng;
pub mod sim;
pub mod soak;
pub mod stats;
pub mod sync;
pub mod tree;
pub mod units;
pub mod userfile;
pub mod verify;
pub mod wire;
pub mod witness;
pub mod write;
