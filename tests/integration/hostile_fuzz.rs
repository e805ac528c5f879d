//! The fuzz targets on stable Rust: replays the committed corpus (fuzz/corpus/<target>/)
//! and a few hundred thousand seeded mutations of it through the same functions
//! `cargo fuzz` runs (plugpull::witness::fuzz), so CI exercises every decoder without
//! nightly. A failure prints the seed and the input that broke it. docs/fuzzing.md.
//!
//! `cargo test --test integration -- --ignored hostile_fuzz::write_seed_corpus` regenerates the seeds.

use crate::common;

use common::test_descriptor;
use plugpull::model::{Ack, RunDescriptor, RunLog, RunSelector, WitnessEvent};
use plugpull::record::RunKey;
use plugpull::record::{RecordId, RunId, fill_record};
use plugpull::rng::Rng;
use plugpull::wire::auth::{Key, NONCE_BYTES, Session};
use plugpull::wire::frame::{self, FrameType};
use plugpull::wire::msg::{Msg, PROTOCOL_VERSION};
use plugpull::witness::fuzz;
use plugpull::witness::store::export::write_log_file;
use std::path::PathBuf;

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn descriptor() -> RunDescriptor {
    let mut d = test_descriptor(RunId([0x5e; 16]));
    d.plugpull_version = "seed".into();
    d.host = "h".into();
    d.device.target = "/dev/x".into();
    d.settings.region_bytes = 1 << 20;
    d.command = vec!["plugpull".into()];
    d
}

fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq: i,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 10 + i,
        },
        flushed_ns: 20 + i,
    }
}

fn seeds_frame() -> Vec<Vec<u8>> {
    let d = descriptor();
    let msgs = vec![
        Msg::Hello {
            version: PROTOCOL_VERSION,
            resume: false,
            descriptor: d.clone(),
        },
        Msg::Auth {
            version: PROTOCOL_VERSION,
            nonce: [3; NONCE_BYTES],
        },
        Msg::Challenge {
            nonce: [4; NONCE_BYTES],
        },
        Msg::Welcome {
            version: PROTOCOL_VERSION,
            durable_acks: 5,
        },
        Msg::Acks {
            first: 0,
            acks: (0..3).map(ack).collect(),
        },
        Msg::Durable { durable_acks: 3 },
        Msg::Heartbeat,
        Msg::Bye {
            reason: "done".into(),
        },
        Msg::Error {
            message: "no".into(),
        },
        Msg::Fetch(RunSelector::Run(d.run_id)),
        Msg::Fetch(RunSelector::LatestForDevice("serial:X".into())),
        Msg::FetchEnd { acks: 3 },
    ];
    let mut seeds: Vec<Vec<u8>> = msgs.iter().map(Msg::encode).collect();
    // A whole writer session in one stream, and a sealed one.
    seeds.push(msgs.iter().flat_map(Msg::encode).collect());
    let key = Key::from_secret(b"fuzzing key, not a secret").unwrap();
    let mut s = Session::client(&key, &[1; NONCE_BYTES], &[2; NONCE_BYTES]);
    let mut sealed = Vec::new();
    for m in &msgs[4..7] {
        let start = sealed.len();
        m.encode_into(&mut sealed);
        s.sealer.seal(&mut sealed, start);
    }
    seeds.push(sealed);
    seeds.push(frame::encode(FrameType::Bye, &[0xff; 3]));
    seeds.push(compact_frames(&interleaved_acks(40)));
    seeds
}

/// Acks of 3 streams, each front to back, with a size change: what CompactAcks holds.
fn interleaved_acks(n: u64) -> Vec<Ack> {
    let mut next = [0u64; 3];
    (0..n)
        .map(|i| {
            let s = (i * 7 % 3) as usize;
            let sectors = if i % 5 == 0 { 16 } else { 8 };
            let a = Ack {
                record: RecordId {
                    stream: s as u16,
                    seq: i / 3,
                    offset: (s as u64) << 30 | next[s],
                    sectors,
                    write_time_ns: 1_000_000 + i * 9_000 + i * i % 700,
                },
                flushed_ns: 1_004_000 + i * 9_000 + i * 31 % 2_000,
            };
            next[s] += sectors as u64 * 512;
            a
        })
        .collect()
}

/// `acks` as the witness's log stores them (CompactAcks where smaller).
fn compact_frames(acks: &[Ack]) -> Vec<u8> {
    let mut out = Vec::new();
    plugpull::wire::msg::encode_acks_compact_into(&mut out, 0, acks);
    out
}

