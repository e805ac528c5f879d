use super::*;
use crate::device::FlushMethod;
use crate::device::identity::DeviceIdentity;
use crate::model::WriterSettings;
use crate::record::RecordId;

pub(crate) fn sample_descriptor(run: u8) -> RunDescriptor {
    RunDescriptor {
        run_id: RunId([run; 16]),
        format_version: 1,
        plugpull_version: "test".into(),
        host: "h".into(),
        started_at: "2024-01-01T00:00:00Z".into(),
        device: DeviceIdentity {
            target: "/dev/x".into(),
            kind: "file".into(),
            ..Default::default()
        },
        settings: WriterSettings {
            region_offset: 0,
            region_bytes: 1 << 20,
            record_bytes_min: 4096,
            record_bytes_max: 4096,
            placement: "sequential".into(),
            streams: 1,
            flush: FlushMethod::Fdatasync,
            direct: true,
            seed: 5,
            max_records_unacked: None,
            io: Default::default(),
        },
        command: vec!["plugpull".into()],
        tree: None,
    }
}

pub(crate) fn ack(i: u64) -> Ack {
    Ack {
        record: RecordId {
            stream: (i % 3) as u16,
            seq: i,
            offset: i * 4096,
            sectors: 8,
            write_time_ns: 1_000 + i,
        },
        flushed_ns: 2_000 + i,
    }
}

