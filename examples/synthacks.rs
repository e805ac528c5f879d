//! A run of any length without an hour of writing: a synthetic ack log plus the target
//! an honest drive would hold after it, for measuring verify at scale
//! (docs/performance.md "Scale"; scripts/perf-scale.sh runs it).
//!
//! One stream acknowledges ACKS records of RECORD_BYTES over a region of SLOTS records at
//! offset 0: sequential placement is a ring (ack i goes to slot i mod SLOTS), random
//! placement draws each slot from a seeded SplitMix64. Ack i was submitted at
//! t0 + 10 µs * i and flushed 2-12 µs later (seeded). The target gets, in each slot, the
//! record of the latest ack there (what an honest drive holds; slots never acked stay
//! zero, so the file stays sparse there); the log is written as `plugpull fetch -o`
//! writes one (with its end mark), frame by frame, never holding the acks.
//!
//! With `blank` last, the target is left all holes (a drive that lost everything): for
//! runs whose target would not fit on disk (1 G records of 512 B is 512 GB), so every
//! record reads back lost and verify's failure path is measured at full size.
//!
//! Usage: cargo run --release --example synthacks -- TARGET LOG ACKS SLOTS
//!        [sequential|random] [RECORD_BYTES] [blank]
//! Then:  plugpull verify TARGET --acks LOG
use plugpull::device::FlushMethod;
use plugpull::device::identity;
use plugpull::model::{Ack, RunDescriptor, WriterSettings};
use plugpull::record::{FORMAT_VERSION, RecordId, RunId, RunKey, SECTOR, fill_record};
use plugpull::rng::Rng as SplitMix64;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;

const T0_NS: u64 = 1_780_000_000_000_000_000;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 5 {
        eprintln!("usage: synthacks TARGET LOG ACKS SLOTS [sequential|random] [RECORD_BYTES]");
        std::process::exit(2);
    }
    let (target, log) = (Path::new(&a[1]), Path::new(&a[2]));
    let acks: u64 = a[3].parse().expect("ACKS");
    let slots: u64 = a[4].parse().expect("SLOTS");
    let placement = a.get(5).map(String::as_str).unwrap_or("sequential");
    assert!(placement == "sequential" || placement == "random");
    let rec_bytes: u64 = a
        .get(6)
        .map(|s| s.parse().expect("RECORD_BYTES"))
        .unwrap_or(512);
    assert!(rec_bytes > 0 && rec_bytes % SECTOR as u64 == 0);
    let g = Gen {
        random: placement == "random",
        slots,
        rec_bytes,
        seed: 15,
    };
    let run = RunId([0x15; 16]);
    let blank = a.get(7).map(String::as_str) == Some("blank");

    // The target: the latest ack of every slot, written in slot order.
    let mut latest = vec![u64::MAX; if blank { 0 } else { slots as usize }];
    for (i, slot) in g
        .slots()
        .take(if blank { 0 } else { acks as usize })
        .enumerate()
    {
        latest[slot as usize] = i as u64;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(target)
        .expect("creating TARGET");
    f.set_len(slots * rec_bytes).expect("sizing TARGET");
    let key = RunKey::new(run);
    let mut buf = vec![0u8; rec_bytes as usize];
    let mut out = Vec::with_capacity(8 << 20);
    let mut out_at = 0u64;
    for (slot, &i) in latest.iter().enumerate() {
        let at = slot as u64 * rec_bytes;
        if i == u64::MAX {
            flush(&f, &mut out, out_at);
            out_at = at + rec_bytes;
            continue;
        }
        fill_record(&mut buf, &key, run, &g.ack(i, slot as u64).record);
        out.extend_from_slice(&buf);
        if out.len() >= 8 << 20 {
            flush(&f, &mut out, out_at);
            out_at = at + rec_bytes;
        }
    }
    flush(&f, &mut out, out_at);
    f.sync_all().expect("syncing TARGET");
    drop(latest);

    let descriptor = RunDescriptor {
        run_id: run,
        format_version: FORMAT_VERSION,
        plugpull_version: env!("CARGO_PKG_VERSION").into(),
        host: "synthacks".into(),
        started_at: "2026-05-28T00:00:00Z".into(),
        device: identity::identify(target),
        tree: None,
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: slots * rec_bytes,
            record_bytes_min: rec_bytes,
            record_bytes_max: rec_bytes,
            placement: placement.into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: g.seed,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: a.clone(),
    };
    let mut stream = g
        .slots()
        .take(acks as usize)
        .enumerate()
        .map(|(i, slot)| g.ack(i as u64, slot));
    plugpull::witness::store::export::write_log_file_from(log, &descriptor, &mut stream, &[], None)
        .expect("writing LOG");
    let _ = writeln!(
        std::io::stderr(),
        "synthacks: {acks} acks over {slots} slots of {rec_bytes} B ({placement}): {} and {}",
        target.display(),
        log.display()
    );
}

fn flush(f: &std::fs::File, out: &mut Vec<u8>, at: u64) {
    f.write_all_at(out, at).expect("writing TARGET");
    out.clear();
}

struct Gen {
    random: bool,
    slots: u64,
    rec_bytes: u64,
    seed: u64,
}

impl Gen {
    /// The slot of every ack, in ack order.
    fn slots(&self) -> impl Iterator<Item = u64> + '_ {
        let mut rng = SplitMix64::new(self.seed);
        let mut i = 0u64;
        std::iter::from_fn(move || {
            let s = if self.random {
                rng.next_u64() % self.slots
            } else {
                i % self.slots
            };
            i += 1;
            Some(s)
        })
    }

    fn ack(&self, i: u64, slot: u64) -> Ack {
        // Flush latency 2-12 µs, the same for ack i whichever pass asks.
        let jitter = SplitMix64::new(self.seed ^ i.wrapping_mul(0x9E37_79B9)).next_u64() % 10_000;
        let write_time_ns = T0_NS + i * 10_000;
        Ack {
            record: RecordId {
                stream: 0,
                seq: i + 1,
                offset: slot * self.rec_bytes,
                sectors: (self.rec_bytes / SECTOR as u64) as u32,
                write_time_ns,
            },
            flushed_ns: write_time_ns + 2_000 + jitter,
        }
    }
}
