//! A run judged the way a campaign's, the agent's, the demo's and the soak's cycles
//! judge it (`cycle::fetched::FetchedRun::judge`: the acks streamed from a temporary log
//! file through the engine, within the default budget), for measuring that path's
//! memory and time against `plugpull verify` on the same run (docs/performance.md
//! "Memory").
//!
//! Usage: cargo run --release --example cyclejudge -- TARGET LOG
//!        (a pair from examples/synthacks.rs); prints the verdict and the counts.
use plugpull::cycle::fetched::FetchedRun;
use plugpull::device::{Device, FileDevice};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 3 {
        eprintln!("usage: cyclejudge TARGET LOG");
        std::process::exit(2);
    }
    let t0 = Instant::now();
    let run = FetchedRun::from_log_file(std::path::Path::new(&a[2])).expect("reading LOG");
    let dev = FileDevice::open_read(std::path::Path::new(&a[1])).expect("opening TARGET");
    let judged = run.judge(
        Ok(Arc::new(dev) as Arc<dyn Device>),
        Duration::from_secs(30),
    );
    let r = &judged.report;
    println!(
        "{} acks {} counts {:?} in {:.1} s",
        r.verdict.name(),
        r.acked_records,
        r.counts,
        t0.elapsed().as_secs_f64()
    );
}
