//! A dm-log-writes log of a synthetic run of any length, with its ack log and the final
//! image, for measuring `plugpull replay` against `plugpull verify` on the same run
//! (scripts/perf-replay.sh runs both under `/usr/bin/time -v`).
//!
//! One stream writes ACKS records of RECORD_BYTES, sequentially over a ring of SLOTS
//! records at offset 0 (ack i goes to slot i mod SLOTS), one log write per record and a
//! flush after every FLUSH_EVERY records (and at the end), as an fdatasync writer
//! acking in batches would be logged. The records of a batch are acked at its flush.
//! The log is built with the library's encoder (`plugpull::logwrites::encode`), in
//! memory, so it needs about the log's size twice in RAM (1 KiB per ack of 512 B).
//!
//! Writes, in DIR: `lw.log` (the log, sector size 512), `run.acklog` (the acks as
//! `plugpull fetch -o` writes them) and `final.img` (the device after the log's last
//! entry: in each slot the record of its latest ack, slots never written are holes).
//!
//! Usage: cargo run --release --example replaymem -- DIR ACKS [SLOTS] [RECORD_BYTES]
//!        [FLUSH_EVERY]   (SLOTS default ACKS, RECORD_BYTES 512, FLUSH_EVERY 1000)
//! Then:  plugpull replay DIR/lw.log --acks DIR/run.acklog --scratch-dir DIR
//!        plugpull verify DIR/final.img --acks DIR/run.acklog --rehearsal
use plugpull::device::FlushMethod;
use plugpull::device::identity;
use plugpull::logwrites::encode::LogEncoder;
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, SECTOR, fill_record};
use std::os::unix::fs::FileExt;
use std::path::Path;

const T0_NS: u64 = 1_780_000_000_000_000_000;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 3 {
        eprintln!("usage: replaymem DIR ACKS [SLOTS] [RECORD_BYTES] [FLUSH_EVERY]");
        std::process::exit(2);
    }
    let dir = Path::new(&a[1]);
    let arg = |i: usize, default: u64| a.get(i).map_or(default, |s| s.parse().expect("a number"));
    let acks = arg(2, 0);
    let g = Gen {
        slots: arg(3, acks),
        rec_bytes: arg(4, 512),
        flush_every: arg(5, 1000),
        acks,
    };
    assert!(g.acks > 0 && g.slots > 0 && g.flush_every > 0);
    assert!(g.rec_bytes > 0 && g.rec_bytes % SECTOR as u64 == 0);
    let run = RunId([0x17; 16]);
    let key = RunKey::new(run);
    let mut buf = vec![0u8; g.rec_bytes as usize];

    // The final image: slot s holds the latest ack i with i mod SLOTS == s.
    let target = dir.join("final.img");
    let f = std::fs::File::create(&target).expect("creating final.img");
    f.set_len(g.slots * g.rec_bytes).expect("sizing final.img");
    let mut out = Vec::with_capacity(8 << 20);
    let mut out_at = 0u64;
    for slot in 0..g.slots.min(g.acks) {
        let i = slot + (g.acks - 1 - slot) / g.slots * g.slots;
        fill_record(&mut buf, &key, run, &g.ack(i).record);
        out.extend_from_slice(&buf);
        if out.len() >= 8 << 20 {
            f.write_all_at(&out, out_at).expect("writing final.img");
            out_at += out.len() as u64;
            out.clear();
        }
    }
    f.write_all_at(&out, out_at).expect("writing final.img");
    f.sync_all().expect("syncing final.img");

    // The log: every record written in ack order, a flush after every batch.
    let mut enc = LogEncoder::new(512);
    for i in 0..g.acks {
        let a = g.ack(i);
        fill_record(&mut buf, &key, run, &a.record);
        enc.write(a.record.offset, &buf, false);
        if (i + 1) % g.flush_every == 0 || i + 1 == g.acks {
            enc.flush();
        }
    }
    enc.mark("dm-log-writes-end");
    let entries = enc.len();
    std::fs::write(dir.join("lw.log"), enc.finish()).expect("writing lw.log");

    let descriptor = RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "replaymem".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(&target),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: g.slots * g.rec_bytes,
            record_bytes_min: g.rec_bytes,
            record_bytes_max: g.rec_bytes,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 17,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: a.clone(),
    };
    let mut stream = (0..g.acks).map(|i| g.ack(i));
    plugpull::witness::store::export::write_log_file_from(
        &dir.join("run.acklog"),
        &descriptor,
        &mut stream,
        &[],
        None,
    )
    .expect("writing run.acklog");
    eprintln!(
        "replaymem: {} acks of {} B over {} slots, a flush every {}: {entries} log entries in {}",
        g.acks,
        g.rec_bytes,
        g.slots,
        g.flush_every,
        dir.display()
    );
}

struct Gen {
    acks: u64,
    slots: u64,
    rec_bytes: u64,
    flush_every: u64,
}

impl Gen {
    /// Ack i: submitted at t0 + 10 µs * i, acked 5 µs after the last write of its batch.
    fn ack(&self, i: u64) -> Ack {
        let batch_end = ((i / self.flush_every + 1) * self.flush_every).min(self.acks) - 1;
        let write_time_ns = T0_NS + i * 10_000;
        Ack {
            record: RecordId {
                stream: 0,
                seq: i + 1,
                offset: i % self.slots * self.rec_bytes,
                sectors: (self.rec_bytes / SECTOR as u64) as u32,
                write_time_ns,
            },
            flushed_ns: T0_NS + batch_end * 10_000 + 5_000,
        }
    }
}
