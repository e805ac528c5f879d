//! A run judged in parts must give the whole run's report: the same counts, findings,
//! loss window and verdict, whatever the parts' size and however the records fall
//! across their edges.

use super::plan::{FIXED_BYTES, LIVE_RECORD_BYTES};
use super::*;
use crate::device::mem::MemDevice;
use crate::verify::engine::verify_streamed;
use crate::verify::scale_tests::{
    Shape, random_shaped_run, random_shaped_run_at, reference, without_time,
};

pub(super) fn in_parts(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    acks: &dyn AckPasses,
    scan_region: bool,
    plan: Plan,
    read_timeout: Duration,
) -> Scaled {
    let run = scan::ScanRun::from(d);
    let dir = std::env::temp_dir();
    let p = &|_, _| {};
    judge_in_parts(dev, d, run, acks, read_timeout, scan_region, p, &plan, &dir).unwrap()
}

/// Acks that cannot tell their count before a pass (a stream): the run reads its span
/// whole, however few they are.
pub(super) struct Unhinted<'a>(pub(super) &'a [Ack]);

impl AckPasses for Unhinted<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), VerifyError> {
        sink(self.0);
        Ok(())
    }
}

/// Acks that bound their count before a pass loosely, as a log file's size does.
pub(super) struct Loose<'a>(pub(super) &'a [Ack]);

impl AckPasses for Loose<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), VerifyError> {
        sink(self.0);
        Ok(())
    }
    fn ack_count_hint(&self) -> Option<u64> {
        Some(self.0.len() as u64 * 100)
    }
}

/// Small random runs whose region has an edge of the read grid inside it, at a
/// different place for each seed, cut in two parts there: each part judged alone or
/// both together, on the records' grid or off it, the report is the whole run's to the
/// byte (the bytes read included).
#[test]
fn parts_judge_as_the_whole_run_does() {
    let t = Duration::from_secs(10);
    let (mut failing, mut compared, mut across) = (0, 0, 0);
    for seed in 0..48u64 {
        let n = [3, 40, 200, 600][seed as usize % 4];
        let shape = match seed % 3 {
            0 => Shape::Mixed,
            1 => Shape::Uniform {
                sectors: 1,
                base: 0,
                odd: None,
            },
            _ => Shape::Uniform {
                sectors: 8,
                base: 4096,
                odd: (seed % 2 == 0).then_some(n / 2),
            },
        };
        // The grid's edge at 512 B to 60 KiB into the region.
        let edge_at = 512 * (1 + (seed * 37) % 120);
        let shift = scan::GRID_BYTES - edge_at;
        let (d, acks, dev) = random_shaped_run_at(seed, n, shape, shift);
        let edge = scan::GRID_BYTES;
        across += acks
            .iter()
            .filter(|a| a.record.offset < edge && a.record.end() > edge)
            .count();
        let scan_region = seed % 4 == 1;
        let whole = verify_streamed(dev.clone(), &d, &acks, t, scan_region, &|_, _| {}).unwrap();
        let want = reference::judge(dev.as_ref(), &d, &acks, scan_region);
        assert_eq!(reference::observed(&whole.report), want, "seed {seed}");
        failing += (want.verdict == crate::model::Verdict::Fail) as u32;
        for (align, room) in [(512, 1), (512, 1 << 20), (4096, 1), (1536, 1)] {
            let plan = Plan::with_parts(&d, 2, align, room);
            let got = in_parts(dev.clone(), &d, &acks, scan_region, plan, t);
            assert_eq!(
                without_time(&got.report),
                without_time(&whole.report),
                "seed {seed}, parts on {align}, room {room}"
            );
            compared += 1;
        }
    }
    assert!(failing > 10, "{failing}");
    assert!(compared > 150);
    assert!(across > 20, "only {across} records across the edge");
}

/// What a drive can do to a run besides losing records, placed where parts meet.
struct Faults {
    /// Sectors whose reads fail.
    bad: Vec<u64>,
    /// A byte whose read hangs.
    hang_at: Option<u64>,
}

