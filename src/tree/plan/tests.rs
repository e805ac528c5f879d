use super::*;
use std::collections::{HashMap, HashSet};

#[test]
fn same_seed_same_plan_other_seed_other_plan() {
    let s = TreeScale::scaled_down(2_000);
    assert_eq!(plan(7, s), plan(7, s));
    assert_ne!(plan(7, s), plan(8, s));
}

#[test]
fn scaled_down_keeps_the_untar_mean() {
    let s = TreeScale::scaled_down(530);
    assert_eq!(s.files, 530);
    // 528 MB / 53,000 files = 9,962 bytes a file.
    assert_eq!(s.total_bytes, 530 * 9_962);
}

#[test]
fn shape_statistics_are_in_range() {
    for seed in [1u64, 2, 3, 99] {
        let scale = TreeScale::scaled_down(5_000);
        let p = plan(seed, scale);
        let created: Vec<&FileStep> = p.files().filter(|f| f.replaces.is_none()).collect();
        assert_eq!(created.len(), 5_000, "seed {seed}");
        let bytes: u64 = created.iter().map(|f| f.len_bytes()).sum();
        let want = scale.total_bytes as f64;
        assert!(
            (bytes as f64 - want).abs() < want * 0.25,
            "seed {seed}: {bytes} bytes, want about {want}"
        );
        let small = created
            .iter()
            .filter(|f| (SMALL_SECTORS_MIN..=SMALL_SECTORS_MAX).contains(&f.sectors))
            .count();
        assert!(
            small as f64 > 0.98 * created.len() as f64,
            "seed {seed}: {small} small"
        );
        let big = created.iter().map(|f| f.len_bytes()).max().unwrap();
        assert!(
            big >= 1 << 20,
            "seed {seed}: largest file {big} bytes, want MiBs"
        );
        assert!(created.iter().all(|f| f.sectors <= LARGE_SECTORS_MAX));
        let renamed = p
            .files()
            .filter(|f| matches!(f.arrival, Arrival::Renamed { .. }))
            .count();
        assert!(
            (50..=400).contains(&renamed),
            "seed {seed}: {renamed} renames"
        );
        let over = p.files().filter(|f| f.replaces.is_some()).count();
        assert_eq!(over, 100, "seed {seed}: 2% overwrites");
    }
}

#[test]
fn directories_are_two_to_six_deep_and_created_before_use() {
    let p = plan(5, TreeScale::scaled_down(3_000));
    let mut made: HashSet<String> = HashSet::new();
    let mut depths = HashSet::new();
    for step in &p.steps {
        match step {
            Step::MkDir(d) => {
                let parent = parent_of(d);
                assert!(
                    parent.is_empty() || made.contains(parent),
                    "{d} before parent"
                );
                assert!(made.insert(d.clone()), "{d} made twice");
                assert!(d.split('/').count() <= DEPTH_MAX as usize);
            }
            Step::File(f) => {
                assert!(made.contains(f.dir()), "{} before its directory", f.path);
                let depth = f.dir().split('/').count() as u32;
                assert!((DEPTH_MIN..=DEPTH_MAX).contains(&depth), "{}", f.path);
                depths.insert(depth);
                if let Arrival::Renamed { tmp } = &f.arrival {
                    assert_eq!(parent_of(tmp), f.dir(), "a rename stays in its directory");
                    assert_ne!(tmp, &f.path);
                }
            }
        }
    }
    assert_eq!(depths.len(), 5, "every depth 2..=6 holds files: {depths:?}");
    let dirs = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::MkDir(_)))
        .count();
    assert!(
        (3_000 / 24..=3_000 / 6).contains(&dirs),
        "{dirs} directories"
    );
}

#[test]
fn ids_are_unique_and_overwrites_replace_the_current_version() {
    let p = plan(11, TreeScale::scaled_down(4_000));
    let mut current: HashMap<&str, u64> = HashMap::new();
    let mut ids = HashSet::new();
    for f in p.files() {
        assert!(ids.insert(f.id), "id {} twice", f.id);
        match f.replaces {
            None => assert!(current.insert(&f.path, f.id).is_none(), "{} twice", f.path),
            Some(old) => assert_eq!(current.insert(&f.path, f.id), Some(old), "{}", f.path),
        }
    }
    // Both ways of overwriting occur.
    let over: Vec<&FileStep> = p.files().filter(|f| f.replaces.is_some()).collect();
    assert!(over.iter().any(|f| f.arrival == Arrival::InPlace));
    assert!(over.iter().any(|f| f.arrival != Arrival::InPlace));
}

#[test]
fn tiny_scales_work() {
    for files in [0u32, 1, 3, 40] {
        let p = plan(1, TreeScale::scaled_down(files));
        assert_eq!(
            p.files().filter(|f| f.replaces.is_none()).count(),
            files as usize
        );
    }
}

/// Verify regenerates the plan of old runs from their seed: any change to what a seed
/// gives must bump `tree::PLAN_VERSION` and then this pin.
#[test]
fn plans_are_pinned_to_plan_version_1() {
    assert_eq!(crate::tree::PLAN_VERSION, 1);
    let p = plan(1, TreeScale::scaled_down(1_000));
    let mut h = blake3::Hasher::new();
    for s in &p.steps {
        match s {
            Step::MkDir(d) => {
                h.update(b"d");
                h.update(d.as_bytes());
            }
            Step::File(f) => {
                h.update(b"f");
                h.update(&f.id.to_le_bytes());
                h.update(f.path.as_bytes());
                h.update(&f.sectors.to_le_bytes());
                if let Arrival::Renamed { tmp } = &f.arrival {
                    h.update(tmp.as_bytes());
                }
                h.update(&f.replaces.unwrap_or(0).to_le_bytes());
            }
        }
        h.update(b"\n");
    }
    assert_eq!(
        h.finalize().to_hex().as_str(),
        "fedd2464175ceefa4a16fb1f1e96e0107f376135ecf04dedcedd492acee6deea"
    );
}