/// Seeds of the compact_acks target: CompactAcks and PackedAcks payloads, and plain ack
/// entries.
fn seeds_compact() -> Vec<Vec<u8>> {
    let payload = |f: &[u8]| f[frame::LEN_BYTES + 1..f.len() - frame::CRC_BYTES].to_vec();
    let mut interleaved = interleaved_acks(40);
    // Per stream, seqs must follow one another for a compact frame.
    let mut seqs = [0u64; 3];
    for a in &mut interleaved {
        a.record.seq = seqs[a.record.stream as usize];
        seqs[a.record.stream as usize] += 1;
    }
    let one = compact_frames(&(0..50).map(ack).collect::<Vec<_>>());
    let three = compact_frames(&interleaved);
    let mut entries = Vec::new();
    for a in (0..4).map(ack) {
        plugpull::wire::msg::put_ack(&mut entries, &a);
    }
    let mut packed = Vec::new();
    plugpull::wire::msg::encode_acks_packed_into(&mut packed, 0, &interleaved);
    vec![payload(&one), payload(&three), payload(&packed), entries]
}

/// Seeds of the file_acks target: FileAcks payloads (in place, renamed, long names).
fn seeds_file_acks() -> Vec<Vec<u8>> {
    let name = |p: &str, t: Option<&str>| plugpull::model::FileName {
        path: p.into(),
        renamed_from: t.map(Into::into),
    };
    let frames = [
        (vec![ack(1)], vec![name("t0/d0/f0.c", None)]),
        (
            (0..3).map(ack).collect(),
            vec![
                name("t0/a.c", None),
                name("t0/d1/b.h", Some("t0/d1/.b.h.tmp2")),
                name(&"x/".repeat(300), None),
            ],
        ),
    ];
    frames
        .into_iter()
        .map(|(acks, names)| {
            let f = Msg::FileAcks {
                first: 7,
                acks,
                names,
            }
            .encode();
            f[frame::LEN_BYTES + 1..f.len() - frame::CRC_BYTES].to_vec()
        })
        .collect()
}

fn seeds_log() -> Vec<Vec<u8>> {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.acklog");
    let log = RunLog {
        files: Default::default(),
        descriptor: descriptor(),
        acks: (0..5).map(ack).collect(),
        events: vec![WitnessEvent {
            at_ns: 1,
            kind: "connect".into(),
            peer: "p".into(),
            durable_acks: 0,
            last_ack_at_ns: None,
            last_frame_at_ns: None,
            detail: "d".into(),
        }],
    };
    write_log_file(&p, &log).unwrap();
    let good = std::fs::read(&p).unwrap();
    let mut torn = good.clone();
    torn.truncate(good.len() - 5);
    let empty = RunLog {
        files: Default::default(),
        acks: vec![],
        events: vec![],
        ..log
    };
    write_log_file(&p, &empty).unwrap();
    let fetched_empty = std::fs::read(&p).unwrap();
    // A witness's own log (no end mark: what recovery opens), and the same log with a
    // damaged frame that valid frames follow (what recovery must refuse).
    let d = descriptor();
    let mut w = plugpull::witness::store::log::AckLog::create(
        &plugpull::witness::store::storage::FsStorage,
        tmp.path(),
        &d,
    )
    .unwrap();
    for i in 0..3 {
        w.append_acks(i * 2, &[ack(i * 2), ack(i * 2 + 1)]).unwrap();
        w.commit().unwrap();
    }
    let witness = std::fs::read(w.path()).unwrap();
    let mut damaged = witness.clone();
    // Inside the first of the three ack frames.
    let last3: usize = (0..3)
        .map(|_| compact_frames(&[ack(0), ack(1)]).len())
        .sum();
    let at = witness.len() - last3 + 20;
    damaged[at] ^= 0x08;
    let d3 = RunDescriptor {
        run_id: RunId([0x3e; 16]),
        ..descriptor()
    };
    let mut w3 = plugpull::witness::store::log::AckLog::create(
        &plugpull::witness::store::storage::FsStorage,
        tmp.path(),
        &d3,
    )
    .unwrap();
    for c in interleaved_acks(60).chunks(20) {
        w3.append_acks(w3.appended_acks(), c).unwrap();
        w3.commit().unwrap();
    }
    let three_streams = std::fs::read(w3.path()).unwrap();
    // Logs written before CompactAcks (format version 1).
    let v1 = ["witness.acklog", "fetched.acklog"].map(|n| {
        std::fs::read(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/data/acklog-v1")
                .join(n),
        )
        .unwrap()
    });
    let [v1_witness, v1_fetched] = v1;
    vec![
        good,
        torn,
        fetched_empty,
        witness,
        damaged,
        three_streams,
        v1_witness,
        v1_fetched,
    ]
}