const EDGY_REGION: (u64, u64) = (1 << 20, 7 << 20);

/// A run over six MiB that three edges of the read grid cut (at 2, 4 and 6 MiB), its
/// records crowded around them: lost, torn, flipped, and some written away from their
/// home (a misdirected write) into the gaps near the edges; bad sectors on records
/// across an edge; for some seeds, a read that hangs.
fn edgy_run(seed: u64, n: usize) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>, Faults) {
    use crate::record::{RecordId, RunId, RunKey, fill_record};
    let mut rng = crate::rng::Rng::new(seed);
    let id = RunId([seed as u8 | 0x41; 16]);
    let key = RunKey::new(id);
    let mut d = crate::wire::msg::tests::sample_descriptor(0);
    d.run_id = id;
    d.format_version = crate::record::FORMAT_VERSION;
    let (lo, hi) = EDGY_REGION;
    d.settings.region_offset = lo;
    d.settings.region_bytes = hi - lo;
    d.settings.streams = 2;
    d.settings.placement = "random".into();
    let one_size = seed % 2 == 0;
    d.settings.record_bytes_min = if one_size { 4096 } else { 512 };
    d.settings.record_bytes_max = if one_size { 4096 } else { 8192 };
    let dev = Arc::new(MemDevice::new((hi + (1 << 20)) as usize));
    let grid = scan::GRID_BYTES;
    let near_an_edge = |rng: &mut crate::rng::Rng, len: u64, step: u64| {
        let edge = grid * (1 + rng.next_u64() % 3);
        let at = edge - (300 << 10) + rng.next_u64() % (600 << 10);
        (at / step * step).clamp(lo, hi - len)
    };
    let mut seqs = [0u64; 2];
    let mut acks = vec![];
    let mut bad = vec![];
    for i in 0..n {
        let stream = (rng.next_u64() % 2) as u16;
        seqs[stream as usize] += 1;
        let sectors = if one_size {
            8
        } else {
            1 + (rng.next_u64() % 16) as u32
        };
        let len = sectors as u64 * SECTOR as u64;
        let step = if one_size { 4096 } else { SECTOR as u64 };
        let offset = near_an_edge(&mut rng, len, step);
        let record = RecordId {
            stream,
            seq: seqs[stream as usize],
            offset,
            sectors,
            write_time_ns: 1_000_000 + i as u64 * 1000,
        };
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 500,
        });
        let mut buf = vec![0u8; len as usize];
        fill_record(&mut buf, &key, id, &record);
        match rng.next_u64() % 10 {
            0 => {}
            1 => dev.write_at(&buf[..SECTOR], offset).unwrap(),
            2 => {
                buf[len as usize - 3] ^= 1;
                dev.write_at(&buf, offset).unwrap();
            }
            3 => {
                let elsewhere = near_an_edge(&mut rng, len, SECTOR as u64);
                dev.write_at(&buf, elsewhere).unwrap();
            }
            _ => dev.write_at(&buf, offset).unwrap(),
        }
        let edge = (offset + len) / grid * grid;
        if edge > offset && rng.next_u64() % 8 == 0 {
            bad.push(edge);
        }
    }
    bad.push(lo + rng.next_u64() % (hi - lo) / SECTOR as u64 * SECTOR as u64);
    let hang_at = (seed % 4 == 3).then(|| near_an_edge(&mut rng, 0, SECTOR as u64));
    (d, acks, dev, Faults { bad, hang_at })
}

fn faulty(mem: Arc<MemDevice>, f: &Faults) -> Arc<dyn Device> {
    let (bad, hang_at) = (f.bad.clone(), f.hang_at);
    Arc::new(crate::device::mem::ReadHook {
        inner: mem,
        before: move |len: usize, off: u64| {
            let here = |p: u64| off <= p && p < off + len as u64;
            if hang_at.is_some_and(here) {
                std::thread::sleep(Duration::from_millis(1500));
            }
            match bad.iter().any(|&b| here(b)) {
                true => Err(std::io::Error::other("bad sector")),
                false => Ok(()),
            }
        },
    })
}

