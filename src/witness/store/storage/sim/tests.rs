use super::*;
use crate::witness::store::storage::read_all;

fn dir() -> PathBuf {
    PathBuf::from("/w")
}

#[test]
fn synced_data_and_names_survive_every_cut() {
    for seed in 0..200 {
        let disk = SimDisk::new(seed);
        let s = disk.boot(None);
        let p = dir().join("a");
        let f = s.create_new(&p).unwrap();
        f.write_at(&[1; 1500], 0).unwrap();
        f.sync_data().unwrap();
        s.sync_dir(&dir()).unwrap();
        f.write_at(&[2; 1500], 1500).unwrap();
        disk.cut_now();
        assert!(f.size().is_err(), "a handle of a cut boot fails");
        let s = disk.boot(None);
        let got = read_all(&*s, &p).unwrap();
        assert!(got.len() >= 1500, "seed {seed}");
        assert_eq!(got[..1500], [1; 1500], "seed {seed}");
        assert!(got[1500..].iter().all(|&b| b == 2), "seed {seed}");
        // A torn write keeps a prefix ending on a sector boundary.
        assert!(
            [1500, 3000].contains(&got.len()) || got.len() % SECTOR == 0,
            "seed {seed}: {}",
            got.len()
        );
    }
}

#[test]
fn unsynced_writes_are_dropped_kept_and_torn_and_names_need_sync_dir() {
    let mut seen = CutStats::default();
    let mut name_lost = 0;
    let mut hole_before_kept = 0;
    for seed in 0..300 {
        let disk = SimDisk::new(seed);
        let s = disk.boot(None);
        let p = dir().join("a");
        let f = s.create_new(&p).unwrap();
        f.sync_data().unwrap();
        for i in 0..4u8 {
            f.write_at(&[i + 1; 1024], i as u64 * 1024).unwrap();
        }
        disk.cut_now();
        let st = disk.stats();
        seen.writes_dropped += st.writes_dropped;
        seen.writes_kept += st.writes_kept;
        seen.writes_torn += st.writes_torn;
        let s = disk.boot(None);
        match read_all(&*s, &p) {
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::NotFound);
                name_lost += 1;
            }
            Ok(got) => {
                let zero_then_data = got
                    .chunks(1024)
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w[0].iter().all(|&b| b == 0) && w[1][0] != 0);
                hole_before_kept += zero_then_data as u32;
            }
        }
    }
    assert!(seen.writes_dropped > 0 && seen.writes_kept > 0 && seen.writes_torn > 0);
    assert!(name_lost > 0, "a name never synced can vanish");
    assert!(
        hole_before_kept > 0,
        "later writes can survive earlier ones"
    );
}

#[test]
fn scattered_tears_keep_later_sectors_of_a_write_without_earlier_ones() {
    let holes = |scattered: bool| {
        let mut n = 0;
        for seed in 0..200 {
            let disk = SimDisk::new(seed);
            disk.set_scattered_tears(scattered);
            let s = disk.boot(None);
            let p = dir().join("a");
            let f = s.create_new(&p).unwrap();
            f.sync_data().unwrap();
            s.sync_dir(&dir()).unwrap();
            f.write_at(&[7; 4 * SECTOR], 0).unwrap();
            disk.cut_now();
            let got = read_all(&*disk.boot(None), &p).unwrap();
            let first_zero = got.iter().position(|&b| b == 0);
            n += first_zero.is_some_and(|z| got[z..].contains(&7)) as u32;
        }
        n
    };
    assert_eq!(holes(false), 0, "a prefix tear never leaves a hole");
    assert!(holes(true) > 0, "scattered tears do");
}

#[test]
fn the_cut_is_at_the_chosen_operation() {
    let disk = SimDisk::new(1);
    let s = disk.boot(Some(3));
    let p = dir().join("a");
    let f = s.create_new(&p).unwrap(); // 1
    f.write_at(b"x", 0).unwrap(); // 2
    assert!(f.sync_data().is_err()); // 3: cut
    assert!(disk.is_off());
    assert_eq!(disk.ops(), 3);
    assert!(s.exists(&p).is_err(), "everything fails after the cut");
}
