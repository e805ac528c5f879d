//! The one buffer type for direct I/O: O_DIRECT needs memory aligned to the logical block
//! size, and 4096 covers every device we meet.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::io;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

pub const BUF_ALIGN: usize = 4096;
/// Buffers this large are mapped on their own, aligned to and advised onto 2 MiB huge
/// pages ([`map_huge`]).
const HUGE: usize = 2 << 20;

/// A zero-initialised heap buffer aligned to [`BUF_ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out &[u8].
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` bytes, or why the memory could not be had (no memory, no
    /// address space for the mapping, a length too large to lay out): the caller says
    /// which step needed it and goes on or stops as a failed step, rather than the
    /// process dying in the middle of a run.
    pub fn try_new(len: usize) -> io::Result<AlignedBuf> {
        if len >= HUGE {
            return Ok(AlignedBuf {
                ptr: map_huge(len)?,
                len,
            });
        }
        let layout = Self::layout(len)?;
        // SAFETY: layout has non-zero size (len.max(1)) and a valid power-of-two alignment.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| no_memory(len))?;
        Ok(AlignedBuf { ptr, len })
    }

    fn layout(len: usize) -> io::Result<Layout> {
        Layout::from_size_align(len.max(1), BUF_ALIGN).map_err(|_| too_large(len))
    }
}

fn no_memory(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::OutOfMemory,
        format!("cannot allocate an I/O buffer of {len} bytes: out of memory"),
    )
}

fn too_large(len: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("an I/O buffer of {len} bytes is larger than memory can hold"),
    )
}

/// Large I/O buffers on huge pages. Why: O_DIRECT pins every page of the buffer for
/// every request, and a virtio disk takes at most `max_segments` (254 here) pieces per
/// request, so a 2 MiB read into 4 KiB pages is 512 pins and three requests; into one
/// 2 MiB page it is one of each. Mapped here rather than by the allocator: the
/// allocator's aligned `alloc_zeroed` writes the zeroes itself, which faults 4 KiB pages
/// in before any `madvise` can ask for huge ones (perf saw only 2 MiB of huge pages for
/// verify's 16 MiB of buffers). A fresh mapping is zero and untouched; the advice comes
/// before the first touch. Without huge pages (`transparent_hugepage` = never) this is a
/// plain zeroed mapping.
fn map_huge(len: usize) -> io::Result<NonNull<u8>> {
    let span = len
        .checked_next_multiple_of(HUGE)
        .and_then(|size| size.checked_add(HUGE))
        .ok_or_else(|| too_large(len))?;
    let size = span - HUGE;
    // SAFETY: a new private anonymous mapping; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        let os = io::Error::last_os_error();
        return Err(io::Error::new(
            os.kind(),
            format!("cannot map an I/O buffer of {len} bytes: {os}"),
        ));
    }
    let base = raw as usize;
    let start = base.next_multiple_of(HUGE);
    // SAFETY: [base, start) and [start + size, base + span) lie inside the mapping just
    // made, outside the part kept; trimming them leaves [start, start + size) mapped.
    unsafe {
        if start > base {
            libc::munmap(raw, start - base);
        }
        let tail = start + size;
        if tail < base + span {
            libc::munmap(tail as *mut libc::c_void, base + span - tail);
        }
        // A hint; refusal leaves 4 KiB pages, which work the same.
        libc::madvise(start as *mut libc::c_void, size, libc::MADV_HUGEPAGE);
    }
    // Not at address 0: `start` is past a successful mapping of at least HUGE bytes.
    NonNull::new(start as *mut u8).ok_or_else(|| no_memory(len))
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len >= HUGE {
            // SAFETY: map_huge mapped exactly this range for this buffer alone.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len.next_multiple_of(HUGE)) };
            return;
        }
        // Laid out once already, in try_new: the same length lays out the same way.
        let Ok(layout) = Self::layout(self.len) else {
            return;
        };
        // SAFETY: ptr came from alloc_zeroed with exactly this layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised bytes for the lifetime of self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    /// Memory that cannot be had is an error to report, not a panic or an abort.
    #[test]
    fn a_buffer_too_large_is_an_error() {
        // Past any address space: the mapping is refused.
        let e = AlignedBuf::try_new(1 << 62).err().expect("no 4 EiB buffer");
        assert!(e.to_string().contains("cannot map an I/O buffer"), "{e}");
        // Past what a length rounds up to: refused before asking the kernel.
        let e = AlignedBuf::try_new(usize::MAX)
            .err()
            .expect("no usize::MAX buffer");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        assert!(AlignedBuf::try_new(4096).is_ok());
    }

    #[test]
    fn aligned_and_zeroed() {
        for len in [0, 1, 512, 4096, 1 << 20] {
            let b = AlignedBuf::try_new(len).unwrap();
            assert_eq!(b.as_ptr() as usize % BUF_ALIGN, 0);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
        }
    }

    /// The smaps entry (Rss in KiB, VmFlags) of the mapping holding `p`.
    fn mapping_of(p: usize) -> (u64, String) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux /proc");
        let mut lines = smaps.lines();
        while let Some(l) = lines.next() {
            let range = l.split(' ').next().unwrap_or("");
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            else {
                continue;
            };
            if !(a <= p && p < b) {
                continue;
            }
            let (mut rss, mut flags) = (None, None);
            for f in lines.by_ref() {
                if let Some(v) = f.strip_prefix("Rss:") {
                    rss = v.trim().trim_end_matches(" kB").parse().ok();
                }
                if let Some(v) = f.strip_prefix("VmFlags:") {
                    flags = Some(v.trim().to_string());
                    break;
                }
            }
            return (rss.expect("Rss line"), flags.expect("VmFlags line"));
        }
        panic!("no mapping holds {p:#x}");
    }

    #[test]
    fn large_buffers_are_advised_onto_huge_pages_before_their_first_touch() {
        for len in [HUGE, 3 * HUGE + 4096] {
            let mut b = AlignedBuf::try_new(len).unwrap();
            let p = b.as_ptr() as usize;
            assert_eq!(p % HUGE, 0, "{len}: aligned to a huge page");
            // Nothing touched yet: a buffer zeroed by hand (the allocator's aligned
            // alloc_zeroed) would be resident already, in 4 KiB pages.
            let (rss_kib, flags) = mapping_of(p);
            assert_eq!(rss_kib, 0, "{len}: untouched until used");
            // Without transparent huge pages in the kernel the advice is refused (and
            // changes nothing); with them it marks the mapping.
            if std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
                let advised = flags.split(' ').any(|f| f == "hg");
                assert!(advised, "{len}: MADV_HUGEPAGE: {flags}");
            }
            assert!(b.iter().all(|&x| x == 0));
            b[len - 1] = 7;
            assert_eq!(b[len - 1], 7);
        }
    }
}
