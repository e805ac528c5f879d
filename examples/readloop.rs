//! Reference for verify's read bandwidth: a plain O_DIRECT sequential read loop over a
//! file in 1 MiB blocks, nothing else. Prints MiB/s.
//!
//! Usage: cargo run --release --example readloop -- FILE
use plugpull::device::{AlignedBuf, Device, FileDevice};
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("FILE");
    let dev = FileDevice::open_read(std::path::Path::new(&path)).unwrap();
    let mut buf = AlignedBuf::try_new(1 << 20).expect("a 1 MiB buffer");
    let t0 = Instant::now();
    let mut at = 0;
    while at + (1 << 20) <= dev.size_bytes() {
        dev.read_at(&mut buf, at).unwrap();
        at += 1 << 20;
    }
    println!("{:.0}", at as f64 / 1048576.0 / t0.elapsed().as_secs_f64());
}
