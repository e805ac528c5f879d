//! Drives whose reads are slow, fail or change, and acks that change: read once by
//! the parts, twice or early by the whole run.

use super::*;

/// A 4 MiB run of records of many sizes, one at each end of the region and one at the
/// start of its second 2 MiB, all written whole.
fn two_chunk_run() -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let d = descriptor(RunId([0x7c; 16]), 0, 4 * MIB, 512, 8192);
    let mem = Arc::new(MemDevice::new((4 * MIB) as usize));
    let acks = vec![
        ack(0, 1, 0, 8),
        ack(0, 2, 2 * MIB, 4),
        ack(1, 1, 4 * MIB - 8192, 16),
    ];
    for a in &acks {
        write(&mem, &d, a, a.record.offset, None);
    }
    (d, acks, mem)
}

/// Once broke: same verdict for a read that hangs or not. A drive whose first 2 MiB take
/// 0.7 s to read and whose next 2 MiB take 1.3 s, read with a 1 s timeout. The whole
/// run's two readers (`scan::pipeline`, READERS) start both chunks at once, so its scan
/// waits for the second one only from 0.7 s to 1.3 s, 0.6 s, under the timeout: no
/// hang, PASS. The second part's reads start only when the first part is judged (`judge_in_parts`,
/// src/verify/partition/mod.rs, runs one `scan::scan_part`, a fresh pipeline, per
/// group), so it waits the full 1.3 s for its first chunk and calls the read hung:
/// INCONCLUSIVE, 2 MiB "did not complete". The same drive, two reports: whether a slow
/// read counts as hung depends on where the parts' edges fall.
#[test]
fn attack_a_slow_read_at_a_part_s_first_chunk_hangs_only_in_parts() {
    let (d, acks, mem) = two_chunk_run();
    let t = Duration::from_millis(1000);
    let slow = vec![(0, 700), (2 * MIB, 1300)];
    let whole = whole_run(slow_at(mem.clone(), slow.clone()), &d, &acks, t, false).unwrap();
    let plan = Plan::with_parts(&d, 2, 512, 1);
    let parts = in_parts(slow_at(mem, slow), &d, &acks, false, plan, t);
    assert_eq!(
        (parts.report.verdict, &parts.report.unreadable_ranges),
        (whole.report.verdict, &whole.report.unreadable_ranges)
    );
    assert_eq!(without_time(&parts.report), without_time(&whole.report));
}

/// Acks whose first pass takes `ms` (a long log file read from a slow disk), later
/// passes none.
struct SlowFirstPass<'a> {
    acks: &'a [Ack],
    ms: u64,
    passes: std::sync::atomic::AtomicU32,
}

impl AckPasses for SlowFirstPass<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), VerifyError> {
        if self
            .passes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            == 0
        {
            std::thread::sleep(Duration::from_millis(self.ms));
        }
        sink(self.acks);
        Ok(())
    }
}

/// Once broke: same verdict for a read that hangs or not, now for every part's edge. Acks
/// that cannot tell their count (a stream) and take 1.2 s to pass once; a drive whose
/// read of the second 2 MiB takes 1 s; a 0.7 s timeout. The whole run starts reading its
/// region before the first pass (`scan::read_early`, src/verify/scale.rs
/// `verify_whole_run`), so that read is long done when its scan asks for it: PASS. The
/// parts read nothing before their spill pass ends (`spill_acks`, then `scan_part` per
/// group), so the second part waits the full 1 s: INCONCLUSIVE.
#[test]
fn attack_a_slow_first_pass_hides_a_slow_read_from_the_whole_run_only() {
    let (d, acks, mem) = two_chunk_run();
    let t = Duration::from_millis(700);
    let slow = vec![(2 * MIB, 1000)];
    let source = |ms| SlowFirstPass {
        acks: &acks,
        ms,
        passes: Default::default(),
    };
    let whole = whole_run(
        slow_at(mem.clone(), slow.clone()),
        &d,
        &source(1200),
        t,
        false,
    );
    let whole = whole.unwrap();
    let plan = Plan::with_parts(&d, 2, 512, 1);
    let parts = in_parts(slow_at(mem, slow), &d, &source(1200), false, plan, t);
    assert_eq!(
        (parts.report.verdict, &parts.report.unreadable_ranges),
        (whole.report.verdict, &whole.report.unreadable_ranges)
    );
    assert_eq!(without_time(&parts.report), without_time(&whole.report));
}

