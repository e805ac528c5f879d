//! The device under test (`dutInfo`) from the identities of the drives a run touched:
//! each drive a `hardwareInfos` entry (model, serial, where it is), its firmware a
//! `softwareInfos` entry, its capacity and queue settings in `metadata`, a sentence per
//! drive in `platformInfos`, and plugpull itself as the software that tested them.

use crate::device::identity::DeviceIdentity;
use crate::units::fmt_bytes;
use serde_json::{Map, Value, json};

/// The `hardwareInfoId` of the `i`th drive of [`dut_info`].
pub fn drive_id(i: usize) -> String {
    format!("drive{i}")
}

/// `dutInfo` for `drives` (the first names the device under test: its WWN, else its
/// serial, else its path), tested from `host` when known.
pub fn dut_info(drives: &[DeviceIdentity], host: Option<&str>) -> Value {
    let first = drives.first();
    let id = first
        .and_then(|d| d.wwn.clone().or(d.serial.clone()))
        .or(first.map(|d| d.target.clone()))
        .unwrap_or_else(|| "unknown".into());
    let mut dut = Map::new();
    dut.insert("dutInfoId".into(), id.into());
    if let Some(d) = first {
        dut.insert("name".into(), name(d).into());
    }
    let mut platform: Vec<Value> = vec![];
    if let Some(h) = host {
        platform.push(json!({"info": format!("tested from host {h}")}));
    }
    let mut hardware = vec![];
    let mut software = vec![plugpull()];
    let mut metadata = Map::new();
    for (i, d) in drives.iter().enumerate() {
        let hw = drive_id(i);
        platform.push(json!({"info": format!("{hw}: {}", sentence(d))}));
        let mut h = Map::new();
        h.insert("hardwareInfoId".into(), hw.clone().into());
        h.insert("name".into(), name(d).into());
        h.insert("location".into(), d.target.clone().into());
        h.insert("partType".into(), part_type(d).into());
        if let Some(s) = &d.serial {
            h.insert("serialNumber".into(), s.clone().into());
        }
        hardware.push(Value::Object(h));
        if let Some(f) = &d.firmware {
            software.push(json!({
                "softwareInfoId": format!("{hw}-firmware"),
                "name": format!("{} firmware", name(d)),
                "version": f,
                "softwareType": "FIRMWARE",
            }));
        }
        // Metadata is one flat object: with several drives each key names its drive.
        let key = |k: &str| {
            if drives.len() == 1 {
                k.to_string()
            } else {
                format!("{hw}.{k}")
            }
        };
        let mut put = |k: &str, v: Value| {
            if !v.is_null() {
                metadata.insert(key(k), v);
            }
        };
        put("capacity_bytes", d.size_bytes.into());
        put("kind", d.kind.clone().into());
        put("disk", json!(d.disk));
        put("wwn", json!(d.wwn));
        put("model", json!(d.model));
        put("serial", json!(d.serial));
        put("firmware", json!(d.firmware));
        put("logical_sector_bytes", json!(d.logical_sector_bytes));
        put("physical_sector_bytes", json!(d.physical_sector_bytes));
        put("rotational", json!(d.rotational));
        put("write_cache", json!(d.write_cache));
        put("fua", json!(d.fua));
        put("loop_backing_file", json!(d.loop_backing_file));
    }
    if !platform.is_empty() {
        dut.insert("platformInfos".into(), platform.into());
    }
    if !hardware.is_empty() {
        dut.insert("hardwareInfos".into(), hardware.into());
    }
    dut.insert("softwareInfos".into(), software.into());
    if !metadata.is_empty() {
        dut.insert("metadata".into(), Value::Object(metadata));
    }
    Value::Object(dut)
}

/// `dutInfo` of a target whose identity is unknown (it could not be opened): its path.
pub fn unidentified(target: &str) -> Value {
    json!({
        "dutInfoId": target,
        "name": target,
        "softwareInfos": [plugpull()],
    })
}

fn plugpull() -> Value {
    json!({
        "softwareInfoId": "plugpull",
        "name": "plugpull",
        "version": env!("CARGO_PKG_VERSION"),
        "softwareType": "APPLICATION",
    })
}

/// The drive's model, else its kernel name, else the path.
fn name(d: &DeviceIdentity) -> String {
    d.model
        .clone()
        .or(d.disk.clone())
        .unwrap_or_else(|| d.target.clone())
}

fn part_type(d: &DeviceIdentity) -> &'static str {
    let disk = d.disk.as_deref().unwrap_or("");
    if d.kind == "file" {
        "file"
    } else if d.kind == "simulated" {
        "simulated drive"
    } else if disk.starts_with("nvme") {
        "NVMe drive"
    } else if disk.starts_with("loop") {
        "loop device"
    } else {
        "block device"
    }
}

/// "Model X, serial S, firmware F, 1.0 TB at /dev/nvme0n1".
fn sentence(d: &DeviceIdentity) -> String {
    let mut s = name(d);
    if let Some(v) = &d.serial {
        s += &format!(", serial {v}");
    }
    if let Some(v) = &d.firmware {
        s += &format!(", firmware {v}");
    }
    s + &format!(", {} at {}", fmt_bytes(d.size_bytes), d.target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drive_is_hardware_its_firmware_software_its_capacity_metadata() {
        let d = DeviceIdentity {
            target: "/dev/nvme0n1".into(),
            kind: "block".into(),
            disk: Some("nvme0n1".into()),
            model: Some("ACME NV1".into()),
            serial: Some("S123".into()),
            firmware: Some("1.2".into()),
            size_bytes: 1 << 30,
            ..Default::default()
        };
        let v = dut_info(&[d], Some("bench"));
        assert_eq!(v["dutInfoId"], "S123");
        assert_eq!(
            v["hardwareInfos"][0],
            json!({"hardwareInfoId": "drive0", "name": "ACME NV1", "location": "/dev/nvme0n1",
                   "partType": "NVMe drive", "serialNumber": "S123"})
        );
        assert_eq!(v["softwareInfos"][1]["version"], "1.2");
        assert_eq!(v["softwareInfos"][1]["softwareType"], "FIRMWARE");
        assert_eq!(v["metadata"]["capacity_bytes"], 1u64 << 30);
        assert_eq!(
            v["platformInfos"][1]["info"],
            format!(
                "drive0: ACME NV1, serial S123, firmware 1.2, {} at /dev/nvme0n1",
                fmt_bytes(1 << 30)
            )
        );
    }
}
