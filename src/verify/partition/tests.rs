//! A run judged in parts must give the whole run's report: the same counts, findings,
//! loss window and verdict, whatever the parts' size and however the records fall
//! across their edges.

use super::plan::{FIXED_BYTES, LIVE_RECORD_BYTES};
use super::*;
use crate::verify::engine::verify_streamed;
use crate::verify::scale_tests::{REGION, Shape, random_shaped_run, reference, without_time};

/// The plain words' sentence that depends on the bytes read.
const SCAN_REGION_HINT: &str = " A lost write may have been written elsewhere on the drive: verify --scan-region reads the whole region to find writes put in the wrong place.";

fn in_parts(
    dev: Arc<dyn Device>,
    d: &RunDescriptor,
    acks: &Vec<Ack>,
    scan_region: bool,
    parts: u64,
    align: u64,
    room: u64,
) -> Scaled {
    let plan = Plan::with_parts(d, parts, align, room);
    let t = Duration::from_secs(10);
    let run = scan::ScanRun::from(d);
    let dir = std::env::temp_dir();
    judge_in_parts(dev, d, run, acks, t, scan_region, &|_, _| {}, &plan, &dir).unwrap()
}

#[test]
fn parts_judge_as_the_whole_run_does() {
    let t = Duration::from_secs(10);
    let (mut failing, mut compared) = (0, 0);
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
        let (d, acks, dev) = random_shaped_run(seed, n, shape);
        let scan_region = seed % 4 == 1;
        let whole = verify_streamed(dev.clone(), &d, &acks, t, scan_region, &|_, _| {}).unwrap();
        let want = reference::judge(dev.as_ref(), &d, &acks, scan_region);
        assert_eq!(reference::observed(&whole.report), want, "seed {seed}");
        failing += (want.verdict == crate::model::Verdict::Fail) as u32;
        // Parts of one sector to the whole region; on the records' grid and off it;
        // groups of one part and of many.
        for (parts, align, room) in [
            (1, 512, 1 << 20),
            (2, 512, 1),
            (7, 512, 1),
            (16, 4096, 3),
            (REGION / 512, 512, 1),
            (5, 1536, 1 << 20),
        ] {
            let got = in_parts(dev.clone(), &d, &acks, scan_region, parts, align, room);
            // Each part reads its own span, whole blocks at its edges: the bytes read
            // differ, nothing else may.
            // So does the plain words' pointer to --scan-region, given when less than the
            // region was read (`Report::region_unread`).
            let (mut got, mut want) = (without_time(&got.report), without_time(&whole.report));
            for r in [&mut got, &mut want] {
                let o = r.as_object_mut().unwrap();
                o.remove("bytes_read");
                let plain = o["plain"].as_str().unwrap().replace(SCAN_REGION_HINT, "");
                o.insert("plain".into(), plain.into());
            }
            assert_eq!(
                got, want,
                "seed {seed}, {parts} parts on {align}, room {room}"
            );
            compared += 1;
        }
    }
    assert!(failing > 10, "{failing}");
    assert!(compared > 200);
}

/// Every part is read: a lost record in the last part is found, and the reads cover
/// the records' bytes, not more than a part's width beyond.
#[test]
fn every_part_is_read_once() {
    let shape = Shape::Uniform {
        sectors: 1,
        base: 0,
        odd: None,
    };
    let (d, acks, mem) = random_shaped_run(0, 3 * 128, shape);
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = read.clone();
    let dev = Arc::new(crate::device::mem::ReadHook {
        inner: mem.clone(),
        before: move |len, _| {
            counter.fetch_add(len as u64, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        },
    });
    let got = in_parts(dev, &d, &acks, false, 8, 512, 1);
    let want = reference::judge(mem.as_ref(), &d, &acks, false);
    assert_eq!(reference::observed(&got.report), want);
    let read = read.load(std::sync::atomic::Ordering::SeqCst);
    assert!((REGION..=REGION + REGION / 4).contains(&read), "{read}");
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
    let plan = Plan::new(&d, &b).unwrap();
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
    match Plan::new(&d, &b) {
        Err(VerifyError::MemoryTooSmall { needed, .. }) => assert!(needed > b.memory_bytes),
        _ => panic!("planned a region that does not fit"),
    }
}