fn round_trip(m: Msg) {
    let bytes = m.encode();
    match frame::decode(&bytes) {
        frame::Decoded::Frame(f) => {
            assert_eq!(f.len_bytes, bytes.len());
            assert_eq!(Msg::decode(&f).unwrap(), m);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_message_round_trips() {
    let d = sample_descriptor(7);
    for m in [
        Msg::FileHeader {
            version: LOG_VERSION,
        },
        Msg::Descriptor(d.clone()),
        Msg::Event(WitnessEvent {
            at_ns: 5,
            kind: "connect".into(),
            peer: "1.2.3.4:5".into(),
            durable_acks: 3,
            last_ack_at_ns: Some(4),
            last_frame_at_ns: None,
            detail: "x".into(),
        }),
        Msg::Hello {
            version: PROTOCOL_VERSION,
            resume: true,
            descriptor: d.clone(),
        },
        Msg::Welcome {
            version: PROTOCOL_VERSION,
            durable_acks: u64::MAX,
        },
        Msg::Acks {
            first: 10,
            acks: (10..20).map(ack).collect(),
        },
        Msg::Acks {
            first: 0,
            acks: vec![],
        },
        Msg::Durable { durable_acks: 9 },
        Msg::Auth {
            version: PROTOCOL_VERSION,
            nonce: [9; NONCE_BYTES],
        },
        Msg::Challenge {
            nonce: [8; NONCE_BYTES],
        },
        Msg::Heartbeat,
        Msg::Bye {
            reason: "done".into(),
        },
        Msg::Error {
            message: "bad".into(),
        },
        Msg::Fetch(RunSelector::Run(RunId([3; 16]))),
        Msg::Fetch(RunSelector::LatestForDevice("serial:X".into())),
        Msg::FetchRun(d.clone()),
        Msg::FetchEnd { acks: 77 },
        Msg::ListRuns,
        Msg::RunInfo(Box::new(RunInfo {
            descriptor: d,
            acks: 5,
            last_flushed_ns: Some(123),
            damaged: false,
            verified: Some(mark()),
            first_heard_ns: Some(1_700_000_000_000_000_000),
        })),
        Msg::RecordVerdict(Box::new(mark())),
    ] {
        round_trip(m);
    }
}

#[test]
fn ack_entry_layout_is_fixed() {
    let mut out = Vec::new();
    put_ack(&mut out, &ack(1));
    assert_eq!(out.len(), ACK_ENTRY_BYTES);
    assert_eq!(&out[0..2], &1u16.to_le_bytes());
    assert_eq!(&out[2..4], &[0, 0]);
    assert_eq!(&out[4..8], &8u32.to_le_bytes());
    assert_eq!(&out[8..16], &1u64.to_le_bytes());
    assert_eq!(&out[16..24], &4096u64.to_le_bytes());
    assert_eq!(&out[24..32], &1001u64.to_le_bytes());
    assert_eq!(&out[32..40], &2001u64.to_le_bytes());
}

fn decode_payload(ty: FrameType, payload: &[u8]) -> Result<Msg, DecodeError> {
    let bytes = frame::encode(ty, payload);
    match frame::decode(&bytes) {
        frame::Decoded::Frame(f) => Msg::decode(&f),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rejects_bad_payloads() {
    // Count says 2 acks, one present.
    let mut p = 0u64.to_le_bytes().to_vec();
    p.extend_from_slice(&2u32.to_le_bytes());
    p.extend_from_slice(&[0; ACK_ENTRY_BYTES]);
    assert!(decode_payload(FrameType::Acks, &p).is_err());
    assert!(decode_payload(FrameType::Acks, &[1, 2, 3]).is_err());
    // Overflowing numbering.
    let mut p = u64::MAX.to_le_bytes().to_vec();
    p.extend_from_slice(&1u32.to_le_bytes());
    p.extend_from_slice(&[0; ACK_ENTRY_BYTES]);
    assert!(decode_payload(FrameType::Acks, &p).is_err());
    assert!(decode_payload(FrameType::Durable, &[1, 2, 3]).is_err());
    assert!(decode_payload(FrameType::Welcome, &[1]).is_err());
    assert!(decode_payload(FrameType::Auth, &[1, 0, 2]).is_err());
    assert!(decode_payload(FrameType::Challenge, &[1; 17]).is_err());
    assert!(decode_payload(FrameType::Heartbeat, &[1]).is_err());
    assert!(decode_payload(FrameType::Bye, &[0xff, 0xfe]).is_err());
    assert!(decode_payload(FrameType::Fetch, &[9]).is_err());
    assert!(decode_payload(FrameType::Fetch, &[1, 2]).is_err());
    assert!(decode_payload(FrameType::FileHeader, b"NOTMAGIC\x01\x00").is_err());
    let mut hello = PROTOCOL_VERSION.to_le_bytes().to_vec();
    hello.extend_from_slice(&[0, 0]);
    hello.extend_from_slice(b"{not json");
    assert!(decode_payload(FrameType::Hello, &hello).is_err());
}

#[test]
fn hello_of_other_version_reports_the_version() {
    let mut hello = 99u16.to_le_bytes().to_vec();
    hello.extend_from_slice(&[0, 0]);
    hello.extend_from_slice(b"whatever a future writer sends");
    let e = decode_payload(FrameType::Hello, &hello).unwrap_err();
    assert!(matches!(e, DecodeError::Version(VersionMismatch(99))));
}

#[test]
fn the_list_selector_is_one_byte() {
    assert_eq!(
        Msg::ListRuns.encode()[..],
        frame::encode(FrameType::Fetch, &[3])[..]
    );
    assert!(decode_payload(FrameType::Fetch, &[3, 0]).is_err());
}

fn mark() -> VerdictMark {
    VerdictMark {
        run_id: RunId([3; 16]).hex(),
        verdict: "FAIL".into(),
        failing: 12,
        target: "/dev/sdb".into(),
        verified_at: "2026-11-30T15:00:00Z".into(),
    }
}

/// A RunInfo from a witness older than verdict notes has no `verified` key: it reads.
#[test]
fn run_info_without_verified_reads_as_not_verified() {
    let d = serde_json::to_value(sample_descriptor(7)).unwrap();
    let old =
        serde_json::json!({"descriptor": d, "acks": 1, "last_flushed_ns": null, "damaged": false});
    let i: RunInfo = serde_json::from_value(old).unwrap();
    assert_eq!(i.verified, None);
}
