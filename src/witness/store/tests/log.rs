use crate::model::{Ack, RunLog, WitnessEvent};
use crate::record::RecordId;
use crate::wire::auth::Key;
use crate::wire::frame::{self, Decoded, FrameType};
use crate::wire::msg::tests::{ack, sample_descriptor};
use crate::wire::msg::{LOG_VERSION, Msg};
use crate::witness::store::checker::DAMAGE_EVENT;
use crate::witness::store::export::{FILE_ACKS_PER_FRAME, write_log_file, write_log_file_keyed};
use crate::witness::store::layout::log_path;
use crate::witness::store::log::{AckLog, Recovery, read_descriptor};
use crate::witness::store::reader::{read_log_file, read_log_file_checked};
use crate::witness::store::scan::MAX_TORN_TAIL_BYTES;
use crate::witness::store::storage::FsStorage;
use std::path::{Path, PathBuf};

fn event(kind: &str) -> WitnessEvent {
    WitnessEvent {
        at_ns: 1,
        kind: kind.into(),
        peer: "p".into(),
        durable_acks: 0,
        last_ack_at_ns: None,
        last_frame_at_ns: None,
        detail: String::new(),
    }
}

#[test]
fn append_commit_reopen_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(1);
    let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
    let acks: Vec<Ack> = (0..10).map(ack).collect();
    assert_eq!(log.append_acks(0, &acks[..6]).unwrap(), 6);
    log.append_event(&event("connect"));
    assert_eq!(log.durable_acks(), 0, "not durable before commit");
    assert_eq!(log.commit().unwrap(), 6);
    // A resend overlapping what is there adds only the new part.
    assert_eq!(log.append_acks(4, &acks[4..]).unwrap(), 4);
    assert!(log.append_acks(11, &acks[..1]).is_err(), "gap refused");
    assert_eq!(log.commit().unwrap(), 10);
    drop(log);

    let (log, rec) = AckLog::open(&FsStorage, &log_path(dir.path(), d.run_id)).unwrap();
    assert_eq!(rec, Recovery::default());
    assert_eq!(log.durable_acks(), 10);
    let r = read_log_file(&log_path(dir.path(), d.run_id)).unwrap();
    assert_eq!(r.descriptor, d);
    assert_eq!(r.acks, acks);
    assert_eq!(r.events, vec![event("connect")]);
    assert_eq!(read_descriptor(&FsStorage, log.path()).unwrap(), d);
}

/// Ack `i` of one stream written front to back: a commit of these is one CompactAcks
/// frame.
pub(crate) fn seq_ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 1_000_000 + i * 9_000 + (i * 7919) % 3_000,
        },
        flushed_ns: 1_005_000 + i * 9_000 + (i * 104_729) % 2_500,
    }
}

/// Ack `i` of one stream at scattered offsets: a commit of these is one plain Acks frame.
pub(crate) fn random_ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            offset: (i * 7919 % 1000) * 4096,
            ..seq_ack(i).record
        },
        ..seq_ack(i)
    }
}

/// The ack kinds every torn-tail and damage test runs with: one per frame type.
type AckKind = (&'static str, fn(u64) -> Ack);

const ACK_KINDS: [AckKind; 2] = [("compact", seq_ack), ("plain", random_ack)];

#[test]
fn torn_tail_truncated_at_every_cut() {
    for (kind, make_ack) in ACK_KINDS {
        torn_tail_truncated_at_every_cut_of(kind, make_ack);
    }
}

fn torn_tail_truncated_at_every_cut_of(kind: &str, make_ack: fn(u64) -> Ack) {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(2);
    let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
    let acks: Vec<Ack> = (0..30).map(make_ack).collect();
    let mut ends = vec![log.durable_len_bytes()];
    for c in acks.chunks(10) {
        let first = log.appended_acks();
        log.append_acks(first, c).unwrap();
        log.commit().unwrap();
        ends.push(log.durable_len_bytes());
    }
    let path = log.path().to_path_buf();
    drop(log);
    let full = std::fs::read(&path).unwrap();
    for cut in ends[0] as usize..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let complete = ends.iter().rposition(|&e| e as usize <= cut).unwrap();
        let keep = ends[complete];
        // read-only reading tolerates the tail and leaves the file alone
        assert_eq!(read_log_file(&path).unwrap().acks.len(), complete * 10);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), cut as u64);
        let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
        assert_eq!(
            log.durable_acks(),
            complete as u64 * 10,
            "{kind}: cut {cut}"
        );
        assert_eq!(rec.truncated_bytes, cut as u64 - keep);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
    }
}

