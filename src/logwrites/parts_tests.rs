//! Judged in parts against judged whole, on the random logs of `differential_tests`
//! over regions wide enough to cut: the same points (entry, acks, failed, intact,
//! verdict, expectation), the same acks never made durable (and the first of them), the
//! same unacked sectors and acks made durable, and the same disagreements.

use super::differential_tests::{descriptor_over, random_log_over};
use super::format::LogReader;
use super::image::ScratchImage;
use super::parts::{AckStream, judge_in_parts, survey};
use super::replay::{MainPass, PassOptions, main_pass};
use crate::model::{Ack, RunDescriptor, RunLog, Verdict};
use std::io::Cursor;
use std::time::Duration;

/// The acks streamed in batches of 7, as an ack file's frames give them.
fn streamer<'a>(d: &'a RunDescriptor, acks: &'a [Ack]) -> Box<AckStream<'a>> {
    Box::new(move |sink: &mut dyn FnMut(&[Ack])| {
        for batch in acks.chunks(7) {
            sink(batch);
        }
        Ok(RunLog {
            files: Default::default(),
            descriptor: d.clone(),
            acks: vec![],
            events: vec![],
        })
    })
}

type PointKey = (u64, u32, Verdict, Verdict, u32, u32);

/// What must be the same whole and in parts.
fn key(
    p: &MainPass,
    acks_durable: usize,
) -> (Vec<PointKey>, usize, Option<Ack>, u64, usize, usize) {
    (
        p.points
            .iter()
            .map(|x| (x.entry, x.acks, x.expected, x.verdict, x.failed, x.intact))
            .collect(),
        p.never_durable,
        p.first_never_durable,
        p.unacked_sectors,
        acks_durable,
        p.points.iter().filter(|x| x.verdict != x.expected).count(),
    )
}

/// Judges `log` whole, then in the smallest parts its pieces allow: (whole, parts,
/// how many parts).
fn both(log: &[u8], acks: &[Ack], region: u64) -> (MainPass, MainPass, usize, usize) {
    let d = descriptor_over(region);
    let open = || LogReader::new(Cursor::new(log.to_vec()), Some(log.len() as u64));
    let image = ScratchImage::create(&std::env::temp_dir(), region, None).unwrap();
    let o = PassOptions {
        full_verify: false,
        for_drops: false,
        read_timeout: Duration::from_secs(30),
        part: None,
    };
    let whole = main_pass(open().unwrap(), &image, &d, acks, o).unwrap_or_else(|e| panic!("{e:?}"));
    let mut stream = streamer(&d, acks);
    let h = survey(&d, &mut *stream).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(h.acks(), acks.len() as u64);
    // The smallest room the pieces allow: one ack a part where nothing overlaps.
    let room = match h.cut(1) {
        Ok(_) => 1,
        Err((_, biggest)) => biggest,
    };
    let plan = h.cut(room).unwrap();
    let image = ScratchImage::create(&std::env::temp_dir(), region, None).unwrap();
    let judged = judge_in_parts(
        &open,
        &image,
        &d,
        &mut *stream,
        &plan,
        log.len() as u64,
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let durable = judged.acks_durable;
    (whole, judged.pass, plan.len(), durable)
}

#[test]
fn random_logs_judged_in_parts_give_what_they_give_judged_whole() {
    let (mut cut, mut failing, mut honest_failing) = (0, 0, 0);
    for seed in 0..60u64 {
        let region = [128u64 << 10, 512 << 10, 2 << 20][seed as usize % 3];
        let damage = seed % 2 == 0;
        let (log, acks) = random_log_over(5000 + seed, 100, region, damage);
        let (whole, parts, n, durable) = both(&log, &acks, region);
        assert_eq!(
            key(&parts, durable),
            key(&whole, whole.acks.len()),
            "seed {} over {region} bytes in {n} parts",
            5000 + seed
        );
        assert_eq!(parts.entries, whole.entries);
        assert_eq!(parts.flushes, whole.flushes);
        assert_eq!(parts.marks_total, whole.marks_total);
        let disagreeing = whole.points.iter().any(|p| p.verdict != p.expected);
        assert_eq!(
            parts.disagreements.is_empty(),
            !disagreeing,
            "seed {}",
            5000 + seed
        );
        cut += (n > 2) as usize;
        failing += disagreeing as usize;
        honest_failing += (disagreeing && !damage) as usize;
    }
    // The logs are cut, and both honest and damaged ones are among them.
    assert!(cut > 30, "{cut} of 60 logs cut in more than two parts");
    assert!(
        failing > 5 && failing < 55,
        "{failing} of 60 logs disagree somewhere"
    );
    let _ = honest_failing;
}

/// A disagreement line in parts names the point, the sums and a failing part's losses.
#[test]
fn a_lost_record_judged_in_parts_is_named_in_its_line() {
    for seed in 0..40u64 {
        let (log, acks) = random_log_over(7000 + seed, 100, 2 << 20, true);
        let (whole, parts, n, _) = both(&log, &acks, 2 << 20);
        let Some(k) = whole.points.iter().position(|p| p.verdict == Verdict::Fail) else {
            continue;
        };
        let line = &parts.disagreements[0];
        assert!(line.starts_with(&format!("durable point {k} ")), "{line}");
        assert!(line.contains(&format!("judged in {n} parts")), "{line}");
        assert!(line.contains(" stream "), "no loss named: {line}");
        return;
    }
    panic!("no random log lost a record");
}
