//! Fuzz target bodies: one function per decoder that hostile bytes reach.
//!
//! Why in the library and not in `fuzz/`: the same functions run under `cargo fuzz`
//! (fuzz/fuzz_targets/*.rs are one-line wrappers) and under stable `cargo test`
//! (tests/integration/hostile_fuzz.rs replays the committed corpus and a few hundred thousand
//! mutated inputs), so CI exercises every target without nightly. Each function panics
//! only when a decoder broke one of its own promises (a round trip that does not hold,
//! a recovered log that is not a prefix of its input); any input at all is otherwise
//! fine. See docs/fuzzing.md.
//!
//! The sector-stamp target lives here too, although the stamp decoder is
//! `crate::record`: keeping all targets in one place keeps the fuzz crate trivial.

use crate::record::RunId;
use crate::record::{self, SECTOR, STAMP_LEN};
use crate::wire::auth::{Key, NONCE_BYTES, Session};
use crate::wire::compact;
use crate::wire::frame::{self, Decoded};
use crate::wire::msg::{self, Msg};
use crate::wire::packed;
use crate::witness::store::checker::LogChecker;
use crate::witness::store::log::{self, AckLog};
use crate::witness::store::scan::{self, MAX_TORN_TAIL_BYTES};
use crate::witness::store::storage::FsStorage;
use crate::witness::store::{journal, journal_replay, layout, reader};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

/// Frame decoder, message decoder and MAC check, on a stream of frames as a peer would
/// send it: every decodable message must re-encode to a frame that decodes to itself.
pub fn frame_decoder(data: &[u8]) {
    // Fixed session: fuzzed MACs exercise the check, they never pass by luck.
    let key = Key::from_secret(b"fuzzing key, not a secret").expect("long enough");
    let mut session = Session::witness(&key, &[1; NONCE_BYTES], &[2; NONCE_BYTES]);
    let limit = 1 + data.first().copied().unwrap_or(0) as usize * 64;
    let _ = frame::decode_limited(data, limit);
    let mut off = 0;
    while off < data.len() {
        let f = match frame::decode(&data[off..]) {
            Decoded::Frame(f) => f,
            Decoded::NeedMore { need } => {
                assert!(
                    need == 0 || need > data.len() - off,
                    "NeedMore but complete"
                );
                return;
            }
            Decoded::Error(e) => {
                let _ = e.to_string();
                return;
            }
        };
        assert!(f.len_bytes >= frame::MIN_FRAME_BYTES && f.len_bytes <= data.len() - off);
        off += f.len_bytes;
        let _ = crate::wire::auth::check(Some(&mut session.opener), &f);
        let _ = crate::wire::auth::check(None, &f);
        if let Ok(m) = Msg::decode(&f) {
            let again = m.encode();
            match frame::decode(&again) {
                Decoded::Frame(g) => {
                    assert_eq!(g.len_bytes, again.len());
                    let m2 = Msg::decode(&g).expect("re-encoded message decodes");
                    assert_eq!(m, m2, "message does not round-trip");
                }
                other => panic!("re-encoded frame does not decode: {other:?}"),
            }
        }
    }
}

fn scratch_path() -> PathBuf {
    // One file per process and thread: libFuzzer forks workers, tests run in threads.
    let t = format!("{:?}", std::thread::current().id());
    let t: String = t.chars().filter(char::is_ascii_alphanumeric).collect();
    // tmpfs when there is one: recovery fsyncs, and an fsync per input on a real disk
    // would cut the executions per second a hundredfold.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    dir.join(format!(
        "plugpull-fuzz-{}-{t}.{}",
        std::process::id(),
        layout::LOG_EXTENSION
    ))
}

