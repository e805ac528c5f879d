//! Acks no writer can produce are refused. The witness once stored them (0 sectors,
//! 2^32-1 sectors, an unaligned offset, a stream beyond the run's streams), and verify
//! then judged them (a 0-sector ack "intact", a 2 TiB one 43 s of CPU).
//!
//! Each test runs the built `plugpull listen`, opens a run with ten good acks, sends one
//! frame holding a good ack and a bad one, and checks: the frame is refused with an
//! Error naming the rule, the witness logs it, the bytes already in the run's log are
//! unchanged and no ack was added to it (the only thing appended is the witness's own
//! "error" event for the connection), and the ten good acks are still served.

use crate::common;

use common::{Listen, WitnessProc, bin, test_descriptor};
use plugpull::model::{Ack, RunDescriptor, RunSelector};
use plugpull::record::{RecordId, RunId};
use plugpull::wire::frame::{self, FrameType};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::client::fetch;
use plugpull::witness::store::layout::log_path;
use plugpull::witness::store::log::AckLog;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Two streams of 4 KiB records in a 1 GiB region at offset 0.
fn descriptor() -> RunDescriptor {
    let mut d = test_descriptor(RunId([0xd8; 16]));
    d.settings.streams = 2;
    d
}

/// Ack `i` as a writer makes it: streams alternate, each stream's seqs count from 1 and
/// its records go front to back through its half of the region.
fn good(i: u64) -> Ack {
    let stream = (i % 2) as u16;
    let seq = i / 2 + 1;
    Ack {
        record: RecordId {
            stream,
            seq,
            offset: stream as u64 * (512 << 20) + (seq - 1) * 4096,
            sectors: 8,
            write_time_ns: 1_700_000_000_000_000_000 + i * 1000,
        },
        flushed_ns: 1_700_000_000_000_000_000 + i * 1000 + 500,
    }
}

/// Frames arriving on a raw connection.
struct Reader {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Reader {
    /// The next message; None when the witness closed the connection.
    fn next(&mut self) -> Option<Msg> {
        loop {
            if let frame::Decoded::Frame(f) = frame::decode(&self.buf) {
                let n = f.len_bytes;
                let m = Msg::decode(&f).unwrap();
                self.buf.drain(..n);
                return Some(m);
            }
            let mut c = [0u8; 4096];
            match self.s.read(&mut c) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&c[..n]),
            }
        }
    }
}

fn send(r: &mut Reader, m: &Msg) {
    r.s.write_all(&m.encode()).unwrap();
}

/// A writer connection to a new run of `descriptor()` with acks 0..10 durable.
fn run_with_ten_good_acks(w: &WitnessProc) -> Reader {
    let s = TcpStream::connect(&w.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = Reader { s, buf: vec![] };
    send(
        &mut r,
        &Msg::Hello {
            version: PROTOCOL_VERSION,
            resume: false,
            descriptor: descriptor(),
        },
    );
    assert!(matches!(r.next(), Some(Msg::Welcome { .. })), "{}", w.log());
    send(
        &mut r,
        &Msg::Acks {
            first: 0,
            acks: (0..10).map(good).collect(),
        },
    );
    assert_eq!(r.next(), Some(Msg::Durable { durable_acks: 10 }));
    r
}

/// Every frame in `bytes`, by type.
fn frame_types(bytes: &[u8]) -> Vec<FrameType> {
    let mut off = 0;
    let mut v = vec![];
    while off < bytes.len() {
        let frame::Decoded::Frame(f) = frame::decode(&bytes[off..]) else {
            panic!("damaged frame at {off}");
        };
        v.push(f.ty);
        off += f.len_bytes;
    }
    v
}

/// Sends acks 10 (good) and 11 (`bad`) in one frame and checks the refusal.
fn refused(bad: Ack, want: &str) {
    let w = Listen::temporary().start();
    let mut r = run_with_ten_good_acks(&w);
    let path = log_path(&w.dir, descriptor().run_id);
    let before = std::fs::read(&path).unwrap();
    send(
        &mut r,
        &Msg::Acks {
            first: 10,
            acks: vec![good(10), bad],
        },
    );
    let Some(Msg::Error { message }) = r.next() else {
        panic!("no Error for {bad:?}; witness log:\n{}", w.log())
    };
    assert!(
        message.contains("ack 11") && message.contains(want),
        "{message}"
    );
    // The witness closes the connection after committing its "error" event.
    assert_eq!(r.next(), None);
    let after = std::fs::read(&path).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "bytes already stored changed"
    );
    assert!(
        frame_types(&after[before.len()..])
            .iter()
            .all(|t| *t == FrameType::Event),
        "something besides the witness's event was appended"
    );
    let served = fetch(&w.addr, &RunSelector::Run(descriptor().run_id)).unwrap();
    assert_eq!(served.acks, (0..10).map(good).collect::<Vec<_>>());
    let log = w.log();
    assert!(
        log.contains("event=error") && log.contains(want),
        "no log line naming the refusal:\n{log}"
    );
}

