//! Block-device geometry by ioctl: the size and sector sizes the kernel enforces for
//! O_DIRECT, rather than what a name or a sysfs file suggests.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// What the kernel says about a block device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    pub size_bytes: u64,
    /// Smallest direct-I/O unit (BLKSSZGET).
    pub logical_sector_bytes: u32,
    /// The device's internal write unit (BLKPBSZGET); writes smaller than it are
    /// read-modify-write inside the drive.
    pub physical_sector_bytes: u32,
}

const BLKGETSIZE64: libc::Ioctl = 0x8008_1272; // _IOR(0x12, 114, size_t)

/// Queries an open block device.
pub fn block_geometry(f: &File) -> io::Result<Geometry> {
    let fd = f.as_raw_fd();
    let mut size: u64 = 0;
    let mut lss: libc::c_int = 0;
    let mut pss: libc::c_uint = 0;
    // SAFETY: fd is open for the duration of the call; BLKGETSIZE64 writes one u64.
    if unsafe { libc::ioctl(fd, BLKGETSIZE64, &mut size as *mut u64) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: BLKSSZGET writes one int.
    if unsafe { libc::ioctl(fd, libc::BLKSSZGET, &mut lss as *mut libc::c_int) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: BLKPBSZGET writes one unsigned int.
    if unsafe { libc::ioctl(fd, libc::BLKPBSZGET, &mut pss as *mut libc::c_uint) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Geometry {
        size_bytes: size,
        logical_sector_bytes: lss as u32,
        physical_sector_bytes: pss,
    })
}
