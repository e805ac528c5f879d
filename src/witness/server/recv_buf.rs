//! The receive buffer of a connection: bytes read from the socket and not yet handled.

use std::io;

/// Bytes requested from the socket per read call.
pub(super) const READ_CHUNK_BYTES: usize = 256 << 10;

/// Bytes received and not yet processed, at the start of a buffer whose spare space
/// stays initialised between reads. Why: growing a Vec by a zeroed chunk before every
/// read and truncating it after was a fifth of the witness's CPU at 200k acks/s
/// (`perf`: memset), for reads that bring a few KiB.
#[derive(Default)]
pub(super) struct RecvBuf {
    buf: Vec<u8>,
    filled: usize,
}

impl RecvBuf {
    /// A buffer holding `bytes` already received.
    pub(super) fn holding(bytes: Vec<u8>) -> RecvBuf {
        RecvBuf {
            filled: bytes.len(),
            buf: bytes,
        }
    }
    pub(super) fn data(&self) -> &[u8] {
        &self.buf[..self.filled]
    }
    pub(super) fn len(&self) -> usize {
        self.filled
    }
    pub(super) fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Makes room for at least READ_CHUNK_BYTES and appends what `read` puts there.
    pub(super) fn fill(
        &mut self,
        mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        if self.buf.len() - self.filled < READ_CHUNK_BYTES {
            self.buf.resize(self.filled + READ_CHUNK_BYTES, 0);
        }
        let n = loop {
            match read(&mut self.buf[self.filled..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.filled += n;
        Ok(n)
    }

    /// Drops the first `n` bytes; gives memory back when the buffer grew past `max`.
    pub(super) fn consume(&mut self, n: usize, max: usize) {
        self.buf.copy_within(n..self.filled, 0);
        self.filled -= n;
        if self.buf.len() > max {
            self.buf.truncate(self.filled.max(READ_CHUNK_BYTES));
            self.buf.shrink_to_fit();
        }
    }
}
