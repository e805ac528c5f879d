use super::*;

/// Captured: nvme-cli 2.3 in the lab's guest, QEMU's NVMe drive (tests/fixtures/README.md).
const QEMU_SMART_LOG: &str =
    include_str!("../../../tests/fixtures/nvme-cli/2.3-qemu-smart-log.json");
/// Shaped as nvme-cli 2.3's OCP plugin prints the C0h log; values made up.
const OCP_C0: &str = include_str!("../../../tests/fixtures/nvme-cli/2.3-ocp-smart-add-log.json");
/// Shaped as smartctl 7.3 prints a SATA SSD's attributes; values made up.
const SMARTCTL: &str =
    include_str!("../../../tests/fixtures/smartctl/7.3-sata-ssd-attributes.json");

fn nvme(unsafe_shutdowns: u64, media_errors: u64) -> Health {
    Health {
        source: "nvme smart-log".into(),
        critical_warning: Some(0),
        available_spare_pct: Some(100),
        available_spare_threshold_pct: Some(10),
        media_errors: Some(media_errors),
        unsafe_shutdowns: Some(unsafe_shutdowns),
        power_cycles: Some(3),
        ocp: None,
    }
}

#[test]
fn qemus_captured_smart_log_is_read_field_by_field() {
    let h = from_nvme_smart_log(QEMU_SMART_LOG).unwrap();
    assert_eq!(
        h,
        Health {
            source: "nvme smart-log".into(),
            critical_warning: Some(0),
            available_spare_pct: Some(0),
            available_spare_threshold_pct: Some(0),
            media_errors: Some(0),
            unsafe_shutdowns: Some(0),
            power_cycles: Some(0),
            ocp: None,
        }
    );
}

