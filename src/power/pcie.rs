//! `driver = "pcie-slot"`: an NVMe drive's power through its hot-plug slot's own power
//! controller (`/sys/bus/pci/slots/N/power`, Linux pciehp), no extra hardware.
//!
//! Why: U.2/U.3/E1.S bays of most servers, and some workstation M.2 risers, have slots
//! whose capability says `PwrCtrl+` in `lspci -vv` (SltCap): the port can switch the
//! slot's power itself. Writing 0 to the slot's `power` file powers it off, 1 on.
//!
//! What the cut is worth (docs/campaign.md, "`pcie-slot`: NVMe slot power without extra
//! hardware"): the kernel powers a slot off through sysfs as a *safe* removal: it
//! unbinds the NVMe driver first, and the NVMe driver, with the controller still
//! present, sends it a shutdown notification (CC.SHN), which lets the drive flush its
//! cache. So a pcie-slot cut is an announced power loss; the drive's
//! unsafe-shutdown counter should not rise. It tests that the drive keeps what it
//! acknowledged across a power loss after a normal shutdown, and that the power path,
//! rescan and re-detection work; a surprise cut needs a switch on the rail (serial
//! firmware, relay). `describe()` says so in every campaign's log.
//!
//! The cycle: `off` finds the controller by serial (its name and bus address may change
//! after each cut), removes its PCI function (`remove`), then writes 0 to the slot's
//! `power`; `on` writes 1, rescans the bus, and waits until a controller with that serial
//! is back. Every path is below a sysfs root (default /sys), so tests use a fake tree.

use super::error::PowerError;
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct PcieSlotSwitch {
    /// The sysfs root ("/sys"; a fake tree in tests).
    pub sysfs: PathBuf,
    /// The slot's directory name under bus/pci/slots ("3", "0-1").
    pub slot: String,
    /// The drive's serial, as in class/nvme/nvmeX/serial (trimmed).
    pub serial: String,
    /// How long `on` waits for the controller to come back.
    pub timeout: Duration,
}

/// Capability id of the PCI Express capability; SltCap is at +0x14 in it, and its bit 1
/// says a power controller is present (PCIe base spec, Slot Capabilities Register).
const CAP_ID_EXP: u8 = 0x10;
const SLTCAP_OFFSET: usize = 0x14;
const SLTCAP_POWER_CONTROLLER: u32 = 1 << 1;

