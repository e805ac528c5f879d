//! The reference the writer is measured against: a plain O_DIRECT pwrite + fdatasync loop
//! over a file, 4 KiB sequential with wrap, for a fixed time. Prints ops/s.
//!
//! Usage: cargo run --release --example rawloop -- FILE SIZE_BYTES SECONDS

use plugpull::device::{AlignedBuf, Device, FileDevice, FlushMethod, open, prepare_file};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (path, size, secs) = (
        Path::new(&args[1]),
        args[2].parse::<u64>().unwrap(),
        args[3].parse::<f64>().unwrap(),
    );
    prepare_file(path, size).unwrap();
    let flags = open::Flags {
        direct: true,
        dsync: false,
    };
    let open::Opened::Existing(t) = open::open_once(path, flags).unwrap() else {
        panic!("{} is missing", path.display());
    };
    let dev = FileDevice::from_target(t, FlushMethod::Fdatasync).unwrap();
    let mut buf = AlignedBuf::try_new(4096).expect("a 4 KiB buffer");
    buf.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let (t0, limit) = (Instant::now(), Duration::from_secs_f64(secs));
    let (mut n, mut at) = (0u64, 0u64);
    while t0.elapsed() < limit {
        buf[0] = n as u8;
        dev.write_at(&buf, at).unwrap();
        dev.flush().unwrap();
        n += 1;
        at = (at + 4096) % size;
    }
    println!("{:.1}", n as f64 / t0.elapsed().as_secs_f64());
}
