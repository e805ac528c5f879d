//! Stamps, regeneration and the pinned bytes of both format versions.

use super::*;

fn rec() -> RecordId {
    RecordId {
        stream: 3,
        seq: 77,
        offset: 8192,
        sectors: 8,
        write_time_ns: 1_700_000_000_123,
    }
}

#[test]
fn stamp_round_trip() {
    let run = RunId([7; 16]);
    let mut s = [0u8; SECTOR];
    encode_stamp(&mut s, run, &rec(), 5);
    let d = decode_stamp(&s).unwrap();
    assert_eq!(d.run, run);
    assert_eq!(d.record, rec());
    assert_eq!(d.index, 5);
    assert!(content_matches(&s, &d));
    s[100] ^= 4;
    assert!(!content_matches(&s, &d), "a content bit flip must be seen");
    assert_eq!(d.home(), 8192 + 5 * 512);
}

#[test]
fn any_flipped_stamp_bit_is_caught() {
    let run = RunId([7; 16]);
    let mut s = [0u8; SECTOR];
    encode_stamp(&mut s, run, &rec(), 5);
    for bit in 0..STAMP_LEN * 8 {
        let mut t = s;
        t[bit / 8] ^= 1 << (bit % 8);
        assert!(decode_stamp(&t).is_err(), "bit {bit} flip went unnoticed");
    }
}

#[test]
fn zeros_have_no_magic() {
    assert_eq!(decode_stamp(&[0u8; SECTOR]), Err(StampError::NoMagic));
}

#[test]
fn record_regenerates_sector_by_sector() {
    let run = RunId([9; 16]);
    let key = RunKey::new(run);
    let r = rec();
    let mut buf = vec![0u8; r.len_bytes() as usize];
    fill_record(&mut buf, &key, run, &r);
    for i in 0..r.sectors {
        let mut e = [0u8; SECTOR];
        expected_sector(&mut e, &key, run, &r, i);
        assert_eq!(&buf[i as usize * SECTOR..][..SECTOR], &e[..]);
    }
    // Content differs between records and between sectors.
    assert_ne!(buf[STAMP_LEN..SECTOR], buf[SECTOR + STAMP_LEN..2 * SECTOR]);
}

#[test]
fn prepared_then_timed_equals_filled() {
    let run = RunId([5; 16]);
    let key = RunKey::new(run);
    let r = rec();
    let mut a = vec![0u8; r.len_bytes() as usize];
    let mut b = a.clone();
    fill_record(&mut a, &key, run, &r);
    prepare_record(
        &mut b,
        &key,
        run,
        &RecordId {
            write_time_ns: 0,
            ..r
        },
    );
    assert_ne!(a, b);
    set_write_time(&mut b, r.write_time_ns);
    assert_eq!(a, b);
}

#[test]
fn bit_difference_counts() {
    let a = [0u8; 13];
    let mut b = a;
    b[0] = 0b101;
    b[12] = 0x80;
    assert_eq!(bit_difference(&a, &b), 3);
}

#[test]
fn run_id_hex_round_trip() {
    let r = RunId::random();
    assert_eq!(RunId::parse(&r.hex()), Some(r));
    assert_eq!(RunId::parse("zz"), None);
}

/// The bytes of a record are the on-disk format: a verifier of any later build must
/// regenerate what an older writer wrote. This pins one record's bytes (stamps and
/// content) per format version by their BLAKE3 hash, so a faster generator that changes
/// a single bit fails here instead of in the field (docs/format.md).
#[test]
fn record_bytes_are_pinned() {
    let run = RunId(*b"plugpull-format1");
    let pinned = |version: u16| {
        let key = RunKey::for_version(run, version).unwrap();
        let r = rec();
        let mut buf = vec![0u8; r.len_bytes() as usize];
        fill_record(&mut buf, &key, run, &r);
        blake3::hash(&buf).to_hex().to_string()
    };
    assert_eq!(
        pinned(1),
        "be9648e33a7e160c33ae4ca7d017e6a8f07468d27b2d0aead70c0611cc5eb67c",
        "the version 1 record bytes changed: version 1 runs would no longer verify"
    );
    assert_eq!(
        pinned(2),
        "5c061c68cffe555bbefef8edc85138e33e9683e1fce031ba0d27e13c5b90fe0a",
        "the version 2 record format changed"
    );
}

