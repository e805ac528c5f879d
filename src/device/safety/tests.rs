//! The refusals on files made to look like data, file systems and plugpull targets.

use super::super::marker;
use super::probe::probe_with;
use super::signature::signature_outside;
use super::*;

/// `p` opened once, as a write target is.
fn opened(p: &Path) -> Target {
    match open::open_once(p, Flags::BUFFERED).unwrap() {
        Opened::Existing(t) => t,
        Opened::Missing(m) => panic!("{} is missing", m.display()),
    }
}

fn check(p: &Path, destroy: Option<&Path>) -> Result<(), SafetyError> {
    open_checked(p, Flags::BUFFERED, destroy, 0).map(|_| ())
}

fn hazards_at(p: &Path, region_offset: u64) -> Vec<Hazard> {
    hazards(&opened(p), region_offset).unwrap()
}

/// The hazards the hand-kept list and the other checks find, libblkid finding nothing.
fn hand_list_hazards(p: &Path, region_offset: u64) -> Vec<Hazard> {
    hazards_probed(&opened(p), region_offset, |_| Ok(vec![])).unwrap()
}

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
    let err = check(&p, None).unwrap_err().to_string();
    assert!(err.contains("--destroy-data-on"), "{err}");
    assert!(check(&p, Some(&p)).is_ok());
    let other = d.path().join("other");
    fs::write(&other, b"x").unwrap();
    assert!(
        check(&p, Some(&other)).is_err(),
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
    assert!(check(&d.path().join("new"), None).is_ok());
    let p = d.path().join("old-target");
    plugpull_file(&p, 0);
    assert_eq!(hazards_at(&p, 0), vec![]);
    let m = d.path().join("created-marker");
    let mut img = vec![0u8; 8192];
    img[4096..4608].copy_from_slice(&marker::encode(marker::Creator::Write, 4096));
    fs::write(&m, &img).unwrap();
    assert_eq!(hazards_at(&m, 4096), vec![]);
    assert_eq!(
        hazards_at(&m, 0),
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
    assert_eq!(hazards_at(&p, 0), vec![Hazard::ForeignFile]);
    plugpull_file(&p, 0);
    let good = fs::read(&p).unwrap();
    for (what, at) in [("stamp", 20), ("content", 300)] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        fs::write(&p, &bad).unwrap();
        assert_eq!(
            hazards_at(&p, 0),
            vec![Hazard::ForeignFile],
            "a flipped {what} bit"
        );
    }
    // A record sector copied away from its home.
    let mut moved = vec![0u8; 512];
    moved.extend_from_slice(&good[..512]);
    fs::write(&p, &moved).unwrap();
    assert_eq!(hazards_at(&p, 512), vec![Hazard::ForeignFile]);
    // A record sector whose record would run past the end of the file.
    fs::write(&p, &good[..1024]).unwrap();
    assert_eq!(hazards_at(&p, 0), vec![Hazard::ForeignFile]);
}

#[test]
fn plug_prefixed_text_file_is_not_a_plugpull_target() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("plugins.conf");
    let text = "PLUGINS enabled: audio, video\n".repeat(40);
    fs::write(&p, &text).unwrap();
    let err = check(&p, None).unwrap_err().to_string();
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
        hand_list_hazards(&p, 0),
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
    assert!(check(d.path(), Some(d.path())).is_err());
}

#[test]
fn without_libblkid_a_non_empty_target_is_refused_unless_named() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("old-target");
    plugpull_file(&p, 0);
    let t = opened(&p);
    let none = |f: &File| probe_with(f, &None, &None);
    let found = hazards_probed(&t, 0, none).unwrap();
    assert!(
        matches!(found.as_slice(), [Hazard::NoProbe(why)] if why.contains("install util-linux")),
        "{found:?}"
    );
    let err = check_hazards(&t, None, found.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("--destroy-data-on"), "{err}");
    assert!(check_hazards(&t, Some(&p), found).is_ok());
    // An empty file holds nothing to lose: no probe needed.
    let e = d.path().join("empty");
    fs::write(&e, b"").unwrap();
    assert_eq!(hazards_probed(&opened(&e), 0, none).unwrap(), vec![]);
}

/// What libblkid finds counts, except a magic whose bytes all lie in sectors that check
/// out as plugpull's: that is record content.
#[test]
fn a_libblkid_signature_counts_unless_inside_plugpull_sectors() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("old-target");
    plugpull_file(&p, 0);
    let sig = |magic| Found {
        kind: "minix".into(),
        usage: "file system".into(),
        magic,
    };
    let t = opened(&p);
    let inside = hazards_probed(&t, 0, |_| Ok(vec![sig(Some((1040, 2)))])).unwrap();
    assert_eq!(inside, vec![]);
    for magic in [Some((4096 + 1024, 2)), Some((4094, 4)), None] {
        let found = hazards_probed(&t, 0, |_| Ok(vec![sig(magic)])).unwrap();
        assert_eq!(
            found,
            vec![Hazard::Found(sig(magic).describe())],
            "{magic:?}"
        );
    }
}

/// The real wipefs and blkid, on a file holding a minix superblock: the hand-kept list
/// does not know minix, libblkid does.
#[test]
fn a_filesystem_only_libblkid_knows_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("minix.img");
    // A minix v3 superblock at 1024: s_ninodes, zones, and the magic 0x4d5a at 1048.
    let mut img = vec![0u8; 1 << 20];
    img[1024..1028].copy_from_slice(&64u32.to_le_bytes());
    img[1030..1032].copy_from_slice(&1u16.to_le_bytes());
    img[1032..1034].copy_from_slice(&1u16.to_le_bytes());
    img[1034..1036].copy_from_slice(&5u16.to_le_bytes());
    img[1044..1048].copy_from_slice(&1024u32.to_le_bytes());
    img[1048..1050].copy_from_slice(&0x4d5au16.to_le_bytes());
    img[1052..1054].copy_from_slice(&1024u16.to_le_bytes());
    fs::write(&p, &img).unwrap();
    assert_eq!(
        signature_in(&img),
        None,
        "the hand-kept list knows minix now"
    );
    let t = opened(&p);
    if probe::probe(&t.file).is_err() {
        eprintln!("no wipefs or blkid here: the libblkid half of this test did not run");
        return;
    }
    let found = hazards(&t, 0).unwrap();
    assert!(
        found
            .iter()
            .any(|h| matches!(h, Hazard::Found(s) if s.contains("minix"))),
        "{found:?}"
    );
    let err = check(&p, None).unwrap_err().to_string();
    assert!(
        err.contains("minix") && err.contains("--destroy-data-on"),
        "{err}"
    );
}