fn seeds_record() -> Vec<Vec<u8>> {
    let run = RunId([7; 16]);
    let key = RunKey::new(run);
    let rec = ack(3).record;
    let mut buf = vec![0u8; rec.len_bytes() as usize];
    fill_record(&mut buf, &key, run, &rec);
    vec![buf[..512].to_vec(), buf, vec![0; 512]]
}

fn seeds_journal() -> Vec<Vec<u8>> {
    let run = fuzz::JOURNAL_FUZZ_RUN;
    let len = fuzz::JOURNAL_FUZZ_LOG.len() as u64;
    let other = RunId([9; 16]);
    let full = fuzz::journal_bytes(
        1,
        &[
            (run, 0, b"rewritten start"),
            (run, len, b"appended after the log"),
            (other, 0, b"a run without a log"),
            (run, len + 22, b"and more"),
            (run, len + 1000, b"past a hole"),
        ],
    );
    let torn = full[..full.len() - 5].to_vec();
    vec![fuzz::journal_bytes(1, &[]), full, torn]
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "journal_replay" => seeds_journal(),
        "frame_decoder" => seeds_frame(),
        "log_recovery" => seeds_log(),
        "record_decoder" => seeds_record(),
        "compact_acks" => seeds_compact(),
        "file_acks" => seeds_file_acks(),
        _ => unreachable!(),
    }
}

/// Committed corpus files, plus the generated seeds (so the test works even if the
/// corpus directory is missing).
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let mut v = seeds(target);
    if let Ok(rd) = std::fs::read_dir(corpus_dir(target)) {
        let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        v.extend(files.iter().filter_map(|p| std::fs::read(p).ok()));
    }
    v
}

fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(7) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len() as u64) as usize;
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = rng.below(v.len() as u64) as usize;
                v[i] = [0, 0xff, 0x7f, 0x80, 1][rng.below(5) as usize];
            }
            2 => {
                let n = rng.below(v.len() as u64 + 1) as usize;
                v.truncate(n);
            }
            3 => {
                let at = rng.below(v.len() as u64 + 1) as usize;
                let junk: Vec<u8> = (0..rng.below(32)).map(|_| rng.next_u64() as u8).collect();
                v.splice(at..at, junk);
            }
            4 if !other.is_empty() => {
                let at = rng.below(v.len() as u64 + 1) as usize;
                let from = rng.below(other.len() as u64) as usize;
                v.splice(at..at, other[from..].iter().copied().take(64));
            }
            5 if v.len() >= 4 => {
                // Lengths are where decoders go wrong: rewrite a u32 somewhere.
                let i = rng.below(v.len() as u64 - 3) as usize;
                let x = [
                    0u32,
                    1,
                    15,
                    16,
                    17,
                    u32::MAX,
                    1 << 24,
                    rng.next_u64() as u32,
                ][rng.below(8) as usize];
                v[i..i + 4].copy_from_slice(&x.to_le_bytes());
            }
            _ => {
                let n = rng.below(600) as usize;
                v = (0..n).map(|_| rng.next_u64() as u8).collect();
            }
        }
    }
    v
}