#[test]
fn garbage_tail_and_bit_flip_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(3);
    let mut log = AckLog::create(&FsStorage, dir.path(), &d).unwrap();
    log.append_acks(0, &[ack(0), ack(1)]).unwrap();
    log.commit().unwrap();
    let keep = log.durable_len_bytes();
    log.append_acks(2, &[ack(2)]).unwrap();
    log.commit().unwrap();
    let path = log.path().to_path_buf();
    drop(log);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 10;
    bytes[last] ^= 0x40;
    bytes.extend_from_slice(b"garbage garbage");
    std::fs::write(&path, &bytes).unwrap();
    let (log, rec) = AckLog::open(&FsStorage, &path).unwrap();
    assert_eq!(log.durable_acks(), 2);
    assert!(rec.reason.unwrap().contains("checksum"));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), keep);
}

/// A log of `commits` commits of 10 acks each made by `make_ack` (one frame per commit);
/// returns its path and the end of every frame from the descriptor on.
fn log_of_commits(
    dir: &Path,
    seed: u8,
    commits: u64,
    make_ack: fn(u64) -> Ack,
) -> (PathBuf, Vec<u64>) {
    let mut log = AckLog::create(&FsStorage, dir, &sample_descriptor(seed)).unwrap();
    let mut ends = vec![log.durable_len_bytes()];
    for c in 0..commits {
        let acks: Vec<Ack> = (c * 10..c * 10 + 10).map(make_ack).collect();
        log.append_acks(c * 10, &acks).unwrap();
        log.commit().unwrap();
        ends.push(log.durable_len_bytes());
    }
    (log.path().to_path_buf(), ends)
}

/// Damage is not a torn tail: one bad frame with valid frames after it is corruption, not a
/// torn tail. Opening refuses and leaves the file byte for byte; reading keeps every
/// valid frame and names the damage. At every byte of every frame but the last.
#[test]
fn corruption_followed_by_valid_frames_is_never_truncated() {
    for (kind, make_ack) in ACK_KINDS {
        corruption_followed_by_valid_frames_is_never_truncated_of(kind, make_ack);
    }
}

fn corruption_followed_by_valid_frames_is_never_truncated_of(kind: &str, make_ack: fn(u64) -> Ack) {
    let dir = tempfile::tempdir().unwrap();
    let (path, ends) = log_of_commits(dir.path(), 7, 4, make_ack);
    assert_eq!(
        frame_types(&std::fs::read(&path).unwrap()).last(),
        Some(&if kind == "compact" {
            FrameType::PackedAcks
        } else {
            FrameType::Acks
        }),
        "{kind}: the frames under test"
    );
    let full = std::fs::read(&path).unwrap();
    for pos in ends[0]..ends[3] {
        let mut bytes = full.clone();
        bytes[pos as usize] ^= 1 << (pos % 8);
        std::fs::write(&path, &bytes).unwrap();
        let e = AckLog::open(&FsStorage, &path)
            .err()
            .map(|e| format!("{e:#}"));
        assert!(
            e.as_deref().is_some_and(|e| e.contains("damaged")),
            "{kind}: {pos}: {e:?}"
        );
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "flip at {pos} changed the file"
        );
        let r = read_log_file(&path).unwrap();
        let damage: Vec<_> = r.events.iter().filter(|e| e.kind == DAMAGE_EVENT).collect();
        assert_eq!(damage.len(), 1, "{kind}: flip at {pos}: {:?}", r.events);
        let frame = ends.iter().rposition(|&e| e <= pos).unwrap();
        assert!(
            damage[0]
                .detail
                .contains(&format!("at byte {}", ends[frame])),
            "flip at {pos}: {}",
            damage[0].detail
        );
        assert_eq!(
            r.acks.len(),
            30,
            "{kind}: flip at {pos}: the other frames' acks are read"
        );
        assert_eq!(
            r.acks,
            (0..40)
                .filter(|i| i / 10 != frame as u64)
                .map(make_ack)
                .collect::<Vec<_>>(),
            "{kind}: flip at {pos}: the other frames' acks are read exactly"
        );
    }
}

