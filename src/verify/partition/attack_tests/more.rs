//! More attacks on a hung read's accounting (`judge::TimedOut`) and on the bound on
//! records named as found away from home (`scan::elsewhere::MAX_NAMED`): the whole run
//! and the parts must agree, and the report must hold together.

use super::*;
use crate::verify::report::MAX_FINDINGS;
use crate::verify::scan::elsewhere::MAX_NAMED;

/// A device of `mem` whose reads covering `at` sleep `ms` (a read that hangs).
fn hangs_at(mem: Arc<MemDevice>, at: u64, ms: u64) -> Arc<dyn Device> {
    slow_at(mem, vec![(at, ms)])
}

/// What a report's counts add up to, and its timeline's.
fn sums(r: &crate::verify::report::Report) -> (u64, u64) {
    let counts = r.counts.values().sum();
    let timeline = r.ack_timeline.iter().flat_map(|b| b.counts.values()).sum();
    (counts, timeline)
}

/// A read that hangs at 4 MiB of a 16 MiB region, after more than `MAX_FINDINGS`
/// records (first in ack order) that lie past it, then one record before it that the
/// drive lost and one it kept. The FAIL stands on the lost record that was read; the
/// records left unread leave every count. The report must still hold together: its
/// counts and timeline add up to the acks minus those left unread, the loss window is
/// the one read record, and the findings name it. The findings were the first
/// `MAX_FINDINGS` failures in ack order (all unread) with the unread then taken out
/// (`TimedOut::leave_out_the_unread`), so a FAIL names no record at all.
#[test]
fn attack_a_hang_after_many_unread_failures_leaves_a_fail_with_its_loss_named() {
    let d = descriptor(RunId([0x51; 16]), 0, 16 * MIB, 512, 512);
    let mem = Arc::new(MemDevice::new((16 * MIB) as usize));
    let hang_at = 4 * MIB;
    let unread = MAX_FINDINGS as u64 + 1;
    let mut acks: Vec<Ack> = (0..unread)
        .map(|k| ack(0, k + 1, hang_at + k * S, 1))
        .collect();
    acks.push(ack(1, 1, 0, 1)); // lost, read
    acks.push(ack(1, 2, S, 1)); // kept, read
    write(&mem, &d, &acks[acks.len() - 1], S, None);
    let t = Duration::from_millis(300);
    let whole = whole_run(hangs_at(mem.clone(), hang_at, 3000), &d, &acks, t, false)
        .unwrap()
        .report;
    let plan = Plan::with_parts(&d, 4, 512, 1);
    let parts = in_parts(hangs_at(mem, hang_at, 3000), &d, &acks, false, plan, t).report;
    assert_eq!(without_time(&parts), without_time(&whole));
    let r = &whole;
    assert_eq!(r.verdict, crate::model::Verdict::Fail, "{}", r.summary);
    let to = r.facts.read_timeout.as_ref().expect("the read hung");
    assert_eq!(to.unread, unread);
    assert_eq!(
        sums(r),
        (r.acked_records - unread, r.acked_records - unread)
    );
    assert_eq!(r.counts["lost"], 1, "{:?}", r.counts);
    assert_eq!(r.loss_window.as_ref().map(|w| w.records), Some(1));
    assert!(
        r.findings.iter().any(|f| f.offset == 0),
        "a FAIL on one lost record names none: findings {:?}, truncated {}, plain: {}",
        r.findings,
        r.findings_truncated,
        r.plain
    );
}

/// A hang early in a large run with failures on both sides of it and some records
/// wholly rewritten after it (superseded, not failures: they stay counted). Whole and
/// parts agree, every count holds together: counts and timeline add up to the acks
/// minus those left unread, the ordering holes are no more than the failures, and the
/// loss window is the failures read.
#[test]
fn attack_a_hang_early_in_a_large_run_keeps_its_counts_consistent() {
    let d = descriptor(RunId([0x52; 16]), 0, 32 * MIB, 512, 4096);
    let mem = Arc::new(MemDevice::new((32 * MIB) as usize));
    let hang_at = 2 * MIB + 4096;
    let mut acks = vec![];
    let mut seq = [0u64; 2];
    let mut push = |stream: u16, offset: u64, sectors: u32| {
        seq[stream as usize] += 1;
        let a = ack(stream, seq[stream as usize], offset, sectors);
        acks.push(a);
        a
    };
    let mut kept = vec![];
    for k in 0..4096u64 {
        // Stream 0 before the hang, stream 1 after it, interleaved in ack order.
        let before = push(0, (k * 8 * S) % (2 * MIB), 8);
        let after = push(1, hang_at + k * 8 * S, 8);
        if k % 3 == 0 {
            kept.push(before);
        }
        if k % 5 == 0 {
            kept.push(after);
        }
    }
    // A few records rewritten past the hang (superseded), and a kept one at the end.
    for k in 0..64u64 {
        push(1, hang_at + k * 8 * S, 8);
    }
    let last = push(0, 0, 8);
    kept.push(last);
    for a in &kept {
        write(&mem, &d, a, a.record.offset, None);
    }
    let t = Duration::from_millis(300);
    let whole = whole_run(hangs_at(mem.clone(), hang_at, 3000), &d, &acks, t, false)
        .unwrap()
        .report;
    let plan = Plan::with_parts(&d, 8, 4096, 1);
    let parts = in_parts(hangs_at(mem, hang_at, 3000), &d, &acks, false, plan, t).report;
    assert_eq!(without_time(&parts), without_time(&whole));
    let r = &whole;
    let to = r.facts.read_timeout.as_ref().expect("the read hung");
    assert_eq!(r.verdict, crate::model::Verdict::Fail, "{}", r.summary);
    assert!(to.unread > 0 && to.unread <= r.acked_records);
    assert_eq!(
        sums(r),
        (r.acked_records - to.unread, r.acked_records - to.unread)
    );
    let failing: u64 = r
        .counts
        .iter()
        .filter(|(name, _)| !["intact", "superseded"].contains(name))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(r.facts.failing, failing, "{:?}", r.counts);
    assert_eq!(r.loss_window.as_ref().map(|w| w.records), Some(failing));
    assert!(r.ordering_holes.count <= failing);
    assert!(r.counts["superseded"] >= 64, "{:?}", r.counts);
    assert!(!r.plain.is_empty());
}