/// Whatever the drive did where parts meet (a misdirected copy in a gap between two
/// parts' records, a bad sector in a record across an edge, a read that hangs in a
/// later part), in dense runs and sparse ones, the parts report what the whole run
/// reports, the bytes read, the unreadable ranges and the hang included.
#[test]
fn parts_judge_faults_at_their_edges_as_the_whole_run_does() {
    let t = Duration::from_millis(500);
    let (mut misdirected, mut unreadable, mut hung, mut sparse) = (0, 0, 0, 0);
    for seed in 0..16u64 {
        let n = [60, 150, 1500][seed as usize % 3];
        let (d, acks, mem, faults) = edgy_run(seed, n);
        let dev = faulty(mem, &faults);
        let scan_region = seed % 5 == 4;
        let (unhinted, loose) = (Unhinted(&acks), Loose(&acks));
        let passes: &dyn AckPasses = match seed % 6 {
            1 => &unhinted,
            2 | 3 => &loose,
            _ => &acks,
        };
        let counted = acks.len() as u64;
        sparse += (scan::reads_of_run(&d, passes.ack_count_hint(), counted, scan_region)
            == scan::Reads::Records) as u32;
        let whole = verify_streamed(dev.clone(), &d, passes, t, scan_region, &|_, _| {}).unwrap();
        let r = &whole.report;
        misdirected += r.counts.get("misdirected").copied().unwrap_or(0);
        unreadable += r.unreadable_ranges.len();
        hung += r
            .unreadable_ranges
            .iter()
            .any(|u| u.2.contains("did not complete")) as u32;
        for room in [1, 1 << 20] {
            let plan = Plan::with_parts(&d, 4, 512, room);
            assert_eq!(plan.parts, 4, "{plan:?}");
            let got = in_parts(dev.clone(), &d, passes, scan_region, plan, t);
            assert_eq!(
                without_time(&got.report),
                without_time(&whole.report),
                "seed {seed}, room {room}"
            );
        }
    }
    assert!(misdirected > 5, "{misdirected} misdirected");
    assert!(unreadable > 10, "{unreadable} unreadable ranges");
    assert!(hung >= 2, "{hung} hung");
    assert!((4..16).contains(&sparse), "{sparse} sparse");
}

/// A record that reaches into a part owning no ack of its own is judged there too:
/// its sectors past the edge are read and count, as in the whole run.
#[test]
fn a_record_reaching_into_a_part_that_owns_no_ack_is_judged_there() {
    use crate::record::{RecordId, RunKey, fill_record};
    let (d, _, mem, _) = edgy_run(7, 0);
    let key = RunKey::new(d.run_id);
    // Parts of 2 MiB: the one from this edge owns nothing.
    let edge = scan::GRID_BYTES;
    let mut acks = vec![];
    for (seq, offset, sectors, written) in [
        (1, edge - 1024, 8u32, 4usize),
        (2, edge - 8192, 2, 2),
        (3, 5 * scan::GRID_BYTES / 2, 4, 4),
    ] {
        let record = RecordId {
            stream: 0,
            seq,
            offset,
            sectors,
            write_time_ns: 1_000_000 + seq * 1000,
        };
        acks.push(Ack {
            record,
            flushed_ns: record.write_time_ns + 500,
        });
        let mut buf = vec![0u8; sectors as usize * SECTOR];
        fill_record(&mut buf, &key, d.run_id, &record);
        // The first record torn at the edge: its sectors past it are what it lost.
        mem.write_at(&buf[..written * SECTOR], offset).unwrap();
    }
    let t = Duration::from_secs(10);
    let whole = verify_streamed(mem.clone(), &d, &acks, t, false, &|_, _| {}).unwrap();
    assert_eq!(
        whole.report.counts.get("shorn"),
        Some(&1),
        "{:?}",
        whole.report.counts
    );
    for room in [1, 1 << 20] {
        let got = in_parts(
            mem.clone(),
            &d,
            &acks,
            false,
            Plan::with_parts(&d, 4, 512, room),
            t,
        );
        assert_eq!(
            without_time(&got.report),
            without_time(&whole.report),
            "room {room}"
        );
    }
}

