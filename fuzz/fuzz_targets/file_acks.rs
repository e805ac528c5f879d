//! `cargo +nightly fuzz run file_acks`: see docs/fuzzing.md. The body lives in
//! plugpull::witness::fuzz so stable `cargo test` replays the same target.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| plugpull::witness::fuzz::file_acks(data));
