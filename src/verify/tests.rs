//! Verify end to end on in-memory devices: superseded records, dead devices, and reads
//! that time out.

use super::*;
use crate::device::mem::{MemDevice, ReadHook};
use crate::model::{Ack, RunDescriptor, Verdict, WriterSettings};
use crate::record::RunKey;
use crate::record::{RecordId, RunId, fill_record};

fn log(run: RunId, acks: Vec<Ack>) -> RunLog {
    log_in(run, (0, 1 << 16), acks)
}

/// A run over `region` (offset, bytes) with these acks: the fixture verify's unit tests
/// share (here and in `medium`).
pub(super) fn log_in(run: RunId, region: (u64, u64), acks: Vec<Ack>) -> RunLog {
    RunLog {
        files: Default::default(),
        descriptor: RunDescriptor {
            run_id: run,
            format_version: crate::record::FORMAT_VERSION,
            plugpull_version: String::new(),
            host: String::new(),
            started_at: String::new(),
            device: Default::default(),
            settings: WriterSettings {
                region_offset: region.0,
                region_bytes: region.1,
                record_bytes_min: 4096,
                record_bytes_max: 4096,
                placement: "sequential".into(),
                streams: 1,
                flush: crate::device::FlushMethod::Fdatasync,
                direct: true,
                seed: 0,
                max_records_unacked: None,
                io: Default::default(),
            },
            command: vec![],
            tree: None,
        },
        acks,
        events: vec![],
    }
}

fn ack(seq: u64, offset: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq,
            offset,
            sectors: 8,
            write_time_ns: seq,
        },
        flushed_ns: seq,
    }
}

/// A record acknowledged over an earlier one takes over its promise: when both are
/// lost, only the later one is (the earlier was judged lost too before the fix; the
/// simulated drive's oracle and the design both say "latest acknowledged record").
#[test]
fn only_the_latest_acked_record_at_a_sector_is_judged() {
    let run = RunId([9; 16]);
    let key = RunKey::new(run);
    let dev = Arc::new(MemDevice::new(1 << 16));
    // seq 1 and seq 3 at 0 (both lost: the device holds zeros there), seq 2 intact
    // at 4096.
    let a2 = ack(2, 4096);
    let mut buf = vec![0u8; 4096];
    fill_record(&mut buf, &key, run, &a2.record);
    dev.write_at(&buf, 4096).unwrap();
    let l = log(run, vec![ack(1, 0), a2, ack(3, 0)]);
    let r = verify_device(dev.clone(), &l, Duration::from_secs(5));
    assert_eq!(r.counts["lost"], 1, "{:?}", r.findings);
    assert_eq!(r.counts["superseded"], 1);
    assert_eq!(r.counts["intact"], 1);
    assert_eq!(r.findings[0].seq, 3);
    // A dead device: the covered record is superseded, the others unreadable.
    let d = dead_device_report(&l, "gone".into());
    assert_eq!(d.counts["unreadable"], 2);
    assert_eq!(d.counts["superseded"], 1);
}

/// `inner` whose every read at or past `stall_from` takes `stall` (a host starved of
/// CPU, a drive busy collecting garbage) and then returns the right data, while the
/// returned flag is set. Every read, not the first only: verify reads a span again when
/// its early read timed out, and a drive slow once would then answer in time.
fn slow_while(
    inner: Arc<MemDevice>,
    stall_from: u64,
    stall: Duration,
) -> (Arc<dyn Device>, Arc<std::sync::atomic::AtomicBool>) {
    let slow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flag = slow.clone();
    let dev = Arc::new(ReadHook {
        inner,
        before: move |_, offset| {
            if offset >= stall_from && flag.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(stall);
            }
            Ok(())
        },
    });
    (dev, slow)
}

/// `n` intact 4 KiB records at `offsets` of a 4 MiB device, and their log.
fn intact_run(offsets: &[u64]) -> (Arc<MemDevice>, RunLog) {
    let run = RunId([7; 16]);
    let key = RunKey::new(run);
    let dev = Arc::new(MemDevice::new(4 << 20));
    let acks: Vec<Ack> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| ack(i as u64 + 1, o))
        .collect();
    for a in &acks {
        let mut buf = vec![0u8; 4096];
        fill_record(&mut buf, &key, run, &a.record);
        dev.write_at(&buf, a.record.offset).unwrap();
    }
    (dev, log(run, acks))
}