/// Records misplaced far away (each record written at the home of the record half the
/// ring away, in another part), one past the bound: none named, the whole run and
/// parts agree; one fewer: every one named, at the place it was written.
#[test]
fn attack_misplaced_into_another_part_at_the_bound() {
    let t = Duration::from_secs(10);
    for (n, too_many) in [(MAX_NAMED as u64, false), (MAX_NAMED as u64 + 1, true)] {
        let d = descriptor(RunId([0x53; 16]), 0, n * S, 512, 512);
        let mem = Arc::new(MemDevice::new((n * S) as usize));
        let acks: Vec<Ack> = (0..n).map(|k| ack(0, k + 1, k * S, 1)).collect();
        let away = |k: u64| ((k + n / 2) % n) * S;
        for (k, a) in acks.iter().enumerate() {
            write(&mem, &d, a, away(k as u64), None);
        }
        let whole = whole_run(mem.clone(), &d, &acks, t, false).unwrap().report;
        assert_eq!(whole.too_many_found_elsewhere, too_many, "{n}");
        assert_eq!(whole.counts["misdirected"], n, "{n}: {:?}", whole.counts);
        if !too_many {
            let f = &whole.findings[7];
            assert_eq!(f.found_at, Some(away(f.seq - 1)), "{f:?}");
        }
        let plan = Plan::with_parts(&d, 3, 512, 1);
        let parts = in_parts(mem, &d, &acks, false, plan, t).report;
        assert_eq!(without_time(&parts), without_time(&whole), "{n}");
    }
}

/// A record of part 0 lost at home but written whole in the middle of the region,
/// where no record of the run is live (parts 1 and 2 hold none): the whole run reads its
/// span whole and finds it (misdirected); the parts must find it too, not call it lost.
#[test]
fn attack_a_record_misplaced_into_a_part_with_no_records() {
    let d = descriptor(RunId([0x54; 16]), 0, 16 * MIB, 4096, 4096);
    let mem = Arc::new(MemDevice::new((16 * MIB) as usize));
    let mut acks: Vec<Ack> = (0..16u64).map(|k| ack(0, k + 1, k * 4096, 8)).collect();
    acks.extend((0..16u64).map(|k| ack(1, k + 1, 16 * MIB - (k + 1) * 4096, 8)));
    for (i, a) in acks.iter().enumerate() {
        let at = if i == 5 {
            8 * MIB + 4096
        } else {
            a.record.offset
        };
        write(&mem, &d, a, at, None);
    }
    let t = Duration::from_secs(10);
    for stream in [&Unhinted(&acks) as &dyn AckPasses, &Loose(&acks), &acks] {
        let whole = whole_run(mem.clone(), &d, stream, t, false).unwrap().report;
        let plan = Plan::with_parts(&d, 4, 4096, 1);
        let parts = in_parts(mem.clone(), &d, stream, false, plan, t).report;
        assert_eq!(without_time(&parts), without_time(&whole));
        assert_eq!(whole.counts["lost"] + whole.counts["misdirected"], 1);
    }
}

/// Records lost at home and written whole in an unused second half of the region, read
/// with the region scan: at the bound each is misdirected and the plain words say the
/// drive put data in the wrong place; one past it, every one counts as lost and the
/// words must still say (or the report's text say that so many were found away from
/// home that none is named), not describe a drive that merely dropped writes.
#[test]
fn attack_past_the_bound_the_words_still_say_writes_went_to_the_wrong_place() {
    let t = Duration::from_secs(10);
    for n in [MAX_NAMED as u64, MAX_NAMED as u64 + 1] {
        let d = descriptor(RunId([0x55; 16]), 0, 2 * n * S, 512, 512);
        let mem = Arc::new(MemDevice::new((2 * n * S) as usize));
        let acks: Vec<Ack> = (0..n).map(|k| ack(0, k + 1, k * S, 1)).collect();
        for a in &acks {
            write(&mem, &d, a, a.record.offset + n * S, None);
        }
        let r = whole_run(mem, &d, &acks, t, true).unwrap().report;
        assert_eq!(r.verdict, crate::model::Verdict::Fail);
        let words = format!("{} {}", r.summary, r.plain);
        assert!(
            words.contains("wrong place") || words.contains("away from"),
            "{n} records written away from home, too_many_found_elsewhere {}, counts {:?}: {words}",
            r.too_many_found_elsewhere,
            r.counts
        );
    }
}