fn exercise(target: &str, f: fn(&[u8]), iterations: u64) {
    let seed = std::env::var("PLUGPULL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_f022);
    let corpus = corpus(target);
    for (i, c) in corpus.iter().enumerate() {
        if std::panic::catch_unwind(|| f(c)).is_err() {
            panic!("{target}: corpus input {i} failed: {c:02x?}");
        }
    }
    let mut rng = Rng::new(seed);
    for n in 0..iterations {
        let base = &corpus[rng.below(corpus.len() as u64) as usize];
        let other = &corpus[rng.below(corpus.len() as u64) as usize];
        let input = mutate(&mut rng, base, other);
        if std::panic::catch_unwind(|| f(&input)).is_err() {
            panic!("{target}: mutated input {n} (PLUGPULL_FUZZ_SEED={seed}) failed: {input:02x?}");
        }
    }
    eprintln!(
        "{target}: {} corpus inputs and {iterations} mutations, no failure",
        corpus.len()
    );
}

fn iterations(default: u64) -> u64 {
    std::env::var("PLUGPULL_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn frame_decoder_corpus_and_mutations() {
    exercise("frame_decoder", fuzz::frame_decoder, iterations(200_000));
}

#[test]
fn log_recovery_corpus_and_mutations() {
    // Each input is a file created, recovered and reopened: fewer iterations.
    exercise("log_recovery", fuzz::log_recovery, iterations(5_000));
}

#[test]
fn journal_replay_corpus_and_mutations() {
    // Each input is a directory with a log and a journal, replayed: fewer iterations.
    exercise("journal_replay", fuzz::journal_replay, iterations(3_000));
}

#[test]
fn compact_acks_corpus_and_mutations() {
    exercise("compact_acks", fuzz::compact_acks, iterations(100_000));
}

#[test]
fn file_acks_corpus_and_mutations() {
    exercise("file_acks", fuzz::file_acks, iterations(100_000));
}

#[test]
fn record_decoder_corpus_and_mutations() {
    exercise("record_decoder", fuzz::record_decoder, iterations(200_000));
}

/// Writes the generated seeds into fuzz/corpus/<target>/seed-N.
#[test]
#[ignore = "a tool, not a test: rewrites fuzz/corpus; run as docs/fuzzing.md says"]
fn write_seed_corpus() {
    for t in [
        "frame_decoder",
        "log_recovery",
        "journal_replay",
        "record_decoder",
        "compact_acks",
        "file_acks",
    ] {
        let dir = corpus_dir(t);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds(t).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
        }
    }
}

// ---- property tests: generated values round-trip through encode and decode ---------

fn random_ack(rng: &mut Rng) -> Ack {
    let sectors = 1 + rng.below(1 << 20) as u32;
    Ack {
        record: RecordId {
            stream: rng.next_u64() as u16,
            seq: rng.next_u64(),
            // Any sector-aligned offset whose record ends within u64.
            offset: rng.below(u64::MAX / 512 - (1 << 21)) * 512,
            sectors,
            write_time_ns: rng.next_u64(),
        },
        flushed_ns: rng.next_u64(),
    }
}

fn random_text(rng: &mut Rng) -> String {
    (0..rng.below(40))
        .map(|_| char::from_u32(rng.below(0x800) as u32).unwrap_or('?'))
        .collect()
}

fn random_msg(rng: &mut Rng) -> Msg {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
    match rng.below(9) {
        0 => {
            let n = rng.below(300) as usize;
            Msg::Acks {
                first: rng.below(u64::MAX / 2),
                acks: (0..n).map(|_| random_ack(rng)).collect(),
            }
        }
        1 => Msg::Durable {
            durable_acks: rng.next_u64(),
        },
        2 => Msg::Welcome {
            version: rng.next_u64() as u16,
            durable_acks: rng.next_u64(),
        },
        3 => Msg::FetchEnd {
            acks: rng.next_u64(),
        },
        4 => Msg::Bye {
            reason: random_text(rng),
        },
        5 => Msg::Error {
            message: random_text(rng),
        },
        6 => Msg::Auth {
            version: rng.next_u64() as u16,
            nonce,
        },
        7 => Msg::Challenge { nonce },
        _ => Msg::Fetch(RunSelector::Run(RunId(nonce))),
    }
}

#[test]
fn property_messages_round_trip_plain_and_sealed() {
    let mut rng = Rng::new(0xb0b);
    let key = Key::from_secret(b"property test key 0123").unwrap();
    let mut c = Session::client(&key, &[5; NONCE_BYTES], &[6; NONCE_BYTES]);
    let mut w = Session::witness(&key, &[5; NONCE_BYTES], &[6; NONCE_BYTES]);
    let mut stream = Vec::new();
    let mut sent = Vec::new();
    for _ in 0..3000 {
        let m = random_msg(&mut rng);
        let plain = m.encode();
        let frame::Decoded::Frame(f) = frame::decode(&plain) else {
            panic!("{m:?} does not decode")
        };
        assert_eq!(f.len_bytes, plain.len());
        assert_eq!(Msg::decode(&f).unwrap(), m);
        let start = stream.len();
        m.encode_into(&mut stream);
        c.sealer.seal(&mut stream, start);
        sent.push(m);
    }
    // The whole sealed stream decodes in order, every MAC checks, nothing is left.
    let mut off = 0;
    for m in &sent {
        let frame::Decoded::Frame(f) = frame::decode(&stream[off..]) else {
            panic!("sealed stream broke at {off}")
        };
        w.opener.open(&f).unwrap();
        assert_eq!(&Msg::decode(&f).unwrap(), m);
        off += f.len_bytes;
    }
    assert_eq!(off, stream.len());
}

#[test]
fn property_stamps_round_trip() {
    let mut rng = Rng::new(0x57a3);
    let run = RunId([9; 16]);
    let key = RunKey::new(run);
    for _ in 0..300 {
        let mut rec = random_ack(&mut rng).record;
        rec.sectors = 1 + rng.below(16) as u32;
        let mut buf = vec![0u8; rec.len_bytes() as usize];
        fill_record(&mut buf, &key, run, &rec);
        for (i, sector) in buf.chunks(512).enumerate() {
            let st = plugpull::record::decode_stamp(sector).unwrap();
            assert_eq!((st.run, st.record, st.index), (run, rec, i as u32));
            assert!(plugpull::record::content_matches(sector, &st));
        }
    }
}
