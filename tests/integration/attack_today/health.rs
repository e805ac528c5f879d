//! The drive's health counters from nvme-cli's and smartctl's JSON: a value that is not a
//! count reads as absent, never as 0 or another number, and the notes say what the
//! counters show.

use plugpull::device::health::{
    AcrossTheCut, changes_across_a_cut, from_nvme_smart_log, from_ocp_smart_add_log, from_smartctl,
};
use serde_json::{Value, json};

/// Values that are not counts, as JSON.
fn hostile() -> Vec<Value> {
    vec![
        json!(-1),
        json!(-0.0),
        json!(1.5),
        json!(3.0),
        json!(1e30),
        json!("18446744073709551616"),
        json!("-3"),
        json!("0x10"),
        json!("1.0"),
        json!("1e3"),
        json!(""),
        json!("  "),
        json!("12 34"),
        json!(null),
        json!(true),
        json!([1]),
        json!({"value": 1}),
    ]
}

#[test]
fn attack_today_nvme_counters_that_are_not_counts_read_as_absent() {
    for v in hostile() {
        let log = json!({"critical_warning": v, "unsafe_shutdowns": v, "media_errors": v,
            "power_cycles": v, "avail_spare": v, "spare_thresh": v});
        let h = from_nvme_smart_log(&log.to_string()).expect("a smart log");
        assert_eq!(h.unsafe_shutdowns, None, "{v}");
        assert_eq!(h.media_errors, None, "{v}");
        assert_eq!(h.critical_warning, None, "{v}");
        assert_eq!(h.power_cycles, None, "{v}");
        assert_eq!(h.available_spare_pct, None, "{v}");
    }
    // Huge but in range is the number, as a string or a number.
    let h =
        from_nvme_smart_log(r#"{"critical_warning":0,"unsafe_shutdowns":"18446744073709551615"}"#)
            .unwrap();
    assert_eq!(h.unsafe_shutdowns, Some(u64::MAX));
    // Not a smart log at all.
    for text in ["", "[]", "null", "{}", "{\"critical_warning\"", "42"] {
        assert!(from_nvme_smart_log(text).is_none(), "{text:?}");
    }
}

#[test]
fn attack_today_smartctl_and_ocp_values_that_are_not_counts_read_as_absent() {
    for v in hostile() {
        let out = json!({
            "smart_status": {"passed": v},
            "power_cycle_count": v,
            "ata_smart_attributes": {"table": [
                {"id": 174, "value": v, "thresh": v, "raw": {"value": v}},
                {"id": 187, "raw": {"value": v}},
                {"id": 232, "value": v, "thresh": v, "raw": {"value": v}},
            ]}
        });
        let h = from_smartctl(&out.to_string()).expect("an attribute table");
        assert_eq!(h.unsafe_shutdowns, None, "{v}");
        assert_eq!(h.media_errors, None, "{v}");
        assert_eq!(h.power_cycles, None, "{v}");
        assert_eq!(h.available_spare_pct, None, "{v}");
        assert_eq!(h.available_spare_threshold_pct, None, "{v}");
        if !v.is_boolean() {
            assert_eq!(h.critical_warning, None, "{v}");
        }
        let ocp = json!({"PLP start count": v, "Incomplete shutdowns": v,
            "Capacitor health": v, "Bad user nand blocks - Raw": v});
        assert_eq!(from_ocp_smart_add_log(&ocp.to_string()), None, "{v}");
    }
    // An attribute id that is not a number is no attribute.
    let out = json!({"ata_smart_attributes": {"table": [
        {"id": "174", "raw": {"value": 5}}, {"id": 174.0, "raw": {"value": 6}}]}});
    assert_eq!(
        from_smartctl(&out.to_string()).unwrap().unsafe_shutdowns,
        None
    );
}

fn nvme(unsafe_shutdowns: &str) -> plugpull::device::health::Health {
    from_nvme_smart_log(&format!(
        r#"{{"critical_warning":0,"unsafe_shutdowns":{unsafe_shutdowns}}}"#
    ))
    .unwrap()
}

/// "Rose by exactly one" is the only quiet answer; a counter that fell is not "the drive
/// was told of the power-off" (that gives 0): it is another drive, or a counter reset.
#[test]
fn attack_today_the_unsafe_shutdown_notes_say_what_the_counter_did() {
    assert!(changes_across_a_cut(&nvme("10"), &nvme("11")).is_empty());
    let zero = changes_across_a_cut(&nvme("10"), &nvme("10"));
    assert_eq!(zero.len(), 1);
    assert!(zero[0].contains("rose by 0, not 1"), "{zero:?}");
    let two = changes_across_a_cut(&nvme("10"), &nvme("12"));
    assert!(two[0].contains("more than once"), "{two:?}");
    let fell = changes_across_a_cut(&nvme("10"), &nvme("7"));
    assert_eq!(fell.len(), 1, "{fell:?}");
    assert!(!fell[0].contains("rose by"), "{fell:?}");
    assert!(!fell[0].contains("was told of the power-off"), "{fell:?}");
    assert!(fell[0].contains("fell"), "{fell:?}");
    // At the ends of u64 the rise is exact.
    let max = changes_across_a_cut(&nvme("0"), &nvme("\"18446744073709551615\""));
    assert!(max[0].contains("18446744073709551615"), "{max:?}");
    let across = AcrossTheCut::of(Some(nvme("0")), Some(nvme("\"18446744073709551615\""))).unwrap();
    assert_eq!(
        across.unsafe_shutdowns_delta(),
        None,
        "beyond i64 is not a delta"
    );
    // A string and a number of the same count are the same count.
    assert!(changes_across_a_cut(&nvme("\"10\""), &nvme("11")).is_empty());
}
