//! A FAIL after a read timed out: the records the hung read left unread were never
//! judged, so they are in no count, no finding, no loss window and no ordering hole, and
//! the summary and the plain words say how many were left unread.

use super::super::tests::log_in;
use super::super::verify_device;
use crate::device::Device;
use crate::device::mem::{MemDevice, ReadHook};
use crate::model::{Ack, Verdict};
use crate::record::{RecordId, RunId, RunKey, fill_record};
use std::sync::Arc;
use std::time::Duration;

fn ack(seq: u64, offset: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq,
            offset,
            sectors: 8,
            write_time_ns: seq * 1000,
        },
        flushed_ns: seq * 1000 + 500,
    }
}

/// Record 0 at 0 is lost (zeros); records 1 to 3 lie at 2 MiB, whose reads stall past
/// the timeout; record 4 at 4 KiB is intact and was submitted after every other record
/// was acknowledged (so each failing record before it is an ordering hole).
#[test]
fn a_fail_after_a_read_timeout_does_not_count_the_unread_records() {
    let run = RunId([3; 16]);
    let key = RunKey::new(run);
    let dev = Arc::new(MemDevice::new(4 << 20));
    let acks = vec![
        ack(0, 0),
        ack(1, 2 << 20),
        ack(2, (2 << 20) + 4096),
        ack(3, (2 << 20) + 8192),
        ack(4, 4096),
    ];
    for a in &acks[1..] {
        let mut buf = vec![0u8; 4096];
        fill_record(&mut buf, &key, run, &a.record);
        dev.write_at(&buf, a.record.offset).unwrap();
    }
    let l = log_in(run, (0, 4 << 20), acks);
    let slow = Arc::new(ReadHook {
        inner: dev,
        before: |_, offset| {
            if offset >= 2 << 20 {
                std::thread::sleep(Duration::from_millis(1500));
            }
            Ok(())
        },
    });
    let r = verify_device(slow, &l, Duration::from_millis(200));
    let text = r.to_text();
    // A record that was read is lost: the verdict stands.
    assert_eq!(r.verdict, Verdict::Fail, "{text}");
    assert_eq!(r.counts["lost"], 1, "{text}");
    assert_eq!(r.counts["intact"], 1, "{text}");
    assert_eq!(
        r.counts["unreadable"], 0,
        "unread is not unreadable: {text}"
    );
    assert_eq!(r.facts.failing, 1);
    let w = r.loss_window.as_ref().expect("a loss window");
    assert_eq!((w.records, w.bytes), (1, 4096), "{text}");
    assert_eq!(w.ms, 0.004, "from record 0's ack to the last ack");
    let seqs: Vec<u64> = r.findings.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, [0], "{text}");
    assert!(!r.findings_truncated);
    assert_eq!(r.ordering_holes.count, 1, "{text}");
    let timeline: u64 = r
        .ack_timeline
        .iter()
        .map(|b| b.counts.get("unreadable").copied().unwrap_or(0))
        .sum();
    assert_eq!(timeline, 0, "{:?}", r.ack_timeline);
    assert!(
        r.summary
            .starts_with("1 of 5 acknowledged records did not survive intact; "),
        "{}",
        r.summary
    );
    assert!(
        r.summary
            .contains("3 other acknowledged records were left unread and not judged"),
        "{}",
        r.summary
    );
    assert!(r.plain.contains("lost 1 of the 5 writes"), "{}", r.plain);
    assert!(
        r.plain
            .contains("3 more of them could not be read in time, so they were not checked"),
        "{}",
        r.plain
    );
    assert!(text.contains("unread"), "{text}");
}