#[test]
fn counters_as_strings_and_as_numbers_are_read_and_bad_ones_are_absent() {
    let with = |v: &str| QEMU_SMART_LOG.replace(r#""unsafe_shutdowns":"0""#, v);
    let read = |v: &str| from_nvme_smart_log(&with(v)).unwrap().unsafe_shutdowns;
    assert_eq!(read(r#""unsafe_shutdowns":"17""#), Some(17));
    assert_eq!(read(r#""unsafe_shutdowns":17"#), Some(17));
    for bad in [
        r#""unsafe_shutdowns":"seventeen""#,
        r#""unsafe_shutdowns":-1"#,
        r#""unsafe_shutdowns":"340282366920938463463374607431768211455""#,
        r#""unsafe_shutdowns":null"#,
    ] {
        assert_eq!(read(bad), None, "{bad}");
    }
    assert_eq!(from_nvme_smart_log("not json"), None);
    assert_eq!(from_nvme_smart_log(r#"{"other":1}"#), None);
}

#[test]
fn the_ocp_log_is_read_in_both_spellings() {
    let o = from_ocp_smart_add_log(OCP_C0).unwrap();
    let want = OcpHealth {
        incomplete_shutdowns: Some(2),
        capacitor_health_pct: Some(96),
        plp_start_count: Some(41),
        bad_user_nand_blocks: Some(3),
    };
    assert_eq!(o, want);
    let later = OCP_C0
        .replace("\"Incomplete shutdowns\"", "\"incomplete_shutdowns\"")
        .replace("\"Capacitor health\"", "\"capacitor_health\"")
        .replace("\"PLP start count\"", "\"plp_start_count\"")
        .replace(
            "\"Bad user nand blocks - Raw\"",
            "\"bad_user_nand_blocks_raw\"",
        );
    assert_eq!(from_ocp_smart_add_log(&later).unwrap(), want);
    // A drive without the log: nvme-cli prints an error, or JSON without its fields.
    assert_eq!(from_ocp_smart_add_log(QEMU_SMART_LOG), None);
    assert_eq!(
        from_ocp_smart_add_log("NVMe status: INVALID_LOG_PAGE"),
        None
    );
}

#[test]
fn smartctl_attributes_are_read_174_before_192() {
    let h = from_smartctl(SMARTCTL).unwrap();
    assert_eq!(h.unsafe_shutdowns, Some(57));
    assert_eq!(h.media_errors, Some(0));
    assert_eq!(h.available_spare_pct, Some(100));
    assert_eq!(h.available_spare_threshold_pct, Some(10));
    assert_eq!(h.power_cycles, Some(318));
    assert_eq!(h.critical_warning, Some(0));
    let only_192 = SMARTCTL.replace("\"id\": 174", "\"id\": 1174");
    assert_eq!(from_smartctl(&only_192).unwrap().unsafe_shutdowns, Some(60));
    let failing = SMARTCTL.replace("\"passed\": true", "\"passed\": false");
    assert_eq!(from_smartctl(&failing).unwrap().critical_warning, Some(1));
    assert_eq!(from_smartctl(QEMU_SMART_LOG), None);
}

#[test]
fn an_unannounced_cut_of_a_healthy_drive_says_nothing() {
    assert_eq!(
        changes_across_a_cut(&nvme(4, 0), &nvme(5, 0)),
        Vec::<String>::new()
    );
}

#[test]
fn a_counter_that_did_not_rise_by_one_is_marked() {
    for (after, says) in [
        (4, "rose by 0, not 1"),
        (6, "rose by 2, not 1"),
        (3, "fell by 1 across the cut: another drive answered"),
    ] {
        let notes = changes_across_a_cut(&nvme(4, 0), &nvme(after, 0));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains(says), "{notes:?}");
    }
    let mut unread = nvme(5, 0);
    unread.unsafe_shutdowns = None;
    let notes = changes_across_a_cut(&nvme(4, 0), &unread);
    assert!(notes[0].contains("could not be read"), "{notes:?}");
}

#[test]
fn damage_across_the_cut_is_named() {
    let mut after = nvme(5, 2);
    after.critical_warning = Some(0x04);
    after.available_spare_pct = Some(5);
    let notes = changes_across_a_cut(&nvme(4, 0), &after);
    assert_eq!(
        notes,
        [
            "media errors changed by 2 across the cut",
            "critical warning changed from 0x00 to 0x04",
            "available spare 5% is below the drive's threshold 10%",
        ]
    );
}

#[test]
fn the_ocp_counters_across_the_cut_are_named() {
    let ocp = |incomplete, plp, cap| OcpHealth {
        incomplete_shutdowns: Some(incomplete),
        capacitor_health_pct: Some(cap),
        plp_start_count: Some(plp),
        bad_user_nand_blocks: Some(0),
    };
    let (mut b, mut a) = (nvme(4, 0), nvme(5, 0));
    b.ocp = Some(ocp(2, 41, 96));
    a.ocp = Some(ocp(3, 41, 95));
    assert_eq!(
        changes_across_a_cut(&b, &a),
        [
            "OCP incomplete shutdowns changed by 1: the drive says it could not finish saving its state",
            "OCP PLP start count changed by 0, not 1: the power-loss protection did not start once for this cut",
            "OCP capacitor health fell from 96% to 95%",
        ]
    );
    // A PLP drive cut as it should be (its capacitors started once): nothing to say.
    a.ocp = Some(ocp(2, 42, 96));
    assert_eq!(changes_across_a_cut(&b, &a), Vec::<String>::new());
}

#[test]
fn across_the_cut_keeps_both_readings_and_says_which_is_missing() {
    assert_eq!(AcrossTheCut::of(None, None), None);
    let both = AcrossTheCut::of(Some(nvme(4, 0)), Some(nvme(5, 0))).unwrap();
    assert_eq!(both.unsafe_shutdowns_delta(), Some(1));
    assert!(both.notes.is_empty());
    let no_after = AcrossTheCut::of(Some(nvme(4, 0)), None).unwrap();
    assert_eq!(no_after.unsafe_shutdowns_delta(), None);
    assert_eq!(
        no_after.notes,
        ["the drive's health log could not be read after the cut"]
    );
    let no_before = AcrossTheCut::of(None, Some(nvme(4, 0))).unwrap();
    assert_eq!(
        no_before.notes,
        ["the drive's health log could not be read before the cut"]
    );
    // As the results file keeps it: read back the same.
    let json = serde_json::to_string(&both).unwrap();
    assert!(json.contains(r#""unsafe_shutdowns":5"#), "{json}");
    assert_eq!(serde_json::from_str::<AcrossTheCut>(&json).unwrap(), both);
}
