use super::*;

/// The tree section's counts read as every count in text does: with separators.
#[test]
fn the_tree_text_separates_thousands() {
    let t = TreeSection {
        root: "/mnt/t".into(),
        files_acked: 1_234_567,
        file_counts: [("intact", 1_234_000u64), ("lost", 567)]
            .into_iter()
            .collect(),
        unacked_present: 12_345,
        unacked_absent: 1_000,
        read_mode: "O_DIRECT".into(),
        findings: vec![],
    };
    let text = tree_text(&t);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1],
        "Tree /mnt/t (1,234,567 acknowledged file versions; read with O_DIRECT):"
    );
    assert_eq!(lines[2], "  intact        1,234,000");
    assert_eq!(lines[3], "  lost          567");
    assert_eq!(
        lines[4],
        "  never acknowledged: 12,345 present, 1,000 absent (not failures)"
    );
}
