//! [`SimDrive`]: the model behind the `Device` trait, so the real writer and verify run
//! against it in-process (property tests, `plugpull demo`) with no root and no FUSE.
//!
//! A typical cycle: `create` → writer → `cut` → `power_on` → verify → `oracle`.

use super::model::{Model, Power, ReadOutcome, SimConfig};
use super::oracle::{Event, Fault};
use super::profile::Profile;
use crate::device::Device;
use crate::sync::lock;
use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A simulated drive, safe to share between writer threads.
pub struct SimDrive {
    model: Mutex<Model>,
    size_bytes: u64,
    flushes: AtomicU64,
}

impl SimDrive {
    /// A fresh drive of `size_bytes` (a multiple of 512). The image is in memory unless
    /// `backing` names a file (an existing file is powered on with its contents).
    pub fn create(
        size_bytes: u64,
        profile: Profile,
        seed: u64,
        backing: Option<&Path>,
    ) -> io::Result<SimDrive> {
        SimDrive::start(SimConfig {
            size_bytes,
            profile,
            seed,
            backing: backing.map(Path::to_path_buf),
            oracle: None,
        })
    }

    /// A drive from a full configuration (oracle log file, backing file).
    pub fn start(cfg: SimConfig) -> io::Result<SimDrive> {
        let size_bytes = cfg.size_bytes;
        Ok(SimDrive {
            model: Mutex::new(Model::start(cfg)?),
            size_bytes,
            flushes: AtomicU64::new(0),
        })
    }

    /// The seed that reproduces this drive's decisions.
    pub fn seed(&self) -> u64 {
        lock(&self.model).seed()
    }

    pub fn profile(&self) -> Profile {
        lock(&self.model).profile().clone()
    }

    /// Cuts the power deterministically: the profile's cut is applied, the oracle is
    /// final, and every I/O fails with EIO until [`SimDrive::power_on`].
    pub fn cut(&self) -> io::Result<()> {
        lock(&self.model).cut()
    }

    /// Powers the drive back on. Post-cut faults take effect now: unreadable ranges fail
    /// reads with EIO; a dead drive returns an error here and on every I/O.
    pub fn power_on(&self) -> io::Result<()> {
        lock(&self.model).power_on()
    }

    pub fn is_powered(&self) -> bool {
        lock(&self.model).power() == Power::On
    }

    /// The faults that are real after the cut (resolved oracle).
    pub fn oracle(&self) -> Vec<Fault> {
        lock(&self.model).faults()
    }

    /// The raw oracle events of this drive object.
    pub fn oracle_events(&self) -> Vec<Event> {
        lock(&self.model).events().to_vec()
    }

    /// Flushes that returned success so far.
    pub fn flush_count(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    /// What is on media now, bypassing the cache (what a cut now would leave).
    pub fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        lock(&self.model).read_durable(buf, offset)
    }

    /// Writes zeros through the cache (discard / write-zeroes).
    pub fn zero(&self, offset: u64, len: u64) -> io::Result<()> {
        lock(&self.model).zero(offset, len)
    }
}

impl Device for SimDrive {
    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn logical_block_bytes(&self) -> u32 {
        crate::record::SECTOR as u32
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        lock(&self.model).write(buf, offset)
    }

    fn flush(&self) -> io::Result<()> {
        let latency_us = lock(&self.model).flush()?;
        // The flush is already durable; the sleep only makes it as slow as the modelled
        // drive, outside the lock so other writers keep going.
        if latency_us > 0 {
            std::thread::sleep(Duration::from_micros(latency_us));
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let outcome = lock(&self.model).read(buf, offset)?;
        match outcome {
            ReadOutcome::Done => Ok(()),
            ReadOutcome::Hang(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                Err(io::Error::from_raw_os_error(libc::EIO))
            }
        }
    }
}
