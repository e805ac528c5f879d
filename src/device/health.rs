//! A drive's health counters as its own tools print them, read before and after a cut.
//!
//! Why: the drive's own counters are evidence plugpull cannot make itself. NVMe's Unsafe
//! Shutdowns count rises by exactly one when the drive loses power without being told
//! (the cleanest proof that the cut was a cut), media errors and the critical warning say
//! whether the cut hurt the drive, and the OCP extended log (C0h) says whether its
//! capacitors did their job (PLP start count, capacitor health, incomplete shutdowns).
//! Read through nvme-cli's and smartctl's JSON rather than by hand-built ioctls: those
//! tools know every vendor's quirks, and an admin can run the same command to check.
//!
//! nvme-cli 2.x prints 128-bit counters as JSON strings (`"unsafe_shutdowns":"0"`),
//! older versions as numbers: both are read. A value that is not a count reads as absent,
//! never as 0.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the drive's health log said at one moment. A field is `None` when the tool did
/// not print it or printed something that is not a count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The command whose output this is (`nvme smart-log`, `smartctl -A`).
    pub source: String,
    /// NVMe Critical Warning bits (0: none); SATA: 1 when SMART overall health failed.
    pub critical_warning: Option<u64>,
    /// Available spare, percent (NVMe; SATA attribute 232's normalised value).
    pub available_spare_pct: Option<u64>,
    pub available_spare_threshold_pct: Option<u64>,
    /// NVMe Media and Data Integrity Errors; SATA attribute 187 (Reported Uncorrectable).
    pub media_errors: Option<u64>,
    /// NVMe Unsafe Shutdowns; SATA attribute 174 (Unexpected Power Loss) or else 192
    /// (Power-off Retract / Unsafe Shutdown Count).
    pub unsafe_shutdowns: Option<u64>,
    pub power_cycles: Option<u64>,
    /// The OCP SMART / Health Information Extended log (C0h), where the drive has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocp: Option<OcpHealth>,
}

/// From the OCP Datacenter NVMe SSD specification's extended SMART log (C0h), as
/// `nvme ocp smart-add-log -o json` prints it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OcpHealth {
    pub incomplete_shutdowns: Option<u64>,
    /// Percent of the capacitors' rated charge.
    pub capacitor_health_pct: Option<u64>,
    /// Times the power-loss protection circuit started (the capacitors carried the drive).
    pub plp_start_count: Option<u64>,
    pub bad_user_nand_blocks: Option<u64>,
}

/// A counter printed as a JSON number or as a decimal string; `None` for anything else
/// or a value beyond u64 (a counter that large is not a reading to subtract).
fn counter(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
}

/// The first of `keys` that `v` has: nvme-cli's OCP plugin changed its key spelling
/// (`"Incomplete shutdowns"` in 2.3, `"incomplete_shutdowns"` later).
fn first<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().find_map(|k| v.get(*k))
}

/// `nvme smart-log DEV -o json`; `None` when it is not JSON of a health log.
pub fn from_nvme_smart_log(json: &str) -> Option<Health> {
    let v: Value = serde_json::from_str(json).ok()?;
    v.get("critical_warning")?;
    Some(Health {
        source: "nvme smart-log".into(),
        critical_warning: counter(v.get("critical_warning")),
        available_spare_pct: counter(v.get("avail_spare")),
        available_spare_threshold_pct: counter(v.get("spare_thresh")),
        media_errors: counter(v.get("media_errors")),
        unsafe_shutdowns: counter(v.get("unsafe_shutdowns")),
        power_cycles: counter(v.get("power_cycles")),
        ocp: None,
    })
}

/// `nvme ocp smart-add-log DEV -o json`; `None` when it is not JSON of the C0h log.
pub fn from_ocp_smart_add_log(json: &str) -> Option<OcpHealth> {
    let v: Value = serde_json::from_str(json).ok()?;
    let o = OcpHealth {
        incomplete_shutdowns: counter(first(&v, &["Incomplete shutdowns", "incomplete_shutdowns"])),
        capacitor_health_pct: counter(first(&v, &["Capacitor health", "capacitor_health"])),
        plp_start_count: counter(first(&v, &["PLP start count", "plp_start_count"])),
        bad_user_nand_blocks: counter(first(
            &v,
            &["Bad user nand blocks - Raw", "bad_user_nand_blocks_raw"],
        )),
    };
    (o != OcpHealth::default()).then_some(o)
}

