//! Every signature libblkid knows is refused without `--destroy-data-on`, not only the
//! ones a hand-kept list names. Each test puts one kind of signature on a loop device
//! (the Debian tool that makes it, or, where Debian has none or the kernel cannot run it,
//! the header at the offsets libblkid probes), checks `blkid -p` sees it, then runs
//! `plugpull write` and `plugpull bench` and opens it the way the campaign agent does
//! (`write::open_target`, which goes through the same open-and-check as a campaign's
//! drive), and checks each refuses and the device's bytes are unchanged.
//!
//! md RAID members are written by hand too: `mdadm --create` needs the kernel's md
//! driver, which a container or CI kernel may lack, while the superblock libblkid reads
//! is a fixed layout (util-linux libblkid/src/superblocks/linux_raid.c).
//!
//! A type whose tool is missing skips with a visible SKIPPED line, and fails in CI
//! (`PLUGPULL_REQUIRE_ALL_TESTS=1`, with `.ci/run` installing the tools).

use crate::common;
use common::*;
use plugpull::le::u32_at;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// How a case puts its signature on the device.
enum Make {
    /// A command run with the device path appended.
    OnDevice(&'static [&'static str]),
    /// Something that writes the image file before it is attached.
    Image(fn(&Path)),
}

struct Case {
    /// Image size in MiB (the tool's minimum, rounded up).
    mb: u64,
    /// Tools the case needs besides losetup and blkid.
    tools: &'static [&'static str],
    /// What `blkid -p` must report (TYPE or PTTYPE) once the signature is there.
    expect: &'static str,
    make: Make,
}

/// Whether `tool` is installed (PATH or the sbin directories, as plugpull looks).
fn installed(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "PATH=\"$PATH:/usr/sbin:/sbin\" command -v {tool} >/dev/null"
        ))
        .status()
        .is_ok_and(|s| s.success())
}

