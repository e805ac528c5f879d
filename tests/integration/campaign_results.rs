//! Where a campaign's results go: only ever into a regular file of its own. A results
//! path naming a block device (with a file system on it) or a symbolic link to a user's
//! file is refused before anything is written, and the device or file is left byte for
//! byte as it was.

use crate::common;

use common::loopdev::LoopDev;
use std::path::{Path, PathBuf};
use std::process::Command;

fn config(dir: &Path) -> PathBuf {
    let p = dir.join("c.toml");
    std::fs::write(
        &p,
        r#"
[campaign]
cycles = 1
results = "r.jsonl"
delay = "10ms"
off = "5ms"
seed = 1

[target]
kind = "simdrive"
profile = "honest"
size = "4M"

[power]
driver = "simdrive"
"#,
    )
    .unwrap();
    p
}

/// `plugpull campaign --config CFG --results RESULTS`: exit code and stderr.
fn campaign_with_results(cfg: &Path, results: &Path) -> (i32, String) {
    let out = Command::new(common::bin())
        .args(["campaign", "--quiet", "--config"])
        .arg(cfg)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_all(p: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut v = Vec::new();
    std::fs::File::open(p).unwrap().read_to_end(&mut v).unwrap();
    v
}

#[test]
fn results_on_a_block_device_with_a_file_system_are_refused() {
    if !common::skip_unless(
        common::is_root() && common::have_tool("losetup") && common::have_tool("mkfs.ext4"),
        "needs root, losetup and mkfs.ext4 (a loop device with ext4 on it)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let img = d.path().join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let lo = LoopDev::attach(&img, false);
    let mk = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(lo.path())
        .output()
        .unwrap();
    assert!(
        mk.status.success(),
        "{}",
        String::from_utf8_lossy(&mk.stderr)
    );
    let before = read_all(&lo.path());
    let (code, err) = campaign_with_results(&config(d.path()), &lo.path());
    let after = read_all(&lo.path());
    assert!(before == after, "the device's bytes changed: {err}");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is a block device, not a regular file"),
        "the error says what the path is: {err}"
    );
    assert!(err.contains("campaign.results"), "and what to do: {err}");
}

#[test]
fn results_through_a_symlink_to_a_user_file_are_refused() {
    let d = tempfile::tempdir().unwrap();
    // A link to an empty file: nothing to parse, and still never written through.
    let empty = d.path().join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let link2 = d.path().join("results2.jsonl");
    std::os::unix::fs::symlink(&empty, &link2).unwrap();
    let (code, err) = campaign_with_results(&config(d.path()), &link2);
    assert_eq!(
        std::fs::read(&empty).unwrap(),
        b"",
        "written through the link: {err}"
    );
    assert_eq!(code, 2, "{err}");

    let user = d.path().join("thesis.txt");
    std::fs::write(&user, b"chapter one\n").unwrap();
    let link = d.path().join("results.jsonl");
    std::os::unix::fs::symlink(&user, &link).unwrap();
    let (code, err) = campaign_with_results(&config(d.path()), &link);
    assert_eq!(std::fs::read(&user).unwrap(), b"chapter one\n", "{err}");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is a symbolic link"), "{err}");

    // A regular file that is not a results file is refused too, and kept as it was.
    let (code, err) = campaign_with_results(&config(d.path()), &user);
    assert_eq!(std::fs::read(&user).unwrap(), b"chapter one\n", "{err}");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not a plugpull campaign results file"),
        "{err}"
    );
}