/// Every part is read, each byte once: the device is asked for what the report says was
/// read, as much as the whole run reads.
#[test]
fn every_part_is_read_once() {
    let (d, acks, mem, _) = edgy_run(5, 1500);
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = read.clone();
    let dev = Arc::new(crate::device::mem::ReadHook {
        inner: mem.clone(),
        before: move |len, _| {
            counter.fetch_add(len as u64, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        },
    });
    let t = Duration::from_secs(10);
    let got = in_parts(dev, &d, &acks, false, Plan::with_parts(&d, 4, 512, 1), t);
    let want = reference::judge(mem.as_ref(), &d, &acks, false);
    assert_eq!(reference::observed(&got.report), want);
    let read = read.load(std::sync::atomic::Ordering::SeqCst);
    let whole = verify_streamed(mem, &d, &acks, t, false, &|_, _| {}).unwrap();
    assert_eq!(read, got.report.bytes_read);
    assert_eq!(read, whole.report.bytes_read);
}

/// Records placed at random may overlap a sector apart, each live by one sector: the
/// bound on live records (what decides whether a run fits the budget whole, and how many
/// parts it takes) counts a sector each, not a record each; a ring of one size, a record
/// each.
#[test]
fn live_records_are_bounded_by_what_placement_allows() {
    let (mut d, _, _) = random_shaped_run(1, 1, Shape::Mixed);
    d.settings.record_bytes_min = 4096;
    d.settings.record_bytes_max = 4096;
    d.settings.region_bytes = 4 << 30;
    d.settings.placement = "random".into();
    assert_eq!(live_at_most(&d, None), (4 << 30) / 512);
    assert_eq!(live_at_most(&d, Some(1000)), 1000);
    d.settings.placement = "sequential".into();
    assert_eq!(live_at_most(&d, None), (4 << 30) / 4096);
    // 3 M acks of 4 KiB fit 512 MiB whole as a ring (100 B each), not placed at random
    // (a map piece, 160 B, each).
    let b = Budget::default();
    assert!(whole_run_fits(&d, Some(3 << 20), &b));
    d.settings.placement = "random".into();
    assert!(!whole_run_fits(&d, Some(3 << 20), &b));
}

/// The plan never cuts a record of the run's one size in two, and every ack's own part
/// is among the parts whose file holds it.
#[test]
fn parts_follow_the_records() {
    let (mut d, _, _) = random_shaped_run(1, 1, Shape::Mixed);
    d.settings.record_bytes_min = 4096;
    d.settings.record_bytes_max = 4096;
    d.settings.region_bytes = 10 << 30;
    let b = Budget {
        memory_bytes: 128 << 20,
        work_dir: None,
    };
    let plan = Plan::new(&d, &b, true).unwrap();
    assert!(plan.parts > 1);
    assert_eq!(plan.width % 4096, 0);
    assert!(plan.slots * LIVE_RECORD_BYTES + FIXED_BYTES <= b.memory_bytes);
    for off in [
        0,
        4096,
        plan.width - 4096,
        plan.width,
        3 * plan.width + 8192,
    ] {
        let at = d.settings.region_offset + off;
        let parts = plan.parts_of(at, at + 4096);
        assert!(parts.contains(&plan.part_of(at)));
    }
    // Too little memory for even MAX_PARTS parts: refused with what it needs.
    d.settings.region_bytes = 1 << 50;
    match Plan::new(&d, &b, true) {
        Err(VerifyError::MemoryTooSmall { needed, .. }) => assert!(needed > b.memory_bytes),
        _ => panic!("planned a region that does not fit"),
    }
}