/// `smartctl -j -A -H DEV` of a SATA drive; `None` when it has no attribute table.
pub fn from_smartctl(json: &str) -> Option<Health> {
    let v: Value = serde_json::from_str(json).ok()?;
    let table = v.get("ata_smart_attributes")?.get("table")?.as_array()?;
    let attr = |id: u64| {
        table
            .iter()
            .find(|a| a.get("id").and_then(Value::as_u64) == Some(id))
    };
    let raw = |id: u64| counter(attr(id)?.get("raw")?.get("value"));
    let normalised = |id: u64| counter(attr(id)?.get("value"));
    let threshold = |id: u64| counter(attr(id)?.get("thresh"));
    Some(Health {
        source: "smartctl -A".into(),
        critical_warning: v
            .get("smart_status")
            .and_then(|s| s.get("passed"))
            .and_then(Value::as_bool)
            .map(|passed| u64::from(!passed)),
        available_spare_pct: normalised(232),
        available_spare_threshold_pct: threshold(232),
        media_errors: raw(187),
        unsafe_shutdowns: raw(174).or_else(|| raw(192)),
        power_cycles: counter(v.get("power_cycle_count")).or_else(|| raw(12)),
        ocp: None,
    })
}

/// What changed from `before` to `after` across one unannounced power cut, one sentence
/// each, for the cycle's results; nothing when the drive's counters say what an
/// unannounced cut of a healthy drive should.
pub fn changes_across_a_cut(before: &Health, after: &Health) -> Vec<String> {
    let mut notes = vec![];
    let delta = |b: Option<u64>, a: Option<u64>| Some(a? as i128 - b? as i128);
    match delta(before.unsafe_shutdowns, after.unsafe_shutdowns) {
        Some(1) => {}
        // A counter that fell was not told of a power-off (that leaves it where it was):
        // it is another drive's counter, or one reset, and says nothing of this cut.
        Some(d) if d < 0 => notes.push(format!(
            "the drive's unsafe-shutdown counter ({}) fell by {} across the cut: another drive answered after the cut, or its counter was reset, so the drive's own proof of the cut is missing",
            after.source,
            -d
        )),
        Some(d) => notes.push(format!(
            "the drive's unsafe-shutdown counter ({}) rose by {d}, not 1: the drive was told of the power-off (an announced removal, such as a PCIe slot power-off) or its counter does not count{}",
            after.source,
            if d > 1 { " (or it lost power more than once)" } else { "" }
        )),
        None => notes.push(format!(
            "the drive's unsafe-shutdown counter could not be read both before and after the cut ({}), so the drive's own proof of the cut is missing",
            after.source
        )),
    }
    if let Some(d) = delta(before.media_errors, after.media_errors).filter(|d| *d != 0) {
        notes.push(format!("media errors changed by {d} across the cut"));
    }
    if let (Some(b), Some(a)) = (before.critical_warning, after.critical_warning) {
        if a != b {
            notes.push(format!(
                "critical warning changed from {b:#04x} to {a:#04x}"
            ));
        }
    }
    if let (Some(spare), Some(thresh)) = (
        after.available_spare_pct,
        after.available_spare_threshold_pct,
    ) {
        if thresh > 0 && spare < thresh {
            notes.push(format!(
                "available spare {spare}% is below the drive's threshold {thresh}%"
            ));
        }
    }
    if let (Some(b), Some(a)) = (&before.ocp, &after.ocp) {
        if let Some(d) = delta(b.incomplete_shutdowns, a.incomplete_shutdowns).filter(|d| *d != 0) {
            notes.push(format!(
                "OCP incomplete shutdowns changed by {d}: the drive says it could not finish saving its state"
            ));
        }
        // One start per power loss is what the capacitors are for: only another
        // change says something (none: they did not carry the drive through this cut).
        if let Some(d) = delta(b.plp_start_count, a.plp_start_count).filter(|d| *d != 1) {
            notes.push(format!(
                "OCP PLP start count changed by {d}, not 1: the power-loss protection did not start once for this cut"
            ));
        }
        if let (Some(bh), Some(ah)) = (b.capacitor_health_pct, a.capacitor_health_pct) {
            if ah < bh {
                notes.push(format!("OCP capacitor health fell from {bh}% to {ah}%"));
            }
        }
    }
    notes
}

/// A drive's health before and after one cut, and what changed (a campaign cycle's
/// `health`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcrossTheCut {
    pub before: Option<Health>,
    pub after: Option<Health>,
    /// `changes_across_a_cut`, or why they could not be told.
    pub notes: Vec<String>,
}

impl AcrossTheCut {
    /// `None` when neither reading was had (a simulated drive, or counters not asked for).
    pub fn of(before: Option<Health>, after: Option<Health>) -> Option<AcrossTheCut> {
        let notes = match (&before, &after) {
            (None, None) => return None,
            (Some(b), Some(a)) => changes_across_a_cut(b, a),
            (None, Some(_)) => {
                vec!["the drive's health log could not be read before the cut".into()]
            }
            (Some(_), None) => {
                vec!["the drive's health log could not be read after the cut".into()]
            }
        };
        Some(AcrossTheCut {
            before,
            after,
            notes,
        })
    }

    /// The rise of the unsafe-shutdown counter, when it was read both times.
    pub fn unsafe_shutdowns_delta(&self) -> Option<i64> {
        let b = self.before.as_ref()?.unsafe_shutdowns?;
        let a = self.after.as_ref()?.unsafe_shutdowns?;
        i64::try_from(a as i128 - b as i128).ok()
    }
}

#[cfg(test)]
mod tests;
