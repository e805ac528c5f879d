//! The 40-byte ack entry shared by Acks and FileAcks payloads (docs/protocol.md).
//!
//! Why a module of its own: `wire::msg` and `wire::file_acks` both encode it, and msg
//! uses file_acks, so the entry lives below both and neither file imports the other back.

use crate::model::Ack;
use crate::record::RecordId;

/// Bytes of one ack entry in an Acks payload (and at the start of a FileAcks entry).
pub const ACK_ENTRY_BYTES: usize = 40;

/// Appends the 40-byte entry of `a` to `out`.
#[inline]
pub fn put_ack(out: &mut Vec<u8>, a: &Ack) {
    let r = &a.record;
    let mut e = [0u8; ACK_ENTRY_BYTES];
    e[0..2].copy_from_slice(&r.stream.to_le_bytes());
    // e[2..4]: reserved, zero.
    e[4..8].copy_from_slice(&r.sectors.to_le_bytes());
    e[8..16].copy_from_slice(&r.seq.to_le_bytes());
    e[16..24].copy_from_slice(&r.offset.to_le_bytes());
    e[24..32].copy_from_slice(&r.write_time_ns.to_le_bytes());
    e[32..40].copy_from_slice(&a.flushed_ns.to_le_bytes());
    out.extend_from_slice(&e);
}

/// The ack of a 40-byte entry (`e` holds at least that many bytes).
#[inline]
pub fn get_ack(e: &[u8]) -> Ack {
    let u64_at = |at: usize| crate::le::u64_at(e, at);
    Ack {
        record: RecordId {
            stream: crate::le::u16_at(e, 0),
            sectors: crate::le::u32_at(e, 4),
            seq: u64_at(8),
            offset: u64_at(16),
            write_time_ns: u64_at(24),
        },
        flushed_ns: u64_at(32),
    }
}
