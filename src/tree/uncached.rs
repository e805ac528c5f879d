//! Reading a tree's file as the drive holds it, past the page cache; its buffer is a
//! fallible allocation, so a machine short of memory gets no verdict (exit 2) rather
//! than files called unreadable (`TreeVerifyError::ReadBuffers`).

use crate::device::AlignedBuf;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Reads a whole file bypassing the page cache: O_DIRECT when the file system accepts
/// it, else drops the file's cached pages with posix_fadvise(DONTNEED) first.
pub fn read_uncached(path: &Path) -> std::io::Result<(Vec<u8>, &'static str)> {
    const ALIGN: usize = 4096;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
    {
        let len = f.metadata()?.len() as usize;
        #[cfg(feature = "test-support")]
        crate::verify::scan::starved_by_test(false)?;
        let no_memory = |e: std::io::Error| {
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot allocate the buffer to read {}: {e}", path.display()),
            )
        };
        let mut buf = AlignedBuf::try_new(len.div_ceil(ALIGN).max(1) * ALIGN).map_err(no_memory)?;
        let mut got = 0;
        let direct_ok = loop {
            match f.read(&mut buf[got..]) {
                Ok(0) => break true,
                Ok(n) => got += n,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break false,
                Err(e) => return Err(e),
            }
            // A short read ends the file; the next offset would not be aligned.
            if got % ALIGN != 0 || got >= buf.len() {
                break true;
            }
        };
        if direct_ok {
            // The copy a fallible allocation too: a file is as large as its record.
            let mut bytes = Vec::new();
            bytes
                .try_reserve_exact(got)
                .map_err(|e| no_memory(std::io::Error::other(e)))?;
            bytes.extend_from_slice(&buf[..got]);
            return Ok((bytes, "O_DIRECT"));
        }
    }
    let mut f = File::open(path)?;
    #[cfg(feature = "test-support")]
    crate::verify::scan::starved_by_test(false)?;
    // SAFETY: plain syscall on an fd we own; offset 0, length 0 means the whole file.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut v = Vec::new();
    f.read_to_end(&mut v)?;
    Ok((v, "posix_fadvise DONTNEED"))
}
