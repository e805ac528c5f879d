//! `cargo +nightly fuzz run compact_acks`: see docs/fuzzing.md. The body lives in
//! plugpull::witness::fuzz so stable `cargo test` replays the same target.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plugpull::witness::fuzz::compact_acks(data));
