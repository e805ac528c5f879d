use super::*;
use crate::record::RecordId;
use crate::wire::frame::{Decoded, decode};
use crate::wire::msg::Msg;

fn ack(seq: u64, sectors: u32) -> Ack {
    Ack {
        record: RecordId {
            stream: 0,
            seq,
            offset: 0,
            sectors,
            write_time_ns: 1_000 + seq,
        },
        flushed_ns: 2_000 + seq,
    }
}

fn name(path: &str, from: Option<&str>) -> FileName {
    FileName {
        path: path.into(),
        renamed_from: from.map(Into::into),
    }
}

fn one_frame(b: &[u8]) -> Msg {
    match decode(b) {
        Decoded::Frame(f) => {
            assert_eq!(f.len_bytes, b.len());
            Msg::decode(&f).expect("decodes")
        }
        other => panic!("not one frame: {other:?}"),
    }
}

#[test]
fn round_trip_keeps_acks_names_and_numbering() {
    let acks = vec![ack(1, 2), ack(2, 1), ack(5, 32)];
    let names = vec![
        name("t0/d0/f0.c", None),
        name("t0/d0/f1.h", Some("t0/d0/.f1.h.tmp2")),
        name("t0/d1/é.txt", None),
    ];
    let m = Msg::FileAcks {
        first: 7,
        acks: acks.clone(),
        names: names.clone(),
    };
    let b = m.encode();
    assert_eq!(b[4], 0x0A, "the frame type byte");
    // Header 12, then per entry 40 + 2 + path + 2 + from.
    let payload: usize = 12
        + names
            .iter()
            .map(|n| 44 + n.path.len() + n.renamed_from.as_ref().map_or(0, |f| f.len()))
            .sum::<usize>();
    assert_eq!(b.len(), 4 + 1 + payload + 4);
    assert_eq!(one_frame(&b), m);
}

#[test]
fn the_layout_is_the_documented_one() {
    let m = Msg::FileAcks {
        first: 3,
        acks: vec![ack(9, 4)],
        names: vec![name("a/b", Some("a/.t"))],
    };
    let b = m.encode();
    let p = &b[5..b.len() - 4];
    assert_eq!(&p[0..8], &3u64.to_le_bytes());
    assert_eq!(&p[8..12], &1u32.to_le_bytes());
    let mut e = Vec::new();
    put_ack(&mut e, &ack(9, 4));
    assert_eq!(&p[12..52], &e[..]);
    assert_eq!(&p[52..54], &3u16.to_le_bytes());
    assert_eq!(&p[54..57], b"a/b");
    assert_eq!(&p[57..59], &4u16.to_le_bytes());
    assert_eq!(&p[59..63], b"a/.t");
    assert_eq!(p.len(), 63);
}

#[test]
fn the_encoder_stops_at_the_byte_budget() {
    let long = "d/".repeat(2000) + "f";
    let acks: Vec<Ack> = (1..=200).map(|i| ack(i, 1)).collect();
    let names: Vec<FileName> = acks.iter().map(|_| name(&long, Some(&long))).collect();
    let mut out = Vec::new();
    let n = encode_file_acks_into(&mut out, 0, acks.iter().zip(&names));
    assert!(n > 0 && n < 200, "took {n}");
    assert!(out.len() < 256 << 10, "a frame of {} bytes", out.len());
    let Msg::FileAcks { acks: got, .. } = one_frame(&out) else {
        panic!("not FileAcks")
    };
    assert_eq!(got, acks[..n]);
}

#[test]
fn malformed_payloads_are_refused_and_leave_the_output_as_it_was() {
    let m = Msg::FileAcks {
        first: 0,
        acks: vec![ack(1, 1), ack(2, 1)],
        names: vec![name("a/b", None), name("a/c", Some("a/.c"))],
    };
    let b = m.encode();
    let p = b[5..b.len() - 4].to_vec();
    let (mut acks, mut names) = (vec![ack(99, 1)], Vec::new());
    // Every cut is refused.
    for cut in 0..p.len() {
        assert!(decode_file_acks_into(&p[..cut], &mut acks, &mut names).is_err());
        assert_eq!((acks.len(), names.len()), (1, 0));
    }
    // A byte too many.
    let mut more = p.clone();
    more.push(0);
    assert!(decode_file_acks_into(&more, &mut acks, &mut names).is_err());
    // A name longer than any path.
    let mut long = p.clone();
    long[52..54].copy_from_slice(&5000u16.to_le_bytes());
    assert!(decode_file_acks_into(&long, &mut acks, &mut names).is_err());
    // Not UTF-8.
    let mut bad = p.clone();
    bad[54] = 0xff;
    assert!(decode_file_acks_into(&bad, &mut acks, &mut names).is_err());
    // Too many entries.
    let mut many = p.clone();
    many[8..12].copy_from_slice(&(MAX_FILE_ACKS_PER_FRAME as u32 + 1).to_le_bytes());
    assert!(decode_file_acks_into(&many, &mut acks, &mut names).is_err());
    assert_eq!((acks.len(), names.len()), (1, 0));
    assert!(decode_file_acks_into(&p, &mut acks, &mut names).is_ok());
    assert_eq!((acks.len(), names.len()), (3, 2));
    assert!(plausible(p.len() + 1, &p));
}