/// Ack-log recovery on arbitrary file contents: the read-only scan and the real
/// truncating recovery must agree; a recovered file is a prefix of the input cut only
/// by a torn tail (never damage followed by valid frames), and recovering again cuts
/// nothing; a refused file is left byte for byte.
pub fn log_recovery(data: &[u8]) {
    let mut checker = LogChecker::default();
    let mut scratch = Vec::new();
    let read_only = scan::scan_frames_resync(data, log::is_log_frame, |f, damage| {
        if let Some(d) = damage {
            checker.note_damage(d);
        }
        checker.check(f, &mut scratch).map(|_| ())
    });

    let path = scratch_path();
    {
        let mut f = std::fs::File::create(&path).expect("create fuzz scratch file");
        f.write_all(data).expect("write fuzz scratch file");
    }
    let opened = AckLog::open(&FsStorage, &path);
    match (&read_only, &opened) {
        (Ok(end), Ok((l, rec))) => {
            assert!(end.damage.is_empty(), "recovery accepted a damaged log");
            assert!(end.tail_bytes <= MAX_TORN_TAIL_BYTES);
            let on_disk = std::fs::read(&path).expect("read back");
            assert_eq!(on_disk.len() as u64, end.valid_len_bytes);
            assert_eq!(
                &data[..on_disk.len()],
                &on_disk[..],
                "recovery is not a prefix"
            );
            assert_eq!(rec.truncated_bytes, data.len() as u64 - end.valid_len_bytes);
            assert_eq!(l.durable_acks(), checker.acks);
            assert_eq!(l.durable_len_bytes(), end.valid_len_bytes);
            let (again, rec2) = AckLog::open(&FsStorage, &path).expect("recovered log reopens");
            assert_eq!(rec2.truncated_bytes, 0, "second recovery cut more");
            assert_eq!(again.durable_acks(), checker.acks);
            let read = reader::read_log_file(&path).expect("recovered log reads");
            assert_eq!(read.acks.len() as u64, checker.acks);
        }
        (Ok(end), Err(_)) => {
            assert!(
                checker.descriptor.is_none()
                    || !end.damage.is_empty()
                    || end.tail_bytes > MAX_TORN_TAIL_BYTES
                    || checker.has_end_mark(),
                "scan accepted a log with a descriptor that recovery refused"
            );
            assert_eq!(
                std::fs::read(&path).expect("read back"),
                data,
                "refused but modified"
            );
        }
        // A semantic error (foreign or damaged file): recovery must refuse too, and
        // leave the file alone.
        (Err(_), Ok(_)) => panic!("recovery accepted a log the read-only scan refused"),
        (Err(_), Err(_)) => {
            assert_eq!(
                std::fs::read(&path).expect("read back"),
                data,
                "refused but modified"
            );
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// The run whose log the journal_replay target replays into.
pub const JOURNAL_FUZZ_RUN: RunId = RunId([0x4a; 16]);
/// That log's bytes before replay (replay and overlay never parse a log, so any bytes do).
pub const JOURNAL_FUZZ_LOG: &[u8] =
    b"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A journal file holding `entries` (run, log offset, bytes): for seeds and tests.
pub fn journal_bytes(generation: u64, entries: &[(RunId, u64, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    journal::encode_header(&mut out, generation);
    for (run, offset, data) in entries {
        journal::encode_entries(&mut out, *run, *offset, data);
    }
    out
}

/// Journal replay on arbitrary journal contents, in a witness directory holding one log:
/// replay (which writes the log) and overlay (what reading the log in place sees) must
/// agree byte for byte; a refused journal leaves every file as it was; a replayed one is
/// gone, and replaying again finds nothing.
pub fn journal_replay(data: &[u8]) {
    let dir = scratch_path().with_extension("dir");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create fuzz scratch dir");
    let log_path = layout::log_path(&dir, JOURNAL_FUZZ_RUN);
    let journal_path = layout::journal_path(&dir, 1);
    std::fs::write(&log_path, JOURNAL_FUZZ_LOG).expect("write fuzz log");
    std::fs::write(&journal_path, data).expect("write fuzz journal");
    let mut seen = HashMap::from([(JOURNAL_FUZZ_RUN, JOURNAL_FUZZ_LOG.to_vec())]);
    let overlaid = journal_replay::overlay(&FsStorage, &dir, &mut seen);
    let replayed = journal_replay::replay(&FsStorage, &dir);
    let on_disk = std::fs::read(&log_path).expect("read back log");
    match (overlaid, replayed) {
        (Ok(damage), Ok(r)) => {
            assert!(
                damage.is_empty(),
                "replay accepted a damaged journal: {damage:?}"
            );
            assert_eq!(
                on_disk, seen[&JOURNAL_FUZZ_RUN],
                "replay and overlay disagree"
            );
            assert_eq!(r.journals, 1);
            assert!(!journal_path.exists(), "replayed journal left behind");
            let again = journal_replay::replay(&FsStorage, &dir).expect("second replay");
            assert_eq!(
                again,
                journal_replay::Replayed::default(),
                "second replay found work"
            );
        }
        (Ok(damage), Err(e)) if damage.is_empty() => {
            panic!("replay refused a journal overlay read whole: {e:#}")
        }
        (Err(_), Err(_)) | (Ok(_), Err(_)) => {
            assert_eq!(on_disk, JOURNAL_FUZZ_LOG, "refused journal changed the log");
            assert_eq!(
                std::fs::read(&journal_path).expect("journal kept"),
                data,
                "refused journal was modified"
            );
        }
        (Err(e), Ok(_)) => panic!("replay accepted a journal overlay refused: {e:#}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The compact ack codecs (CompactAcks and PackedAcks), both ways. The input as a
/// CompactAcks or a PackedAcks payload: if it decodes, its acks re-encode (compact where
/// smaller, plain elsewhere) to frames that decode to the same acks. The input as plain
/// 40-byte ack entries (any acks at all, times and sizes included): both encoders must
/// give them back exactly, in order.
pub fn compact_acks(data: &[u8]) {
    let mut acks = Vec::new();
    if let Ok(first) = compact::decode_compact_into(data, &mut acks) {
        assert!(!acks.is_empty() && acks.len() <= msg::MAX_ACKS_PER_FRAME);
        compact_round_trip(first, &acks);
    }
    acks.clear();
    if let Ok(first) = packed::decode_packed_into(data, &mut acks) {
        assert!(!acks.is_empty() && acks.len() <= msg::MAX_ACKS_PER_FRAME);
        compact_round_trip(first, &acks);
    }
    let n = (data.len() / msg::ACK_ENTRY_BYTES).min(msg::MAX_ACKS_PER_FRAME);
    let mut plain = Vec::with_capacity(msg::ACKS_HEADER_BYTES + n * msg::ACK_ENTRY_BYTES);
    plain.extend_from_slice(&0u64.to_le_bytes());
    plain.extend_from_slice(&(n as u32).to_le_bytes());
    plain.extend_from_slice(&data[..n * msg::ACK_ENTRY_BYTES]);
    acks.clear();
    // Entries whose record ends past u64::MAX are refused; any other is an ack.
    if msg::decode_acks_into(&plain, &mut acks).is_ok() {
        compact_round_trip(0, &acks);
    }
}

fn compact_round_trip(first: u64, acks: &[crate::model::Ack]) {
    let mut out = Vec::new();
    msg::encode_acks_compact_into(&mut out, first, acks);
    round_trip_frames(first, acks, &out);
    out.clear();
    msg::encode_acks_packed_into(&mut out, first, acks);
    round_trip_frames(first, acks, &out);
}

fn round_trip_frames(first: u64, acks: &[crate::model::Ack], out: &[u8]) {
    let mut back = Vec::new();
    let mut next = first;
    let mut rest = out;
    while !rest.is_empty() {
        let Decoded::Frame(f) = frame::decode(rest) else {
            panic!("the compact encoder wrote a frame that does not decode");
        };
        match Msg::decode(&f) {
            Ok(Msg::Acks { first: at, acks: a }) => {
                assert_eq!(at, next, "frames do not number the acks contiguously");
                next += a.len() as u64;
                back.extend(a);
            }
            other => panic!("the compact encoder wrote something else: {other:?}"),
        }
        rest = &rest[f.len_bytes..];
    }
    assert!(back == acks, "compact encoding lost or changed acks");
}

/// The file ack codec (FileAcks payloads) and the witness's name rules: a payload that
/// decodes has one name per ack, re-encodes to a frame of the same length that decodes to
/// the same message,
/// and its names can be judged by `validate::check_file_path` without a panic.
pub fn file_acks(data: &[u8]) {
    let (mut acks, mut names) = (Vec::new(), Vec::new());
    let Ok(first) = msg::decode_file_acks_into(data, &mut acks, &mut names) else {
        assert!(
            acks.is_empty() && names.is_empty(),
            "a refused payload left acks"
        );
        return;
    };
    assert_eq!(acks.len(), names.len(), "one name per file ack");
    for n in &names {
        let _ = crate::witness::validate::check_file_path(&n.path);
        assert!(n.renamed_from.as_ref().is_none_or(|t| !t.is_empty()));
    }
    let m = Msg::FileAcks { first, acks, names };
    let again = m.encode();
    let Decoded::Frame(f) = frame::decode(&again) else {
        panic!("a re-encoded FileAcks frame does not decode");
    };
    // Byte for byte but the entries' reserved bytes, which decoding ignores (as in Acks).
    assert_eq!(
        f.payload.len(),
        data.len(),
        "FileAcks re-encoding changed the length"
    );
    assert_eq!(Msg::decode(&f).expect("decodes"), m, "FileAcks round trip");
}

/// Sector-stamp decoder on arbitrary sectors: a stamp that decodes has consistent,
/// overflow-free fields, and re-encoding it over the same content reproduces it.
pub fn record_decoder(data: &[u8]) {
    for chunk in data.chunks(SECTOR) {
        let mut sector = [0u8; SECTOR];
        sector[..chunk.len()].copy_from_slice(chunk);
        let Ok(st) = record::decode_stamp(&sector) else {
            continue;
        };
        assert!(st.index < st.record.sectors);
        let _ = st.home();
        let _ = st.record.end();
        if record::content_matches(&sector, &st) {
            let mut again = sector;
            record::encode_stamp_version(&mut again, st.version, st.run, &st.record, st.index);
            assert_eq!(
                &again[..STAMP_LEN],
                &sector[..STAMP_LEN],
                "stamp round trip"
            );
        }
    }
}
