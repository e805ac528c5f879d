//! The soak through the real binary: `plugpull soak` runs seeded in-process power-cut
//! cycles (honest: no false alarm; faulty: no miss; every cycle's findings equal the
//! oracle's). CI runs a smaller count than the 200 + 200 of a full soak.
//!
//! `PLUGPULL_SEED=S` fixes the first seed; `PLUGPULL_SOAK_CYCLES=N` the count per kind.
//! A failing cycle prints `plugpull soak --seed S --cycles 1 --only KIND`, which replays
//! it exactly.

use crate::common;

#[test]
fn soak_no_false_alarm_no_miss_findings_equal_oracle() {
    let seed = match std::env::var("PLUGPULL_SEED") {
        Ok(s) => s.parse::<u64>().expect("PLUGPULL_SEED must be a number"),
        Err(_) => plugpull::rng::random_seed() % 1_000_000_000,
    };
    let cycles = std::env::var("PLUGPULL_SOAK_CYCLES").unwrap_or_else(|_| "30".into());
    let t0 = std::time::Instant::now();
    let r = common::run(["soak", "--cycles", &cycles, "--seed", &seed.to_string()]);
    eprintln!("{}{}", r.stdout, r.stderr);
    assert_eq!(r.code, 0, "soak from seed {seed} failed:\n{r:?}");
    assert!(
        r.stdout.contains("0 false alarm(s)") && r.stdout.contains("0 miss(es)"),
        "{r:?}"
    );
    eprintln!("soak of {cycles} + {cycles} cycles took {:?}", t0.elapsed());
}
