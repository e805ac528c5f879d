//! What a part holds in memory against what its budget pays for.

use super::*;

/// The live records part `k` holds when judged as a group of its own: its acks painted
/// exactly as `judge_in_parts` paints a group's (its work file, the acks it wants, the
/// slot table then the map).
fn live_in_part(d: &RunDescriptor, acks: &[Ack], plan: &Plan, k: u64) -> usize {
    use crate::verify::paint::Paint;
    use crate::verify::slots::SlotTable;
    let dir = std::env::temp_dir();
    let spilled = spill::spill_acks(d, &acks.to_vec(), plan, &dir).unwrap();
    let owned = (
        if k == 0 { 0 } else { plan.start_of(k) },
        if k + 1 == plan.parts {
            u64::MAX
        } else {
            plan.start_of(k + 1)
        },
    );
    let until = spilled.ends[k as usize];
    let slots = SlotTable::with_free_slots(plan.table_base(k), plan.slots + 3);
    let mut paint = Paint::new(Some(slots));
    let reader = spilled.segments[k as usize].reader(&spilled.files[k as usize], false);
    let mut m = merge::Merged::new(vec![reader]).unwrap();
    while let Some((idx, a, _)) = m.next_entry().unwrap() {
        if a.record.offset < owned.0 || a.record.offset < until {
            paint.paint(idx, &a);
        }
    }
    paint.live().acks.len()
}

/// The parts' memory stays within the budget: `group_parts` counts a group's live
/// records as its parts' and those it paints across its edges (`Plan::edge_live`). Records placed at random, up to 1 MiB long, a budget whose
/// room is one part of 2 MiB (4,096 sectors, each live at most once). The part's own
/// 512 B records fill it (4,096 live), but a group also paints the records reaching in
/// from the part before and those starting after it up to its furthest record's end
/// (`wanted` in `judge_in_parts`): 2,047 records of 1 MiB reaching in, staggered a
/// sector apart, each live by its first sector before the edge, and as many starting
/// after the part's end. The group holds twice its room; the excess grows with
/// `record_bytes_max` (2 * max / 512 records each side: 64 MiB records, 256 K live
/// records, 40 MiB over), not with the part.
#[test]
fn attack_records_reaching_across_a_part_s_edges_overflow_its_room() {
    let d = descriptor(RunId([0x4e; 16]), 0, 8 * MIB, 512, MIB);
    // Room for one part of 2 MiB (4,096 sectors) and the records a part paints across
    // its edges (`Plan::edge_live`: 2 MiB of 1 MiB records' reach, a sector each).
    let plan = Plan::new(&d, &budget_for(8192), true).unwrap();
    assert_eq!(
        (plan.width, plan.room, plan.live_most, plan.edge_live),
        (2 * MIB, 8192, 4096, 4096)
    );
    let (edge, end) = (plan.start_of(1), plan.start_of(2));
    let mut acks = vec![];
    let mut seq = 0;
    let mut push = |offset: u64, sectors: u32| {
        seq += 1;
        acks.push(ack(0, seq, offset, sectors));
    };
    let long = (MIB / S) as u32;
    for i in 1..2048 {
        push(edge - MIB + i * S, long);
    }
    for j in 0..(end - edge) / S {
        push(edge + j * S, 1);
    }
    push(end - S, long);
    for j in 1..2047 {
        push(end + j * S, long);
    }
    assert_eq!(crate::witness::validate::check_run(&d, &acks), Ok(None));
    let live = live_in_part(&d, &acks, &plan, 1);
    assert!(
        live as u64 <= plan.room,
        "{live} live records in a part of room {} (live_most {})",
        plan.room,
        plan.live_most
    );
}

/// Once broke: the memory stays within the budget whatever the run's settings claim
/// (`plan::live_grain` trusts "sequential" to mean a ring, one live record per record;
/// nothing checks it, `witness::validate` accepts the log below). 4 KiB records 512 B
/// apart, each later one over the one before, each live by its first sector: 8 times the
/// live records the settings allow. A budget the settings fit whole: the whole run's
/// first pass outgrows it, stops, and the run is judged in parts planned for a live
/// record a sector, with the report a large budget gives.
#[test]
fn attack_sequential_placement_off_its_grid_is_judged_within_the_budget() {
    use crate::verify::engine::{OUTGREW, verify_streamed_run};
    use std::sync::atomic::Ordering::SeqCst;
    let mut d = descriptor(RunId([0x3d; 16]), 0, 4 * MIB, 4096, 4096);
    d.settings.placement = "sequential".into();
    let acks: Vec<Ack> = (0..(4 * MIB - 4096) / S)
        .map(|i| ack(0, i + 1, i * S, 8))
        .collect();
    assert_eq!(crate::witness::validate::check_run(&d, &acks), Ok(None));
    let mem = Arc::new(MemDevice::new((5 * MIB) as usize));
    for a in &acks {
        write(&mem, &d, a, a.record.offset, None);
    }
    let slots = d.settings.region_bytes / 4096;
    let tight = Budget {
        memory_bytes: plan::FIXED_BYTES
            + plan::EARLY_READ_BYTES
            + slots * plan::WHOLE_GRID_LIVE_RECORD_BYTES,
        work_dir: None,
    };
    assert!(whole_run_fits(&d, Some(acks.len() as u64), &tight));
    let t = Duration::from_secs(10);
    let judge = |b: &Budget| {
        let run = scan::ScanRun::from(&d);
        verify_streamed_run(mem.clone(), &d, run, &acks, t, false, &|_, _| {}, b).unwrap()
    };
    let want = judge(&Budget::default());
    // Judged whole by the settings, and in parts by them (a room of 5,000 live records:
    // one part of 18 MiB by the settings, two of 2 MiB planned for a record a sector).
    for b in [tight, budget_for(5000)] {
        let before = OUTGREW.load(SeqCst);
        let got = judge(&b);
        assert!(
            OUTGREW.load(SeqCst) > before,
            "{b:?}: the records were kept"
        );
        assert_eq!(
            without_time(&got.report),
            without_time(&want.report),
            "{b:?}"
        );
    }
}