/// What a downstream port's config space says about its slot's power controller:
/// `Some(true)` present, `Some(false)` absent, `None` when the bytes do not tell (config
/// space cut short: only root reads past the first 64 bytes; no PCIe capability).
pub fn slot_has_power_controller(config: &[u8]) -> Option<bool> {
    let mut ptr = *config.get(0x34)? as usize & !3;
    for _ in 0..48 {
        if ptr < 0x40 {
            return None;
        }
        let id = *config.get(ptr)?;
        if id == CAP_ID_EXP {
            let b = config.get(ptr + SLTCAP_OFFSET..ptr + SLTCAP_OFFSET + 4)?;
            let sltcap = crate::le::u32_at(b, 0);
            return Some(sltcap & SLTCAP_POWER_CONTROLLER != 0);
        }
        ptr = *config.get(ptr + 1)? as usize & !3;
    }
    None
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn write_sysfs(path: PathBuf, value: &str) -> Result<(), PowerError> {
    std::fs::write(&path, value).map_err(|source| PowerError::SysfsWrite { path, source })
}

/// The PCI function ("0000:01:00.0") and its sysfs directory of the NVMe controller whose
/// serial is `serial`, if one is there.
pub fn find_controller(sysfs: &Path, serial: &str) -> Option<(String, PathBuf)> {
    let dir = std::fs::read_dir(sysfs.join("class/nvme")).ok()?;
    for e in dir.flatten() {
        if read_trim(&e.path().join("serial")).as_deref() != Some(serial) {
            continue;
        }
        let dev = std::fs::canonicalize(e.path().join("device")).ok()?;
        let name = dev.file_name()?.to_string_lossy().into_owned();
        return Some((name, dev));
    }
    None
}

impl PcieSlotSwitch {
    /// Checks the setting against the tree: the drive is there (found by serial), its
    /// slot is the configured one or is found from its bus address, and the slot can
    /// switch power (a `power` file, and SltCap PwrCtrl+ where config space is readable).
    pub fn open(
        sysfs: &Path,
        slot: Option<&str>,
        serial: &str,
        timeout: Duration,
    ) -> Result<PcieSlotSwitch, PowerError> {
        let (function, dev) =
            find_controller(sysfs, serial).ok_or_else(|| PowerError::NoNvmeWithSerial {
                serial: serial.into(),
                dir: sysfs.join("class/nvme"),
            })?;
        // A slot's `address` is the function's without ".F": 0000:01:00.
        let slot_address = function
            .rsplit_once('.')
            .map(|(a, _)| a.to_string())
            .unwrap_or_else(|| function.clone());
        let slots = sysfs.join("bus/pci/slots");
        let slot = match slot {
            Some(s) => s.to_string(),
            None => std::fs::read_dir(&slots)
                .ok()
                .into_iter()
                .flatten()
                .flatten()
                .find(|e| read_trim(&e.path().join("address")).as_deref() == Some(&slot_address))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .ok_or_else(|| PowerError::NoSlot {
                    function: function.clone(),
                    dir: slots.clone(),
                })?,
        };
        let power = slots.join(&slot).join("power");
        let no_power = || PowerError::NoSlotPowerControl {
            slot: slot.clone(),
            function: function.clone(),
        };
        if !power.exists() {
            return Err(no_power());
        }
        // The port above the drive holds the slot's capability register.
        if let Some(port) = dev.parent() {
            if let Ok(config) = std::fs::read(port.join("config")) {
                if slot_has_power_controller(&config) == Some(false) {
                    return Err(no_power());
                }
            }
        }
        Ok(PcieSlotSwitch {
            sysfs: sysfs.into(),
            slot,
            serial: serial.into(),
            timeout,
        })
    }

    fn power_file(&self) -> PathBuf {
        self.sysfs
            .join("bus/pci/slots")
            .join(&self.slot)
            .join("power")
    }
}

impl PowerSwitch for PcieSlotSwitch {
    fn describe(&self) -> String {
        format!(
            "pcie-slot {} (NVMe serial {}; an announced cut: the kernel shuts the controller down before slot power-off)",
            self.slot, self.serial
        )
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: Scope::Drive,
            precise_timing: false,
            reports_state: true,
            native_pulse: false,
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        Ok(SwitchTiming::around(|| {
            // Remove the function first, so the kernel is not left holding a device whose
            // link went down under it; a drive already gone needs no removal.
            if let Some((_, dev)) = find_controller(&self.sysfs, &self.serial) {
                let remove = dev.join("remove");
                if remove.exists() {
                    write_sysfs(remove, "1")?;
                }
            }
            write_sysfs(self.power_file(), "0")
        })?
        .0)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        Ok(SwitchTiming::around(|| {
            write_sysfs(self.power_file(), "1")?;
            write_sysfs(self.sysfs.join("bus/pci/rescan"), "1")?;
            let t0 = Instant::now();
            while find_controller(&self.sysfs, &self.serial).is_none() {
                if t0.elapsed() > self.timeout {
                    return Err(PowerError::NvmeNotBack {
                        serial: self.serial.clone(),
                        slot: self.slot.clone(),
                        timeout: self.timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        })?
        .0)
    }
    fn state(&mut self) -> Result<Option<bool>, PowerError> {
        let p = self.power_file();
        let s = std::fs::read_to_string(&p)
            .map_err(|source| PowerError::SysfsRead { path: p, source })?;
        Ok(Some(s.trim() == "1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Config space of a downstream port with the PCIe capability at 0x40 (after a
    /// power-management capability at 0x60 in the list) and SltCap = `sltcap`.
    fn port_config(sltcap: u32) -> Vec<u8> {
        let mut c = vec![0u8; 256];
        c[0x34] = 0x60;
        c[0x60] = 0x01; // power management
        c[0x61] = 0x40;
        c[0x40] = CAP_ID_EXP;
        c[0x41] = 0x00;
        c[0x54..0x58].copy_from_slice(&sltcap.to_le_bytes());
        c
    }

    #[test]
    fn the_slot_capability_register_says_whether_power_is_switchable() {
        // 0x0020_007b: AttnBtn, PwrCtrl, AttnInd, PwrInd, HotPlug+Surprise... as seen on
        // a server's U.2 bay; 0x0000_0060: HotPlug+ Surprise+ without a power controller.
        assert_eq!(slot_has_power_controller(&port_config(0x7b)), Some(true));
        assert_eq!(slot_has_power_controller(&port_config(0x60)), Some(false));
        // Only 64 bytes readable (not root): cannot tell.
        assert_eq!(slot_has_power_controller(&port_config(0x7b)[..64]), None);
        // No capability list at all.
        assert_eq!(slot_has_power_controller(&[0u8; 256]), None);
    }

    /// A fake sysfs: a downstream port 0000:00:1c.0 (config space with `sltcap`), the
    /// drive's function 0000:01:00.0 below it with its `remove` file, class/nvme/nvme0
    /// pointing at it with serial `S1`, and slot 7 at address 0000:01:00 with a `power`
    /// file unless `power_file` is false.
    fn fake_sysfs(sltcap: u32, power_file: bool) -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let port = r.join("devices/pci0000:00/0000:00:1c.0");
        let func = port.join("0000:01:00.0");
        std::fs::create_dir_all(&func).unwrap();
        std::fs::write(port.join("config"), port_config(sltcap)).unwrap();
        std::fs::write(func.join("remove"), "").unwrap();
        std::fs::create_dir_all(r.join("class/nvme/nvme0")).unwrap();
        std::os::unix::fs::symlink(&func, r.join("class/nvme/nvme0/device")).unwrap();
        std::fs::write(r.join("class/nvme/nvme0/serial"), "S1    \n").unwrap();
        let slot = r.join("bus/pci/slots/7");
        std::fs::create_dir_all(&slot).unwrap();
        std::fs::write(slot.join("address"), "0000:01:00\n").unwrap();
        if power_file {
            std::fs::write(slot.join("power"), "1\n").unwrap();
        }
        std::fs::write(r.join("bus/pci/rescan"), "").unwrap();
        t
    }

    fn read(p: PathBuf) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn a_cycle_removes_the_function_powers_the_slot_off_then_on_and_rescans() {
        let t = fake_sysfs(0x7b, true);
        let r = t.path();
        let mut s = PcieSlotSwitch::open(r, None, "S1", Duration::from_secs(1)).unwrap();
        assert_eq!(
            s.slot, "7",
            "the slot is found from the drive's bus address"
        );
        assert_eq!(s.state().unwrap(), Some(true));
        s.off().unwrap();
        let func = r.join("devices/pci0000:00/0000:00:1c.0/0000:01:00.0");
        assert_eq!(read(func.join("remove")), "1");
        assert_eq!(read(r.join("bus/pci/slots/7/power")), "0");
        assert_eq!(s.state().unwrap(), Some(false));
        s.on().unwrap();
        assert_eq!(read(r.join("bus/pci/slots/7/power")), "1");
        assert_eq!(read(r.join("bus/pci/rescan")), "1");
        assert!(s.describe().contains("announced cut"), "{}", s.describe());
    }

    #[test]
    fn a_slot_without_a_power_file_is_refused_naming_lspci_pwrctrl() {
        let t = fake_sysfs(0x7b, false);
        let e = PcieSlotSwitch::open(t.path(), None, "S1", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(e, PowerError::NoSlotPowerControl { .. }), "{e:?}");
        let m = e.to_string();
        assert!(m.contains("lspci -vv") && m.contains("PwrCtrl+"), "{m}");
        assert!(m.contains("slot 7") && m.contains("0000:01:00.0"), "{m}");
    }

    #[test]
    fn a_power_file_on_a_port_without_a_power_controller_is_refused_too() {
        // pciehp offers `power` on every hot-plug slot; without PwrCtrl+ writing 0 only
        // detaches the driver and cuts nothing.
        let t = fake_sysfs(0x60, true);
        let e = PcieSlotSwitch::open(t.path(), None, "S1", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(e, PowerError::NoSlotPowerControl { .. }), "{e:?}");
    }

    #[test]
    fn the_drive_is_found_by_serial_and_a_wrong_serial_or_slot_is_refused() {
        let t = fake_sysfs(0x7b, true);
        let e = PcieSlotSwitch::open(t.path(), None, "OTHER", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(e, PowerError::NoNvmeWithSerial { .. }), "{e:?}");
        std::fs::write(t.path().join("bus/pci/slots/7/address"), "0000:02:00\n").unwrap();
        let e = PcieSlotSwitch::open(t.path(), None, "S1", Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(matches!(e, PowerError::NoSlot { .. }), "{e:?}");
        // Naming the slot works where the address does not tell.
        assert!(PcieSlotSwitch::open(t.path(), Some("7"), "S1", Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn a_drive_that_does_not_come_back_after_power_on_is_an_error() {
        let t = fake_sysfs(0x7b, true);
        let mut s = PcieSlotSwitch::open(t.path(), None, "S1", Duration::from_millis(200)).unwrap();
        s.off().unwrap();
        std::fs::remove_dir_all(t.path().join("class/nvme/nvme0")).unwrap();
        let e = s.on().err().unwrap();
        assert!(matches!(e, PowerError::NvmeNotBack { .. }), "{e:?}");
    }
}
