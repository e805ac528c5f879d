//! What a witness log would weigh in PackedAcks frames (log format 3), measured on a log
//! written by a real witness in format 2 (CompactAcks) or 1 (Acks): every ack frame is
//! re-encoded on its own, exactly as the witness encodes one group commit, every other
//! frame is counted as it is. Why: the witness's own log size depends on how many acks
//! arrive per commit, which only a real run at full speed (a release build) shows, so the
//! same run's log is measured both ways (docs/performance.md "Witness log size").
//!
//! Usage: cargo run --example relog -- WITNESS_LOG...

use plugpull::wire::frame::{self, Decoded, FrameType};
use plugpull::wire::msg::{self, Msg};

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).expect("reading the log");
        let (mut rest, mut packed, mut acks, mut frames) = (&bytes[..], 0usize, 0usize, 0usize);
        while !rest.is_empty() {
            let Decoded::Frame(f) = frame::decode(rest) else {
                panic!(
                    "{path}: not a whole, valid frame at byte {}",
                    bytes.len() - rest.len()
                );
            };
            match f.ty {
                FrameType::Acks | FrameType::CompactAcks | FrameType::PackedAcks => {
                    let Ok(Msg::Acks { first, acks: a }) = Msg::decode(&f) else {
                        panic!("{path}: an ack frame that does not decode");
                    };
                    let mut out = Vec::new();
                    msg::encode_acks_packed_into(&mut out, first, &a);
                    packed += out.len();
                    acks += a.len();
                    frames += 1;
                }
                _ => packed += f.len_bytes,
            }
            rest = &rest[f.len_bytes..];
        }
        println!(
            "{path}: {acks} acks in {frames} ack frames ({:.1} acks a frame); as written \
             {} B = {:.2} B/ack; in PackedAcks {packed} B = {:.2} B/ack",
            acks as f64 / frames.max(1) as f64,
            bytes.len(),
            bytes.len() as f64 / acks.max(1) as f64,
            packed as f64 / acks.max(1) as f64
        );
    }
}
