//! The refusals on files made to look like data, file systems and plugpull targets.

use super::super::marker;
use super::signature::signature_outside;
use super::*;

#[test]
fn finds_ext4_and_gpt_and_mbr() {
    let mut b = vec![0u8; 128 * 1024];
    assert_eq!(signature_in(&b), None);
    b[1080] = 0x53;
    b[1081] = 0xEF;
    assert_eq!(signature_in(&b), Some("an ext2/3/4 file system"));
    let mut g = vec![0u8; 8192];
    g[512..520].copy_from_slice(b"EFI PART");
    assert_eq!(signature_in(&g), Some("a GPT partition table"));
    let mut m = vec![0u8; 1024];
    m[510] = 0x55;
    m[511] = 0xAA;
    assert_eq!(
        signature_in(&m),
        None,
        "boot signature alone with no partitions is not a table"
    );
    m[446 + 4] = 0x83;
    assert_eq!(signature_in(&m), Some("an MBR partition table"));
}

#[test]
fn foreign_file_refused_unless_named() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("precious");
    fs::write(&p, b"my thesis").unwrap();
    let err = check_write_target(&p, None, 0).unwrap_err().to_string();
    assert!(err.contains("--destroy-data-on"), "{err}");
    assert!(check_write_target(&p, Some(&p), 0).is_ok());
    let other = d.path().join("other");
    fs::write(&other, b"x").unwrap();
    assert!(
        check_write_target(&p, Some(&other), 0).is_err(),
        "naming another path must not unlock this one"
    );
    assert_eq!(fs::read(&p).unwrap(), b"my thesis");
}

/// A file holding one record of a run at `offset`, the rest zeros.
fn plugpull_file(p: &Path, offset: u64) {
    use crate::record::{RecordId, RunId, fill_record};
    let run = RunId([3; 16]);
    let rec = RecordId {
        stream: 0,
        seq: 1,
        offset,
        sectors: 8,
        write_time_ns: 1,
    };
    let mut img = vec![0u8; offset as usize + 8192];
    fill_record(
        &mut img[offset as usize..][..4096],
        &crate::record::RunKey::new(run),
        run,
        &rec,
    );
    fs::write(p, &img).unwrap();
}

#[test]
fn missing_and_plugpull_files_are_fine() {
    let d = tempfile::tempdir().unwrap();
    assert!(check_write_target(&d.path().join("new"), None, 0).is_ok());
    let p = d.path().join("old-target");
    plugpull_file(&p, 0);
    assert_eq!(hazards(&p, 0).unwrap(), vec![]);
    let m = d.path().join("created-marker");
    let mut img = vec![0u8; 8192];
    img[4096..4608].copy_from_slice(&marker::encode(marker::Creator::Write, 4096));
    fs::write(&m, &img).unwrap();
    assert_eq!(hazards(&m, 4096).unwrap(), vec![]);
    assert_eq!(
        hazards(&m, 0).unwrap(),
        vec![Hazard::ForeignFile],
        "a marker counts only at the offset it was written for"
    );
}

/// The magic alone, or a stamp that fails any check, is not a plugpull target: the
/// recognition needs the whole sector (both CRCs) at its own home.
#[test]
fn magic_alone_or_a_damaged_stamp_is_a_foreign_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t");
    let mut s = vec![0u8; 1024];
    s[..4].copy_from_slice(b"PLUG");
    fs::write(&p, &s).unwrap();
    assert_eq!(hazards(&p, 0).unwrap(), vec![Hazard::ForeignFile]);
    plugpull_file(&p, 0);
    let good = fs::read(&p).unwrap();
    for (what, at) in [("stamp", 20), ("content", 300)] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        fs::write(&p, &bad).unwrap();
        assert_eq!(
            hazards(&p, 0).unwrap(),
            vec![Hazard::ForeignFile],
            "a flipped {what} bit"
        );
    }
    // A record sector copied away from its home.
    let mut moved = vec![0u8; 512];
    moved.extend_from_slice(&good[..512]);
    fs::write(&p, &moved).unwrap();
    assert_eq!(hazards(&p, 512).unwrap(), vec![Hazard::ForeignFile]);
    // A record sector whose record would run past the end of the file.
    fs::write(&p, &good[..1024]).unwrap();
    assert_eq!(hazards(&p, 0).unwrap(), vec![Hazard::ForeignFile]);
}

#[test]
fn plug_prefixed_text_file_is_not_a_plugpull_target() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("plugins.conf");
    let text = "PLUGINS enabled: audio, video\n".repeat(40);
    fs::write(&p, &text).unwrap();
    let err = check_write_target(&p, None, 0).unwrap_err().to_string();
    assert!(err.contains("not a plugpull target"), "{err}");
    assert_eq!(fs::read_to_string(&p).unwrap(), text);
}

/// A valid plugpull sector at 0 does not hide an ext4 superblock at 1024.
#[test]
fn plugpull_sector_does_not_hide_other_signatures() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("img");
    plugpull_file(&p, 0);
    let mut img = fs::read(&p).unwrap();
    img.resize(64 * 1024, 0);
    img[4096..].fill(0);
    img[1080] = 0x53;
    img[1081] = 0xEF;
    // Sector 2 (1024..1536) now fails its CRCs: it is not ours, the signature counts.
    fs::write(&p, &img).unwrap();
    assert_eq!(
        hazards(&p, 0).unwrap(),
        vec![Hazard::Signature("an ext2/3/4 file system")]
    );
    // The same bytes inside a verified plugpull sector are record content.
    let mut ours = vec![false; 128];
    ours[2] = true;
    assert_eq!(signature_outside(&img, &ours), None);
}

#[test]
fn directories_are_refused() {
    let d = tempfile::tempdir().unwrap();
    assert!(check_write_target(d.path(), Some(d.path()), 0).is_err());
}
