//! Attacks on the promise that a run judged in parts gives the whole run's report (the
//! counts, findings, loss window, verdict, unreadable ranges, bytes read, region read
//! and plain words), whatever the drive does, and keeps to the memory budget: each
//! `attack_*` test is a way the promise once broke, and says in its comment how.
//! `explore_parts_against_the_whole_run_at_random` is the random search behind them
//! (64 seeds in every test run; more by hand with `FUZZ_SEEDS`, `FUZZ_FROM`,
//! `FUZZ_HANG=1` for reads that hang).

use super::*;
use crate::device::mem::{MemDevice, ReadHook};
use crate::record::{RecordId, RunId, RunKey, fill_record};
use crate::verify::engine::verify_streamed;
use crate::verify::scale_tests::without_time;

const MIB: u64 = 1 << 20;
const S: u64 = SECTOR as u64;

use super::tests::{Loose, Unhinted, in_parts};

fn descriptor(id: RunId, offset: u64, bytes: u64, min: u64, max: u64) -> RunDescriptor {
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = id;
    d.format_version = crate::record::FORMAT_VERSION;
    d.settings.region_offset = offset;
    d.settings.region_bytes = bytes;
    d.settings.record_bytes_min = min;
    d.settings.record_bytes_max = max;
    d.settings.streams = 2;
    d.settings.placement = "random".into();
    d
}

/// Writes `a`'s record whole to `dev` (at `at`, its home unless misdirected), its first
/// `sectors` only when given.
fn write(dev: &MemDevice, d: &RunDescriptor, a: &Ack, at: u64, sectors: Option<u32>) {
    let key = RunKey::new(d.run_id);
    let mut buf = vec![0u8; a.record.len_bytes() as usize];
    fill_record(&mut buf, &key, d.run_id, &a.record);
    let n = sectors.map_or(buf.len(), |s| s as usize * SECTOR);
    dev.write_at(&buf[..n], at).unwrap();
}

fn ack(stream: u16, seq: u64, offset: u64, sectors: u32) -> Ack {
    let record = RecordId {
        stream,
        seq,
        offset,
        sectors,
        write_time_ns: 1_000_000 + seq * 1000 + stream as u64,
    };
    Ack {
        record,
        flushed_ns: record.write_time_ns + 500,
    }
}

/// The whole run's report, or why there is none.
fn whole_run(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    t: Duration,
    scan_region: bool,
) -> Result<Scaled, String> {
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        verify_streamed(dev, d, acks, t, scan_region, &|_, _| {})
    }));
    match got {
        Ok(r) => r.map_err(|e| format!("refused: {e}")),
        Err(p) => Err(format!(
            "panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// A device of `mem` whose reads covering `at` take `ms` each.
fn slow_at(mem: Arc<MemDevice>, slow: Vec<(u64, u64)>) -> Arc<dyn Device> {
    Arc::new(ReadHook {
        inner: mem,
        before: move |len: usize, off: u64| {
            for &(at, ms) in &slow {
                if off <= at && at < off + len as u64 {
                    std::thread::sleep(Duration::from_millis(ms));
                }
            }
            Ok(())
        },
    })
}

/// A budget whose room per part is `live` live records.
fn budget_for(live: u64) -> Budget {
    Budget {
        memory_bytes: plan::FIXED_BYTES + live * plan::LIVE_RECORD_BYTES,
        work_dir: None,
    }
}

#[path = "attack_tests/device_end.rs"]
mod device_end;
#[path = "attack_tests/elsewhere.rs"]
mod elsewhere;
#[path = "attack_tests/explore.rs"]
mod explore;
#[path = "attack_tests/memory.rs"]
mod memory;
#[path = "attack_tests/more.rs"]
mod more;
#[path = "attack_tests/reads.rs"]
mod reads;