/// A tail with nothing valid after it is torn only up to what one commit can append;
/// more is damage, kept for someone to look at.
#[test]
fn unreadable_tail_longer_than_one_commit_is_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = log_of_commits(dir.path(), 8, 2, seq_ack);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.resize(bytes.len() + MAX_TORN_TAIL_BYTES as usize + 1, 0xab);
    std::fs::write(&path, &bytes).unwrap();
    assert!(AckLog::open(&FsStorage, &path).is_err());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), bytes.len() as u64);
}

#[test]
fn interrupted_creation_is_rewritten_but_foreign_files_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(4);
    let path = log_path(dir.path(), d.run_id);
    let mut header = Vec::new();
    Msg::FileHeader {
        version: LOG_VERSION,
    }
    .encode_into(&mut header);
    let mut desc_frame = Vec::new();
    Msg::Descriptor(d.clone()).encode_into(&mut desc_frame);
    header.extend_from_slice(&desc_frame[..desc_frame.len() - 5]);
    std::fs::write(&path, &header).unwrap();
    let (log, rec) = AckLog::open_or_create(&FsStorage, dir.path(), &d).unwrap();
    assert!(rec.unwrap().reason.unwrap().contains("interrupted"));
    assert_eq!(log.durable_acks(), 0);
    drop(log);

    let other = sample_descriptor(5);
    let p2 = log_path(dir.path(), other.run_id);
    std::fs::write(&p2, b"this is somebody's file, not a log").unwrap();
    assert!(AckLog::open_or_create(&FsStorage, dir.path(), &other).is_err());
    assert_eq!(
        std::fs::read(&p2).unwrap(),
        b"this is somebody's file, not a log"
    );
    // Same run id, different descriptor: refused, file unchanged.
    let before = std::fs::read(&path).unwrap();
    let mut forged = d.clone();
    forged.host = "evil".into();
    assert!(AckLog::open_or_create(&FsStorage, dir.path(), &forged).is_err());
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

fn run_log(seed: u8, acks: u64) -> RunLog {
    RunLog {
        files: Default::default(),
        descriptor: sample_descriptor(seed),
        acks: (0..acks).map(ack).collect(),
        events: vec![event("bye")],
    }
}

fn key(secret: &str) -> Key {
    Key::from_secret(secret.as_bytes()).unwrap()
}

/// Ends of every frame of a file, in order.
fn frame_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = vec![];
    let mut at = 0;
    while let Decoded::Frame(f) = frame::decode(&bytes[at..]) {
        at += f.len_bytes;
        ends.push(at);
    }
    ends
}

/// A log cut where a frame ends is not whole: `verify --acks` must not trust such a
/// file as complete. Every such cut is now "not whole"; only the full file is.
#[test]
fn log_cut_short_at_frame_boundary_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.acklog");
    write_log_file(&p, &run_log(9, 3 * FILE_ACKS_PER_FRAME as u64 + 5)).unwrap();
    let full = std::fs::read(&p).unwrap();
    let ends = frame_ends(&full);
    assert_eq!(*ends.last().unwrap(), full.len());
    let (_, w) = read_log_file_checked(&p, None).unwrap();
    assert!(w.whole, "{w:?}");
    for &cut in &ends[1..ends.len() - 1] {
        std::fs::write(&p, &full[..cut]).unwrap();
        let (_, w) = read_log_file_checked(&p, None).unwrap();
        assert!(!w.whole, "cut at {cut}: {w:?}");
    }
}