fn blkid_says(dev: &str) -> String {
    let o = Command::new("blkid")
        .args(["-p", "-o", "export", dev])
        .output()
        .expect("blkid");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hash(dev: &str) -> blake3::Hash {
    let mut f = fs::File::open(dev).unwrap();
    let mut h = blake3::Hasher::new();
    std::io::copy(&mut f, &mut h).unwrap();
    h.finalize()
}

fn refused(case: Case) {
    let mut need = vec!["losetup", "blkid"];
    need.extend(case.tools);
    let missing: Vec<&str> = need.iter().copied().filter(|t| !installed(t)).collect();
    if !skip_unless(
        is_root() && missing.is_empty(),
        &format!("needs root and {}; missing: {missing:?}", need.join(", ")),
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("dev.img");
    fs::File::create(&img)
        .unwrap()
        .set_len(case.mb << 20)
        .unwrap();
    if let Make::Image(write) = &case.make {
        write(&img);
    }
    let lo = LoopDev::attach(&img, false);
    if let Make::OnDevice(argv) = &case.make {
        let out = Command::new(argv[0])
            .args(&argv[1..])
            .arg(lo.dev())
            .env("LVM_SUPPRESS_FD_WARNINGS", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{argv:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let seen = blkid_says(lo.dev());
    assert!(
        seen.lines()
            .any(|l| l == format!("TYPE={}", case.expect) || l == format!("PTTYPE={}", case.expect)),
        "blkid -p does not see {} on the test device: {seen}",
        case.expect
    );
    let before = hash(lo.dev());
    let w = WitnessProc::start(&d.path().join("w"));
    let dev = lo.dev().to_string();
    let r = run([
        "write",
        &dev,
        "--witness",
        &w.addr,
        "--count",
        "10",
        "--size",
        "1M",
    ]);
    assert_eq!(r.code, 2, "write was not refused: {r:?}");
    assert!(
        r.stderr.contains(&format!("--destroy-data-on {dev}")),
        "the refusal does not say how to override: {r:?}"
    );
    let b = run([
        "bench",
        "--quiet",
        "--size",
        "1M",
        "--sweep-sizes",
        "4k-8k",
        "--time-per-size",
        "20ms",
        &dev,
    ]);
    assert_eq!(b.code, 2, "bench was not refused: {b:?}");
    assert!(b.stderr.contains("--destroy-data-on"), "{b:?}");
    let agent = plugpull::write::open_target(
        &lo.path(),
        None,
        0,
        Some(1 << 20),
        plugpull::device::OpenOptions::default(),
    );
    match agent {
        Err(e) => assert!(e.to_string().contains("--destroy-data-on"), "{e}"),
        Ok(_) => panic!("the campaign's open of {dev} was not refused"),
    }
    assert_eq!(hash(lo.dev()), before, "the device's bytes changed");
    drop(w);
    if case.tools.contains(&"pvcreate") {
        let _ = Command::new("pvremove")
            .args(["-ff", "-y", lo.dev()])
            .env("LVM_SUPPRESS_FD_WARNINGS", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn at(img: &Path, off: u64, bytes: &[u8]) {
    let f = fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(bytes, off).unwrap();
}

fn len(img: &Path) -> u64 {
    fs::metadata(img).unwrap().len()
}

/// A file system image a tool builds from a directory (cramfs, squashfs), copied to the
/// start of the device image.
fn from_dir(img: &Path, argv: &[&str]) {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("hello"), b"hello\n").unwrap();
    let out_img = d.path().join("fs.img");
    let mut c = Command::new(argv[0]);
    c.arg(&src).arg(&out_img).args(&argv[1..]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{argv:?}: {out:?}");
    at(img, 0, &fs::read(&out_img).unwrap());
}

/// An md v1.x superblock at `off` (linux_raid.c: magic, major version 1, super_offset in
/// sectors, the checksum newer libblkid verifies).
fn md1(img: &Path, off: u64) {
    let mut sb = [0u8; 256];
    sb[0..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
    sb[4..8].copy_from_slice(&1u32.to_le_bytes());
    sb[16..32].copy_from_slice(&[0x5a; 16]);
    sb[32..38].copy_from_slice(b"pp:sig");
    sb[72..76].copy_from_slice(&1u32.to_le_bytes());
    sb[92..96].copy_from_slice(&2u32.to_le_bytes());
    sb[144..152].copy_from_slice(&(off >> 9).to_le_bytes());
    sb[168..184].copy_from_slice(&[0xa5; 16]);
    let mut sum: u64 = sb.chunks_exact(4).map(|w| u32_at(w, 0) as u64).sum();
    sum = (sum >> 32) + (sum & 0xffff_ffff);
    sb[216..220].copy_from_slice(&(sum as u32).to_le_bytes());
    at(img, off, &sb);
}

fn md090(img: &Path) {
    let off = (len(img) & !0xffff) - 0x10000;
    let mut sb = [0u8; 64];
    sb[0..4].copy_from_slice(&0xa92b_4efcu32.to_le_bytes());
    sb[8..12].copy_from_slice(&90u32.to_le_bytes());
    sb[20..24].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    sb[28..32].copy_from_slice(&1u32.to_le_bytes());
    sb[32..36].copy_from_slice(&((off >> 10) as u32).to_le_bytes());
    sb[36..40].copy_from_slice(&2u32.to_le_bytes());
    sb[40..44].copy_from_slice(&2u32.to_le_bytes());
    at(img, off, &sb);
}

/// ZFS: four uberblocks in label 0 (what libblkid 2.38 counts) and an XDR nvlist with a
/// guid, state and txg at 16 KiB (what newer libblkid reads instead).
fn zfs(img: &Path) {
    for i in 0..4u64 {
        at(img, (128 << 10) + i * 1024, &0x00ba_b10cu64.to_le_bytes());
    }
    let mut nv = vec![1u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut pair = |name: &str, value: u64| {
        let padded = name.len().div_ceil(4) * 4;
        let size = 12 + padded + 16;
        nv.extend_from_slice(&(size as u32).to_be_bytes());
        nv.extend_from_slice(&0u32.to_be_bytes());
        nv.extend_from_slice(&(name.len() as u32).to_be_bytes());
        nv.extend_from_slice(name.as_bytes());
        nv.resize(nv.len() + padded - name.len(), 0);
        nv.extend_from_slice(&8u32.to_be_bytes());
        nv.extend_from_slice(&1u32.to_be_bytes());
        nv.extend_from_slice(&value.to_be_bytes());
    };
    pair("guid", 0x1122_3344_5566_7788);
    pair("state", 0);
    pair("txg", 5);
    nv.extend_from_slice(&[0; 8]);
    at(img, 16 << 10, &nv);
}

/// HFS+: the volume header at 1024 ("H+", version 4, a 4096-byte block size).
fn hfsplus(img: &Path) {
    let mut h = [0u8; 512];
    h[0..2].copy_from_slice(b"H+");
    h[2..4].copy_from_slice(&4u16.to_be_bytes());
    h[40..44].copy_from_slice(&4096u32.to_be_bytes());
    at(img, 1024, &h);
}

/// APFS: a container superblock at 0 ("NXSB" at 32, type 1, 4096-byte blocks) with its
/// Fletcher-64 checksum (apfs.c).
fn apfs(img: &Path) {
    let mut b = vec![0u8; 4096];
    b[24..26].copy_from_slice(&1u16.to_le_bytes());
    b[32..36].copy_from_slice(b"NXSB");
    b[36..40].copy_from_slice(&4096u32.to_le_bytes());
    b[40..48].copy_from_slice(&4096u64.to_le_bytes());
    b[72..88].copy_from_slice(&[0x42; 16]);
    let (mut lo, mut hi) = (0u64, 0u64);
    for w in b[8..].chunks_exact(4) {
        lo += u32_at(w, 0) as u64;
        hi += lo;
    }
    let low = !((lo + hi) % 0xffff_ffff) as u32;
    let high = !((lo + low as u64) % 0xffff_ffff) as u32;
    let csum = (high as u64) << 32 | low as u64;
    b[0..8].copy_from_slice(&csum.to_le_bytes());
    at(img, 0, &b);
}

macro_rules! cases {
    ($($name:ident: $case:expr;)*) => {$(
        #[test]
        fn $name() {
            refused($case);
        }
    )*};
}

const LUKS: &[&str] = &[
    "sh",
    "-c",
    "printf k > /tmp/plugpull-sig-luks.key && cryptsetup luksFormat --batch-mode \
     --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file /tmp/plugpull-sig-luks.key \"$0\"",
];

cases! {
    ext2_is_refused: Case { mb: 16, tools: &["mkfs.ext2"], expect: "ext2",
        make: Make::OnDevice(&["mkfs.ext2", "-q", "-F"]) };
    ext3_is_refused: Case { mb: 16, tools: &["mkfs.ext3"], expect: "ext3",
        make: Make::OnDevice(&["mkfs.ext3", "-q", "-F"]) };
    ext4_is_refused: Case { mb: 16, tools: &["mkfs.ext4"], expect: "ext4",
        make: Make::OnDevice(&["mkfs.ext4", "-q", "-F"]) };
    xfs_is_refused: Case { mb: 300, tools: &["mkfs.xfs"], expect: "xfs",
        make: Make::OnDevice(&["mkfs.xfs", "-q", "-f"]) };
    btrfs_is_refused: Case { mb: 128, tools: &["mkfs.btrfs"], expect: "btrfs",
        make: Make::OnDevice(&["mkfs.btrfs", "-q", "-f"]) };
    f2fs_is_refused: Case { mb: 64, tools: &["mkfs.f2fs"], expect: "f2fs",
        make: Make::OnDevice(&["mkfs.f2fs", "-q", "-f"]) };
    vfat_is_refused: Case { mb: 16, tools: &["mkfs.vfat"], expect: "vfat",
        make: Make::OnDevice(&["mkfs.vfat"]) };
    exfat_is_refused: Case { mb: 16, tools: &["mkfs.exfat"], expect: "exfat",
        make: Make::OnDevice(&["mkfs.exfat"]) };
    ntfs_is_refused: Case { mb: 16, tools: &["mkfs.ntfs"], expect: "ntfs",
        make: Make::OnDevice(&["mkfs.ntfs", "-Q", "-F", "-q"]) };
    a_filesystem_only_libblkid_knows_is_refused_minix: Case { mb: 16, tools: &["mkfs.minix"],
        expect: "minix", make: Make::OnDevice(&["mkfs.minix", "-3"]) };
    a_filesystem_only_libblkid_knows_is_refused_bfs: Case { mb: 16, tools: &["mkfs.bfs"],
        expect: "bfs", make: Make::OnDevice(&["mkfs.bfs"]) };
    a_filesystem_only_libblkid_knows_is_refused_cramfs: Case { mb: 16, tools: &["mkfs.cramfs"],
        expect: "cramfs", make: Make::Image(|img| from_dir(img, &["mkfs.cramfs"])) };
    squashfs_is_refused: Case { mb: 16, tools: &["mksquashfs"], expect: "squashfs",
        make: Make::Image(|img| from_dir(img, &["mksquashfs", "-noappend", "-quiet"])) };
    jfs_is_refused: Case { mb: 32, tools: &["mkfs.jfs"], expect: "jfs",
        make: Make::OnDevice(&["mkfs.jfs", "-q"]) };
    reiserfs_is_refused: Case { mb: 64, tools: &["mkfs.reiserfs"], expect: "reiserfs",
        make: Make::OnDevice(&["mkfs.reiserfs", "-q", "-f"]) };
    nilfs2_is_refused: Case { mb: 160, tools: &["mkfs.nilfs2"], expect: "nilfs2",
        make: Make::OnDevice(&["mkfs.nilfs2", "-q", "-f"]) };
    md_raid_0_90_member_is_refused: Case { mb: 16, tools: &[], expect: "linux_raid_member",
        make: Make::Image(md090) };
    md_raid_1_0_member_is_refused: Case { mb: 16, tools: &[], expect: "linux_raid_member",
        make: Make::Image(|img| md1(img, (len(img) & !0xfff) - 0x2000)) };
    md_raid_1_1_member_is_refused: Case { mb: 16, tools: &[], expect: "linux_raid_member",
        make: Make::Image(|img| md1(img, 0)) };
    md_raid_1_2_member_is_refused: Case { mb: 16, tools: &[], expect: "linux_raid_member",
        make: Make::Image(|img| md1(img, 4096)) };
    lvm_physical_volume_is_refused: Case { mb: 16, tools: &["pvcreate"], expect: "LVM2_member",
        make: Make::OnDevice(&["pvcreate", "-ff", "-y", "-q"]) };
    luks_volume_is_refused: Case { mb: 32, tools: &["cryptsetup"], expect: "crypto_LUKS",
        make: Make::OnDevice(LUKS) };
    swap_area_is_refused: Case { mb: 16, tools: &["mkswap"], expect: "swap",
        make: Make::OnDevice(&["mkswap"]) };
    bcache_backing_device_is_refused: Case { mb: 16, tools: &["make-bcache"], expect: "bcache",
        make: Make::OnDevice(&["make-bcache", "-B"]) };
    zfs_member_is_refused: Case { mb: 64, tools: &[], expect: "zfs_member",
        make: Make::Image(zfs) };
    hfsplus_is_refused: Case { mb: 16, tools: &[], expect: "hfsplus",
        make: Make::Image(hfsplus) };
    apfs_is_refused: Case { mb: 16, tools: &[], expect: "apfs",
        make: Make::Image(apfs) };
}