#[test]
fn witness_refuses_zero_sector_ack() {
    let mut a = good(11);
    a.record.sectors = 0;
    refused(a, "has 0 sectors");
}

#[test]
fn witness_refuses_huge_ack() {
    let mut a = good(11);
    a.record.sectors = u32::MAX;
    refused(a, "has 4294967295 sectors");
}

#[test]
fn witness_refuses_unaligned_offset() {
    let mut a = good(11);
    a.record.offset += 100;
    refused(a, "not a multiple of 512");
}

#[test]
fn witness_refuses_stream_beyond_run() {
    let mut a = good(11);
    a.record.stream = 2;
    refused(a, "names stream 2 but the run has 2");
}

#[test]
fn witness_refuses_ack_outside_region() {
    let mut a = good(11);
    a.record.offset = 1 << 30;
    refused(a, "outside the run's region");
}

#[test]
fn witness_refuses_repeated_seq() {
    // Ack 11 (stream 1) repeats the seq of ack 9, the stream's previous one.
    let mut a = good(11);
    a.record.seq = good(9).record.seq;
    refused(a, "does not follow seq 5");
}

#[test]
fn witness_refuses_impossible_descriptor() {
    let w = Listen::temporary().start();
    for (name, change, want) in [
        (
            "no streams",
            (|d: &mut RunDescriptor| d.settings.streams = 0) as fn(&mut RunDescriptor),
            "0 streams",
        ),
        (
            "min above max",
            |d| d.settings.record_bytes_min = 8192,
            "above its largest",
        ),
        (
            "unaligned record size",
            |d| d.settings.record_bytes_max = 4097,
            "multiple of 512",
        ),
        (
            "empty region",
            |d| d.settings.region_bytes = 0,
            "cannot give",
        ),
    ] {
        let mut d = descriptor();
        change(&mut d);
        let s = TcpStream::connect(&w.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = Reader { s, buf: vec![] };
        send(
            &mut r,
            &Msg::Hello {
                version: PROTOCOL_VERSION,
                resume: false,
                descriptor: d,
            },
        );
        let Some(Msg::Error { message }) = r.next() else {
            panic!("{name}: no Error; witness log:\n{}", w.log())
        };
        assert!(message.contains(want), "{name}: {message}");
        assert!(
            !log_path(&w.dir, descriptor().run_id).exists(),
            "{name}: a log was created"
        );
    }
}

/// A log written before the witness validated acks: the descriptor of `descriptor()`
/// with `acks`, in `dir`.
fn old_log(dir: &Path, acks: &[Ack]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let (mut log, _) = AckLog::open_or_create(
        &plugpull::witness::store::storage::FsStorage,
        dir,
        &descriptor(),
    )
    .unwrap();
    log.append_acks(0, acks).unwrap();
    log.commit().unwrap();
    log_path(dir, descriptor().run_id)
}

/// How long [`verify_old_log`] lets verify run: a verify of a 1 MiB target ends in well
/// under a second even on a loaded machine; one that works through a 2 TiB ack instead
/// of refusing it (as before acks were validated) is still running when killed.
const VERIFY_LIMIT: Duration = Duration::from_secs(20);

/// `plugpull verify TARGET --acks LOG` on a 1 MiB file of zeros; (exit code, stderr,
/// seconds), killed after [`VERIFY_LIMIT`] (no exit code then).
fn verify_old_log(acks: &[Ack]) -> (Option<i32>, String, f64) {
    let tmp = tempfile::tempdir().unwrap();
    let log = old_log(&tmp.path().join("w"), acks);
    let target = tmp.path().join("target.img");
    std::fs::write(&target, vec![0u8; 1 << 20]).unwrap();
    let err = tmp.path().join("verify.err");
    let t0 = Instant::now();
    let mut child = Command::new(bin())
        .arg("verify")
        .arg(&target)
        .arg("--rehearsal")
        .arg("--acks")
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if t0.elapsed() > VERIFY_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let secs = t0.elapsed().as_secs_f64();
    (code, std::fs::read_to_string(&err).unwrap(), secs)
}

#[test]
fn verify_does_not_call_a_zero_sector_ack_intact() {
    let mut a = good(0);
    a.record.sectors = 0;
    let (code, err, _) = verify_old_log(&[a]);
    assert_eq!(code, Some(3), "want INCONCLUSIVE (3); stderr:\n{err}");
    assert!(
        err.contains("ack 0") && err.contains("has 0 sectors") && err.contains("damaged or forged"),
        "{err}"
    );
}

#[test]
fn verify_refuses_a_huge_ack_at_once() {
    let mut a = good(1);
    a.record.sectors = u32::MAX;
    let (code, err, secs) = verify_old_log(&[good(0), a]);
    // At once: within VERIFY_LIMIT (an exit code at all), where reading the ack's
    // 2 TiB would take far longer.
    assert_eq!(
        code,
        Some(3),
        "want INCONCLUSIVE (3), got {code:?} after {secs:.1} s (None: still running, \
         killed at {VERIFY_LIMIT:?}); stderr:\n{err}"
    );
    assert!(
        err.contains("ack 1") && err.contains("4294967295 sectors"),
        "{err}"
    );
}

/// CompactAcks and PackedAcks are the witness's own log and fetch encodings: a writer
/// sends plain Acks, and either frame from it is refused by name, with nothing appended.
#[test]
fn compact_acks_from_a_writer_are_refused() {
    compact_acks_from_a_writer_are_refused_with(
        plugpull::wire::msg::encode_acks_compact_into,
        FrameType::CompactAcks,
    );
    compact_acks_from_a_writer_are_refused_with(
        plugpull::wire::msg::encode_acks_packed_into,
        FrameType::PackedAcks,
    );
}

fn compact_acks_from_a_writer_are_refused_with(
    encode: fn(&mut Vec<u8>, u64, &[Ack]),
    ty: FrameType,
) {
    let w = Listen::temporary().start();
    let mut r = run_with_ten_good_acks(&w);
    let path = log_path(&w.dir, descriptor().run_id);
    let acks: Vec<Ack> = (10..20).map(good).collect();
    let mut bytes = Vec::new();
    encode(&mut bytes, 10, &acks);
    assert_eq!(frame_types(&bytes), vec![ty]);
    r.s.write_all(&bytes).unwrap();
    let Some(Msg::Error { message }) = r.next() else {
        panic!("no Error; witness log:\n{}", w.log())
    };
    assert!(message.contains(&format!("{ty:?}")), "{message}");
    assert_eq!(r.next(), None);
    let log = plugpull::witness::store::reader::read_log_file(&path).unwrap();
    assert_eq!(log.acks.len(), 10, "nothing appended");
}
