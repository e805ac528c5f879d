//! One frame of the sender's queue: plain Acks, or FileAcks where the acks name files.
//!
//! Why here and not in the sender's pump: which frame carries an ack depends only on
//! whether it has a name, and keeping that choice apart keeps the pump about sending.

use crate::model::{Ack, FileName};
use crate::wire::file_acks;
use crate::wire::msg;
use std::collections::BTreeMap;

/// Appends one frame holding acks from the front of `acks` (numbered from `first`): a
/// FileAcks frame if the first is named in `names` (as many named acks as the frame
/// takes), else an Acks frame up to the next named ack. Returns how many it holds.
pub(super) fn encode_frame<'a>(
    out: &mut Vec<u8>,
    first: u64,
    acks: impl ExactSizeIterator<Item = &'a Ack>,
    names: &'a BTreeMap<u64, FileName>,
) -> usize {
    let end = first + acks.len() as u64;
    match names.range(first..end).next() {
        None => {
            let n = acks.len();
            msg::encode_acks_into(out, first, acks);
            n
        }
        Some((&at, _)) if at == first => {
            let named = (first..end).map_while(|i| names.get(&i));
            file_acks::encode_file_acks_into(out, first, acks.zip(named))
        }
        Some((&at, _)) => {
            let n = (at - first) as usize;
            msg::encode_acks_into(out, first, acks.take(n));
            n
        }
    }
}