#[test]
fn both_versions_decode_and_regenerate() {
    let run = RunId([9; 16]);
    let r = rec();
    for version in [1, 2] {
        let key = RunKey::for_version(run, version).unwrap();
        let mut buf = vec![0u8; r.len_bytes() as usize];
        fill_record(&mut buf, &key, run, &r);
        for i in 0..r.sectors {
            let sector = &buf[i as usize * SECTOR..][..SECTOR];
            let st = decode_stamp(sector).unwrap();
            assert_eq!((st.version, st.index, st.record), (version, i, r));
            assert!(content_matches(sector, &st));
            let mut e = [0u8; SECTOR];
            expected_sector(&mut e, &key, run, &r, i);
            assert_eq!(sector, &e[..], "version {version} sector {i}");
        }
    }
    // A stamp of a version this build does not know is reported as such.
    let mut s = [0u8; SECTOR];
    encode_stamp_version(&mut s, 3, run, &r, 0);
    assert_eq!(decode_stamp(&s), Err(StampError::UnknownVersion(3)));
    encode_stamp_version(&mut s, 0, run, &r, 0);
    assert_eq!(decode_stamp(&s), Err(StampError::UnknownVersion(0)));
}

/// Content bytes (stamps left out) of `records` 4 KiB records of `streams` streams.
fn content_bytes(run: RunId, streams: u16, records: u64) -> Vec<u8> {
    let key = RunKey::new(run);
    let mut out = Vec::new();
    for stream in 0..streams {
        for seq in 1..=records {
            let r = RecordId {
                stream,
                seq,
                offset: seq * 4096,
                sectors: 8,
                write_time_ns: 1,
            };
            let mut buf = vec![0u8; 4096];
            fill_record(&mut buf, &key, run, &r);
            for sector in buf.chunks_exact(SECTOR) {
                out.extend_from_slice(&sector[STAMP_LEN..]);
            }
        }
    }
    out
}

/// Pearson's chi-square of the counts against a uniform distribution.
fn chi_square(counts: &[u64]) -> f64 {
    let n: u64 = counts.iter().sum();
    let e = n as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum()
}

/// What a compressing or deduplicating controller could exploit: skewed byte or byte-pair
/// frequencies, or repeated sectors within a run or across runs. 1 MiB of records (256
/// records, 2 streams). Bounds: chi-square of 255 degrees of freedom has mean 255 and
/// standard deviation 22.6, of 65535 mean 65535 and deviation 362; 7 deviations either
/// side (p < 1e-11 for a good generator). Fails for a content word of j alone (bytes
/// mostly zero) and for an unkeyed wyrand (records equal).
#[test]
fn content_is_incompressible() {
    let a = content_bytes(RunId([1; 16]), 2, 128);
    let mut bytes = [0u64; 256];
    let mut pairs = vec![0u64; 65536];
    for w in a.chunks_exact(2) {
        bytes[w[0] as usize] += 1;
        bytes[w[1] as usize] += 1;
        pairs[(w[0] as usize) << 8 | w[1] as usize] += 1;
    }
    let c1 = chi_square(&bytes);
    assert!(
        (255.0 - 7.0 * 22.6..255.0 + 7.0 * 22.6).contains(&c1),
        "byte chi-square {c1}"
    );
    let c2 = chi_square(&pairs);
    assert!(
        (65535.0 - 7.0 * 362.0..65535.0 + 7.0 * 362.0).contains(&c2),
        "pair chi-square {c2}"
    );
    let mut sectors: Vec<&[u8]> = a.chunks_exact(CONTENT_LEN).collect();
    let b = content_bytes(RunId([2; 16]), 2, 128);
    sectors.extend(b.chunks_exact(CONTENT_LEN));
    let n = sectors.len();
    sectors.sort_unstable();
    sectors.dedup();
    assert_eq!(sectors.len(), n, "two sectors' contents are equal");
}
