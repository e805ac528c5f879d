//! What a campaign cuts: the in-process simulated drive, or a real drive found by its
//! serial number.
//!
//! Why by serial: after a cut the kernel may bring the drive back as another sdX (or not
//! at all); writing to "/dev/sdb" after a re-detect could hit a different disk. Every
//! cycle looks the drive up again under /sys/block by serial, and the safety checks of
//! `plugpull write` run against what was found.

use crate::device::health::{self, Health};
use crate::device::open::{Flags, Opened};
use crate::device::safety::{self, SafetyError};
use crate::device::{Device, DeviceError, FileDevice, FlushMethod, identity};
use crate::power::PowerError;
use crate::sim::SimDrive;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the drive under test cannot be written this cycle, or did not come back after it.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "no drive with serial {serial} under /sys/block: is it powered and attached? (lsblk -o NAME,SERIAL)"
    )]
    NoDriveWithSerial { serial: String },
    /// The drive found is not safe to write (mounted, holds data, ...).
    #[error(transparent)]
    Unsafe(#[from] SafetyError),
    /// Opening the drive failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("writing {value:?} to {path} (run as root)")]
    WriteSysfs {
        value: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no /sys/class/scsi_host")]
    NoScsiHosts(#[source] std::io::Error),
    #[error("could not write to any /sys/class/scsi_host/host*/scan (run as root)")]
    NoScsiScan,
    /// The `reattach` command of the campaign file.
    #[error(transparent)]
    Command(#[from] PowerError),
    #[error("the reattach hook failed")]
    ReattachHook(#[source] Box<TargetError>),
    #[error("the simulated drive did not come back after power on")]
    SimNotBack,
    #[error("the drive with serial {serial} did not come back within {timeout:?} after power on")]
    NotBack { serial: String, timeout: Duration },
}

type Result<T, E = TargetError> = std::result::Result<T, E>;

pub enum Target {
    Sim {
        drive: Arc<SimDrive>,
        profile: String,
    },
    Device {
        serial: String,
        reattach: Reattach,
        destroy_data: bool,
        counter: bool,
        /// Kernel name seen before the cut (for removing a stale device).
        last_disk: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reattach {
    Sata,
    Nvme,
    None,
    Command(String),
}

impl Reattach {
    pub fn parse(s: Option<&str>) -> Reattach {
        match s.unwrap_or("none") {
            "sata" => Reattach::Sata,
            "nvme" => Reattach::Nvme,
            "none" => Reattach::None,
            cmd => Reattach::Command(cmd.into()),
        }
    }
}

/// Finds the whole disk whose serial is `serial`: `/dev/NAME`.
pub fn find_by_serial(serial: &str) -> Option<(String, PathBuf)> {
    let want = serial.trim();
    for e in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let dev = e.path().join("device");
        let found = ["serial", "vpd_pg80"]
            .iter()
            .filter_map(|f| std::fs::read(dev.join(f)).ok())
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .trim_matches(|c: char| c.is_whitespace() || c.is_control())
                    .to_string()
            })
            .any(|s| s == want || s.ends_with(want));
        if found {
            return Some((name.clone(), PathBuf::from(format!("/dev/{name}"))));
        }
    }
    None
}

fn write_sysfs(path: &str, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|source| TargetError::WriteSysfs {
        value: value.into(),
        path: path.into(),
        source,
    })
}

/// The drive's health counters (`device::health`): `nvme smart-log` and, where the OCP
/// plugin answers, `nvme ocp smart-add-log` for an NVMe drive; `smartctl -j -A -H`
/// otherwise. `None` when no tool answers with a health log.
pub fn health(dev: &std::path::Path) -> Option<Health> {
    let d = dev.display().to_string();
    let run = |cmd: &str| crate::power::command::run_command(cmd, Duration::from_secs(10)).ok();
    if d.contains("nvme") {
        let mut h = health::from_nvme_smart_log(&run(&format!("nvme smart-log {d} -o json"))?)?;
        h.ocp = run(&format!("nvme ocp smart-add-log {d} -o json"))
            .and_then(|j| health::from_ocp_smart_add_log(&j));
        return Some(h);
    }
    health::from_smartctl(&run(&format!("smartctl -j -A -H {d}"))?)
}

impl Target {
    /// Before a cycle: the device to write to, its identity, and its health counters.
    pub fn open_for_write(
        &mut self,
    ) -> Result<(Arc<dyn Device>, identity::DeviceIdentity, Option<Health>)> {
        match self {
            Target::Sim { drive, profile } => {
                let id = identity::DeviceIdentity {
                    target: "simdrive".into(),
                    kind: "simulated".into(),
                    model: Some(format!("plugpull simdrive ({profile})")),
                    serial: Some(format!("SIM-{:016x}", drive.seed())),
                    size_bytes: drive.size_bytes(),
                    logical_sector_bytes: Some(512),
                    physical_sector_bytes: Some(4096),
                    write_cache: Some("write back".into()),
                    ..Default::default()
                };
                Ok((drive.clone() as Arc<dyn Device>, id, None))
            }
            Target::Device {
                serial,
                destroy_data,
                counter,
                last_disk,
                ..
            } => {
                let (name, path) =
                    find_by_serial(serial).ok_or_else(|| TargetError::NoDriveWithSerial {
                        serial: serial.clone(),
                    })?;
                // Opened once and checked on that handle, which is the one written: the
                // name found by serial may be another disk's by the time it is reopened.
                let flags = Flags {
                    direct: true,
                    dsync: false,
                };
                let destroy = destroy_data.then_some(path.as_path());
                let t = match safety::open_checked(&path, flags, destroy, 0)? {
                    Opened::Existing(t) => t,
                    Opened::Missing(_) => {
                        return Err(TargetError::NoDriveWithSerial {
                            serial: serial.clone(),
                        });
                    }
                };
                let dev = FileDevice::from_target(t, FlushMethod::Fdatasync)?;
                *last_disk = Some(name);
                let before = if *counter { health(&path) } else { None };
                Ok((Arc::new(dev), identity::identify(&path), before))
            }
        }
    }

    /// After the cut, before power returns: drop a stale device the kernel kept.
    pub fn after_cut(&mut self) {
        if let Target::Device {
            reattach,
            last_disk: Some(name),
            ..
        } = self
        {
            let sys = format!("/sys/block/{name}");
            if !std::path::Path::new(&sys).exists() {
                return;
            }
            match reattach {
                Reattach::Sata => {
                    let _ = write_sysfs(&format!("{sys}/device/delete"), "1");
                }
                Reattach::Nvme => {
                    // /sys/block/nvme0n1/device -> the controller; its `device` -> PCI function.
                    if let Ok(pci) = std::fs::canonicalize(format!("{sys}/device/device")) {
                        let _ = write_sysfs(&format!("{}/remove", pci.display()), "1");
                    }
                }
                _ => {}
            }
        }
    }

    /// After power returns: re-detect and wait for the drive. Returns the device to
    /// verify (or why it is dead) and the counter reading.
    pub fn reattach(&mut self, timeout: Duration) -> (Result<Arc<dyn Device>>, Option<Health>) {
        match self {
            Target::Sim { drive, .. } => {
                let r = if drive.is_powered() {
                    Ok(drive.clone() as Arc<dyn Device>)
                } else {
                    Err(TargetError::SimNotBack)
                };
                (r, None)
            }
            Target::Device {
                serial,
                reattach,
                counter,
                last_disk,
                ..
            } => {
                let t0 = Instant::now();
                let hook = match reattach {
                    Reattach::Sata => rescan_sata(),
                    Reattach::Nvme => write_sysfs("/sys/bus/pci/rescan", "1"),
                    Reattach::None => Ok(()),
                    Reattach::Command(cmd) => {
                        let cmd = format!(
                            "PLUGPULL_SERIAL='{serial}' PLUGPULL_DISK='{}' {cmd}",
                            last_disk.as_deref().unwrap_or("")
                        );
                        crate::power::command::run_command(&cmd, timeout)
                            .map(|_| ())
                            .map_err(TargetError::from)
                    }
                };
                if let Err(e) = hook {
                    return (Err(TargetError::ReattachHook(Box::new(e))), None);
                }
                loop {
                    if let Some((_, path)) = find_by_serial(serial) {
                        match FileDevice::open_read(&path) {
                            Ok(d) => {
                                let c = if *counter { health(&path) } else { None };
                                return (Ok(Arc::new(d) as Arc<dyn Device>), c);
                            }
                            Err(e) if t0.elapsed() > timeout => return (Err(e.into()), None),
                            Err(_) => {}
                        }
                    }
                    if t0.elapsed() > timeout {
                        return (
                            Err(TargetError::NotBack {
                                serial: serial.clone(),
                                timeout,
                            }),
                            None,
                        );
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
    }
}

fn rescan_sata() -> Result<()> {
    let mut any = false;
    for e in std::fs::read_dir("/sys/class/scsi_host")
        .map_err(TargetError::NoScsiHosts)?
        .flatten()
    {
        let scan = e.path().join("scan");
        if std::fs::write(&scan, "- - -").is_ok() {
            any = true;
        }
    }
    if !any {
        return Err(TargetError::NoScsiScan);
    }
    let _ = crate::power::command::run_command("udevadm settle", Duration::from_secs(30));
    Ok(())
}