/// A device of `mem` whose reads covering `at` take `ms` each after the first.
fn hangs_when_read_again(mem: Arc<MemDevice>, at: u64, ms: u64) -> Arc<dyn Device> {
    let reads = std::sync::atomic::AtomicU64::new(0);
    Arc::new(ReadHook {
        inner: mem,
        before: move |len: usize, off: u64| {
            if off <= at
                && at < off + len as u64
                && reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0
            {
                std::thread::sleep(Duration::from_millis(ms));
            }
            Ok(())
        },
    })
}

/// Once broke: a read that hangs is given up after the read timeout (the "hung reads" of
/// the promise), in the whole run as in the parts. The run of
/// `attack_a_sector_failing_on_its_second_read_*`, on a drive whose second read of the
/// lost record's sector takes 2.5 s, read with a 0.3 s timeout. The parts read it once
/// and finish at once. The whole run reads the slots its summary could not judge again
/// with plain synchronous reads (`scan::summary::Reread::judge`,
/// src/verify/scan/summary.rs, `pipeline::read_chunk` with no timeout), so it waits the
/// 2.5 s out, and on a drive whose second read never returns it never finishes.
#[test]
fn attack_a_hung_second_read_is_never_timed_out_by_the_whole_run() {
    let d = descriptor(RunId([0x6b; 16]), 0, 4 * MIB, 4096, 4096);
    let mem = Arc::new(MemDevice::new((5 * MIB) as usize));
    let lost_at = 2 * MIB + 8192;
    let acks = vec![
        ack(0, 1, 0, 8),
        ack(0, 2, 4 * MIB - 4096, 8),
        ack(1, 1, lost_at, 8),
    ];
    write(&mem, &d, &acks[0], 0, None);
    write(&mem, &d, &acks[1], 4 * MIB - 4096, None);
    let t = Duration::from_millis(300);
    let stream = Unhinted(&acks);
    let plan = Plan::with_parts(&d, 2, 512, 1);
    let t0 = std::time::Instant::now();
    let dev = hangs_when_read_again(mem.clone(), lost_at, 2500);
    in_parts(dev, &d, &stream, false, plan, t);
    let parts_s = t0.elapsed().as_secs_f64();
    let t0 = std::time::Instant::now();
    let dev = hangs_when_read_again(mem.clone(), lost_at, 2500);
    whole_run(dev, &d, &stream, t, false).unwrap();
    let whole_s = t0.elapsed().as_secs_f64();
    assert!(
        whole_s < t.as_secs_f64() + 1.0,
        "the whole run took {whole_s:.1} s with a {t:?} read timeout (the parts {parts_s:.1} s)"
    );
}

/// Acks whose source has grown by one ack after its first pass (a log still being
/// appended to, or replaced, while verify runs).
struct Growing<'a> {
    acks: &'a [Ack],
    extra: Ack,
    passes: std::sync::atomic::AtomicU32,
}

impl AckPasses for Growing<'_> {
    fn pass(&self, sink: &mut dyn FnMut(&[Ack])) -> Result<(), VerifyError> {
        sink(self.acks);
        if self
            .passes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            > 0
        {
            sink(std::slice::from_ref(&self.extra));
        }
        Ok(())
    }
}

/// Once broke: the same outcome for every run. Acks that change between passes: the whole
/// run's second pass sees it and refuses (`VerifyError::AcksChanged`,
/// src/verify/scale.rs `verify_whole_run`); the parts pass over the source once
/// (`spill_acks`), compare their own work files with themselves
/// (`judging.acked() != n` in `judge_in_parts` can only differ on a bad work file), and
/// report a verdict on acks the log no longer holds.
#[test]
fn attack_acks_that_change_between_passes_are_refused_only_by_the_whole_run() {
    let (d, acks, mem) = two_chunk_run();
    let source = || Growing {
        acks: &acks,
        extra: ack(1, 2, MIB, 8),
        passes: Default::default(),
    };
    let t = Duration::from_secs(10);
    let whole = whole_run(mem.clone(), &d, &source(), t, false);
    let run = scan::ScanRun::from(&d);
    let plan = Plan::with_parts(&d, 2, 512, 1);
    let dir = std::env::temp_dir();
    let p = &|_, _| {};
    let parts = judge_in_parts(mem, &d, run, &source(), t, false, p, &plan, &dir);
    assert_eq!(
        parts
            .as_ref()
            .map(|s| without_time(&s.report))
            .map_err(|e| format!("refused: {e}")),
        whole.map(|s| without_time(&s.report))
    );
}
