//! The record generator's cost, per format version, without the writer around it: for
//! measuring with `perf stat -e instructions,task-clock` (a load-insensitive count) or
//! by the wall time it prints (noisy on a shared machine).
//!
//! Usage: cargo run --release --example contentcost -- VERSION RECORDS [RECORD_BYTES]
//!        [prepare|content]
//!   VERSION 1 or 2; RECORDS records of RECORD_BYTES (default 4096) one after another,
//!   either prepared (`prepare`, the default: content, stamps and content CRCs, as
//!   `record::prepare_record`) or only their content generated over the whole record
//!   (`content`: `RunKey::record(..).fill_at(0, ..)`; version 1 by the `blake3` crate's
//!   XOF reader, not the writer's former AVX2 code).
use plugpull::record::{RecordId, RunId, RunKey, prepare_record};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        eprintln!("usage: contentcost VERSION RECORDS [RECORD_BYTES]");
        std::process::exit(2);
    }
    let version: u16 = a[1].parse().expect("VERSION");
    let records: u64 = a[2].parse().expect("RECORDS");
    let bytes: u64 = a.get(3).map_or(4096, |s| s.parse().expect("RECORD_BYTES"));
    let content_only = match a.get(4).map_or("prepare", |s| s.as_str()) {
        "prepare" => false,
        "content" => true,
        other => panic!("unknown mode {other}: prepare or content"),
    };
    let run = RunId(*b"contentcost-run0");
    let key = RunKey::for_version(run, version).expect("version 1 or 2");
    let mut buf = vec![0u8; bytes as usize];
    let mut check = 0u64;
    let t0 = Instant::now();
    for seq in 1..=records {
        let rec = RecordId {
            stream: 0,
            seq,
            offset: (seq % 65536) * bytes,
            sectors: (bytes / 512) as u32,
            write_time_ns: 0,
        };
        if content_only {
            key.record(rec.stream, rec.seq).fill_at(0, &mut buf);
        } else {
            prepare_record(&mut buf, &key, run, &rec);
        }
        // Read the result so the work cannot be optimised away.
        check ^= u64::from_le_bytes(buf[bytes as usize - 8..].try_into().unwrap());
    }
    let ns = t0.elapsed().as_nanos() as f64;
    println!(
        "version {version} {}: {records} records of {bytes} bytes, {:.3} us per record (wall), check {check:016x}",
        if content_only { "content" } else { "prepare" },
        ns / records as f64 / 1000.0
    );
}