/// Any one flipped bit of a fetched log: an error (header, descriptor) or "not
/// whole", never whole.
#[test]
fn every_bit_flip_in_a_fetched_log_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.acklog");
    write_log_file(&p, &run_log(10, 12)).unwrap();
    let full = std::fs::read(&p).unwrap();
    for pos in 0..full.len() {
        let mut b = full.clone();
        b[pos] ^= 1 << (pos % 8);
        std::fs::write(&p, &b).unwrap();
        if let Ok((_, w)) = read_log_file_checked(&p, None) {
            assert!(!w.whole, "flip at {pos}: {w:?}");
        }
    }
}

/// A forger who edits the acks and writes a fresh unkeyed mark passes the digest;
/// only a signed mark checked with the key catches that.
#[test]
fn forged_log_is_detected_only_with_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f.acklog");
    let (good, other) = (
        key("the witness key, 32 bytes long.."),
        key("another key entirely, also long"),
    );
    let log = run_log(11, 100);
    write_log_file_keyed(&p, &log, Some(&good)).unwrap();
    assert!(read_log_file_checked(&p, Some(&good)).unwrap().1.whole);
    let (_, w) = read_log_file_checked(&p, None).unwrap();
    assert!(w.whole && w.how.contains("not checked"), "{w:?}");
    assert!(!read_log_file_checked(&p, Some(&other)).unwrap().1.whole);
    // Forged: one ack dropped, a new mark computed without the key.
    let mut forged = log.clone();
    forged.acks.pop();
    write_log_file(&p, &forged).unwrap();
    assert!(
        read_log_file_checked(&p, None).unwrap().1.whole,
        "the digest alone cannot tell"
    );
    let (_, w) = read_log_file_checked(&p, Some(&good)).unwrap();
    assert!(!w.whole && w.how.contains("not signed"), "{w:?}");
    // Forged with a mark signed by a key that is not the witness's.
    write_log_file_keyed(&p, &forged, Some(&other)).unwrap();
    let (_, w) = read_log_file_checked(&p, Some(&good)).unwrap();
    assert!(!w.whole && w.how.contains("signature"), "{w:?}");
}

/// A fetched file dropped into a witness directory is not appended to.
#[test]
fn witness_refuses_to_append_to_a_fetched_file() {
    let dir = tempfile::tempdir().unwrap();
    let rl = run_log(12, 10);
    let p = log_path(dir.path(), rl.descriptor.run_id);
    write_log_file(&p, &rl).unwrap();
    let before = std::fs::read(&p).unwrap();
    let e = format!("{:#}", AckLog::open(&FsStorage, &p).err().expect("refused"));
    assert!(e.contains("end mark"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), before);
}

#[test]
fn write_log_file_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let rl = RunLog {
        files: Default::default(),
        descriptor: sample_descriptor(6),
        acks: (0..10_000).map(ack).collect(),
        events: vec![event("bye")],
    };
    let p = dir.path().join("out.acklog");
    write_log_file(&p, &rl).unwrap();
    let back = read_log_file(&p).unwrap();
    assert_eq!(back.acks, rl.acks);
    assert_eq!(back.events, rl.events);
    assert_eq!(back.descriptor, rl.descriptor);
}

/// The types of the frames in `bytes`, in order, up to the first that does not decode.
fn frame_types(mut bytes: &[u8]) -> Vec<FrameType> {
    let mut types = Vec::new();
    while let Decoded::Frame(f) = frame::decode(bytes) {
        types.push(f.ty);
        bytes = &bytes[f.len_bytes..];
    }
    types
}