/// A false alarm under load: a read slower than
/// `--read-timeout` on an honest drive made verify say FAIL, "8 of 8 acknowledged
/// records did not survive intact", about records it never saw. A timeout proves
/// nothing about the data: INCONCLUSIVE (exit 3), and the next verify decides.
#[test]
fn false_alarm_under_load_a_read_timeout_is_inconclusive_not_fail() {
    let offsets: Vec<u64> = (0..8).map(|i| i * 4096).collect();
    let (dev, l) = intact_run(&offsets);
    let (slow, stalling) = slow_while(dev, 0, Duration::from_millis(1500));
    let r = verify_device(slow.clone(), &l, Duration::from_millis(200));
    assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.to_text());
    assert_eq!(r.verdict.exit_code(), crate::exit::INCONCLUSIVE);
    assert!(r.loss_window.is_none(), "nothing was shown lost");
    assert!(r.summary.contains("--read-timeout"), "{}", r.summary);
    // The drive kept everything: once the reads answer in time, PASS.
    stalling.store(false, std::sync::atomic::Ordering::SeqCst);
    let again = verify_device(slow, &l, Duration::from_millis(200));
    assert_eq!(again.verdict, Verdict::Pass, "{}", again.to_text());
    assert_eq!(again.counts["intact"], 8);
}

/// The other side: a loss verify did see stays a FAIL when a later read times out.
#[test]
fn a_read_timeout_does_not_hide_a_loss_already_seen() {
    // Record 1 at 0 is lost (zeros); record 2 lies in the next 2 MiB chunk, whose
    // read stalls past the timeout.
    let (dev, l) = intact_run(&[2 << 20]);
    // The region holds both records (the fixture's 64 KiB would make the log one no
    // writer can produce).
    let mut l = log_in(l.descriptor.run_id, (0, 4 << 20), l.acks);
    l.acks.insert(0, ack(0, 0));
    let (slow, _) = slow_while(dev, 2 << 20, Duration::from_millis(1500));
    let r = verify_device(slow, &l, Duration::from_millis(200));
    assert_eq!(r.verdict, Verdict::Fail, "{}", r.to_text());
    assert_eq!(r.counts["lost"], 1);
    // The record the hung read left was never judged: it is in no count.
    assert_eq!(r.counts["unreadable"], 0);
    assert!(
        r.summary
            .contains("1 other acknowledged record was left unread")
    );
}

/// A run written by an older plugpull (record format version 1) is judged by its own
/// generator: a sector whose content has 3 flipped bits counts 3, and a sector whose
/// stamp is damaged is regenerated from the run's version and still counted as corrupt
/// with its exact bits (with the current generator it read as blank, 1,700-odd bits).
/// The same for version 2, and a version this build does not know is refused.
#[test]
fn each_format_version_is_judged_by_its_own_generator() {
    for version in [1u16, 2] {
        let run = RunId([5; 16]);
        let key = RunKey::for_version(run, version).unwrap();
        let dev = Arc::new(MemDevice::new(1 << 16));
        let (a1, a2) = (ack(1, 0), ack(2, 4096));
        for a in [&a1, &a2] {
            let mut buf = vec![0u8; 4096];
            fill_record(&mut buf, &key, run, &a.record);
            if a.record.seq == 1 {
                // Three content bits of sector 2.
                for bit in [0usize, 9, 100] {
                    buf[2 * 512 + 64 + bit / 8] ^= 1 << (bit % 8);
                }
            } else {
                // One stamp bit of sector 3 (its checksum then fails).
                buf[3 * 512 + 33] ^= 0x10;
            }
            dev.write_at(&buf, a.record.offset).unwrap();
        }
        let mut l = log(run, vec![a1, a2]);
        l.descriptor.format_version = version;
        let r = verify_device(dev.clone(), &l, Duration::from_secs(5));
        assert_eq!(
            r.counts["corrupt"], 2,
            "version {version}: {:?}",
            r.findings
        );
        let bits: Vec<Option<u64>> = r.findings.iter().map(|f| f.corrupt_bits).collect();
        assert_eq!(bits, [Some(3), Some(1)], "version {version}");
        assert!(streamed::refuse_unknown_format(&l.descriptor).is_ok());
    }
    let mut l = log(RunId([5; 16]), vec![]);
    l.descriptor.format_version = 3;
    let e = streamed::refuse_unknown_format(&l.descriptor).unwrap_err();
    assert!(
        matches!(e, VerifyError::UnknownFormat { version: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("version 3"), "{e}");
}

/// The plain words name the rule that decided, not a guess from the counts: a
/// rehearsal whose records were all overwritten later is "nothing checked", never "cut
/// the power while the writer runs" (the rehearsal says there was no cut on purpose).
#[test]
fn the_plain_words_follow_the_rule_that_decided() {
    let (dev, l) = intact_run(&[0, 4096]);
    let mut r = verify_device(dev, &l, Duration::from_secs(5));
    assert_eq!(r.verdict, Verdict::Pass);
    r.facts.intact = 0;
    r.facts.writer_end = Some(evidence::WriterEnd::Finished("done".into()));
    r.facts.rehearsal = true;
    r.conclude();
    assert_eq!(r.verdict, Verdict::Inconclusive);
    assert_eq!(r.plain_facts().1, plain::NoVerdictReason::Unknown);
    // Without the rehearsal the same run had no cut: that is what the words say then.
    r.facts.rehearsal = false;
    r.conclude();
    assert_eq!(r.plain_facts().1, plain::NoVerdictReason::NoCut);
}
