//! The verdict table: every combination of the facts against the rule written out the
//! other way round, as a sequence of adjustments to a first verdict (how the report
//! used to reach it), plus the rows that matter spelled out.

use super::*;

const WHY_DEAD: &str = "/dev/x does not exist any more";

/// The verdict and summary reached by adjusting the drive's verdict once per fact, in
/// the order the facts used to be noted: scan, read timeout, dead device, log damage,
/// log wholeness, the medium's proof, the writer's end.
fn by_adjustments(f: &Facts) -> (Verdict, String) {
    let n = f.acked;
    let (mut v, mut s) = if n == 0 {
        (
            Verdict::Inconclusive,
            "the witness holds no acknowledged records for this run, so there is nothing to check"
                .to_string(),
        )
    } else if f.failing > 0 {
        let mut s = format!(
            "{} of {n} acknowledged records did not survive intact",
            f.failing
        );
        // The records a hung read left are in no count: the summary says how many.
        if let Some(t) = f.read_timeout.as_ref().filter(|t| t.damage_seen) {
            let were = match t.unread {
                1 => "record was",
                _ => "records were",
            };
            s += &format!(
                "; {} other acknowledged {were} left unread and not judged: a read at byte {} did not complete within {:?}",
                t.unread, t.at_byte, t.limit
            );
        }
        (Verdict::Fail, s)
    } else {
        (
            Verdict::Pass,
            format!("all {n} acknowledged records survived (intact or legitimately overwritten)"),
        )
    };
    if let Some(t) = f.read_timeout.as_ref().filter(|t| !t.damage_seen) {
        v = Verdict::Inconclusive;
        s = format!(
            "a read at byte {} did not complete within {:?}, so {} of {} acknowledged records could not be checked (no damage was seen in the rest); this is not a verdict on the drive: run verify again, with a longer --read-timeout if this machine is busy",
            t.at_byte, t.limit, t.unread, t.acks
        );
    }
    if let Some(why) = &f.dead_device {
        v = if n == 0 {
            Verdict::Inconclusive
        } else {
            Verdict::Fail
        };
        s = format!("the device is dead: {why}");
    }
    let damage = &f.log_damage;
    if !damage.is_empty() {
        let more = match damage.len() {
            1 => String::new(),
            k => format!(" (and {} more places)", k - 1),
        };
        if v == Verdict::Fail {
            s += &format!("; the ack log is also damaged: {}{more}", damage[0]);
        } else {
            v = Verdict::Inconclusive;
            s = format!(
                "the ack log is damaged, so acknowledged records it lost were not checked: {}{more} (of the {n} records it still holds, none failed)",
                damage[0]
            );
        }
    }
    // An empty log that is not proven whole may be cut short: that is what it says, not
    // "no acks" (unless the drive's own no-verdict came first).
    let no_acks_only =
        n == 0 && f.dead_device.is_none() && f.read_timeout.as_ref().is_none_or(|t| t.damage_seen);
    if let Some((false, how)) = &f.log_whole
        && damage.is_empty()
        && (v == Verdict::Pass || no_acks_only)
    {
        v = Verdict::Inconclusive;
        s = if n == 0 {
            format!(
                "the ack log holds no acknowledged records it can read, and cannot prove it holds every ack (it may be cut short or damaged), so nothing could be checked: {how}"
            )
        } else {
            format!(
                "all {n} acknowledged records in the ack log survived, but the log cannot prove it holds every ack: {how}"
            )
        };
    }
    if let Some(why) = &f.log_cannot_be_complete
        && v == Verdict::Pass
    {
        v = Verdict::Inconclusive;
        s = format!(
            "all {n} acknowledged records in the ack log survived, but the log cannot hold every ack: {why}"
        );
    }
    if let Some(end) = &f.writer_end {
        let how = end.describe();
        if v == Verdict::Pass {
            if let WriterEnd::StillConnected(_) = end {
                v = Verdict::Inconclusive;
                s = format!(
                    "all {n} acknowledged records in the ack log survived, but the log cannot hold every ack: the writer {how}; verify after the power cut, once the writer is gone"
                );
            } else if !end.is_cut_evidence() && !f.rehearsal {
                v = Verdict::Inconclusive;
                s = format!(
                    "no power cut during writing: the writer {how}, so no acknowledged write was put at risk by a power cut. Cut the power while `plugpull write` runs; to judge a clean run on purpose, pass --rehearsal"
                );
            }
        } else if v == Verdict::Fail && !end.is_cut_evidence() && !f.rehearsal {
            s += &format!("; no power cut was seen during writing: the writer {how}");
        }
    }
    if v == Verdict::Pass && n > 0 && f.intact == 0 {
        v = Verdict::Inconclusive;
        s = format!(
            "none of the {n} acknowledged records could be checked: all of them were overwritten later (by later records or later runs), so nothing says whether the drive kept them"
        );
    }
    (v, s)
}

/// Every combination of the facts, each with a few values that matter.
fn every_combination() -> Vec<Facts> {
    let timeouts = [
        None,
        Some(ReadTimeout {
            at_byte: 4096,
            unread: 2,
            acks: 5,
            limit: Duration::from_secs(10),
            damage_seen: false,
        }),
        Some(ReadTimeout {
            at_byte: 4096,
            unread: 2,
            acks: 5,
            limit: Duration::from_secs(10),
            damage_seen: true,
        }),
    ];
    let dead = [None, Some(WHY_DEAD.to_string())];
    let damage = [vec![], vec!["a".into()], vec!["a".into(), "b".into()]];
    let whole = [
        None,
        Some((true, "end mark".into())),
        Some((false, "no end mark".into())),
    ];
    let beyond = [None, Some("record 9 of stream 0".to_string())];
    let ends = [
        None,
        Some(WriterEnd::Vanished("idle".into())),
        Some(WriterEnd::TargetFailed("EIO".into())),
        Some(WriterEnd::Finished("done".into())),
        Some(WriterEnd::Closed("reset".into())),
        Some(WriterEnd::StillConnected("held".into())),
        Some(WriterEnd::Unknown("?".into())),
    ];
    let mut all = vec![];
    for (acked, failing, intact) in [(0, 0, 0), (5, 0, 0), (5, 0, 3), (5, 2, 0), (5, 2, 3)] {
        for t in &timeouts {
            for d in &dead {
                for g in &damage {
                    for w in &whole {
                        for b in &beyond {
                            for e in &ends {
                                for rehearsal in [false, true] {
                                    all.push(Facts {
                                        acked,
                                        failing,
                                        intact,
                                        read_timeout: t.clone(),
                                        dead_device: d.clone(),
                                        log_damage: g.clone(),
                                        log_whole: w.clone(),
                                        log_cannot_be_complete: b.clone(),
                                        writer_end: e.clone(),
                                        rehearsal,
                                        refused: None,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    all
}

#[test]
fn every_combination_of_facts_gets_the_verdict_the_adjustments_gave() {
    let all = every_combination();
    assert_eq!(all.len(), 5 * 3 * 2 * 3 * 3 * 2 * 7 * 2);
    let mut seen = std::collections::BTreeSet::new();
    for f in &all {
        let (v, r) = decide(f);
        assert_eq!((v, summary(f, r)), by_adjustments(f), "{f:#?}");
        seen.insert(format!("{v:?} {r:?}"));
    }
    // Every rule decides some combination.
    assert_eq!(seen.len(), 12, "{seen:?}");
}

/// Refused acks were never judged: whatever else the facts say (failures counted
/// before the refusal, a dead device, a cut), no combination gives PASS or FAIL.
#[test]
fn refused_acks_give_no_verdict_in_every_combination() {
    for f in every_combination() {
        let f = Facts {
            refused: Some("ack 8 does not follow seq 16".into()),
            ..f
        };
        let (v, r) = decide(&f);
        assert_eq!((v, r), (Verdict::Inconclusive, Reason::Refused), "{f:#?}");
        assert!(summary(&f, r).contains("does not follow seq 16"));
    }
}

fn facts(acked: u64, failing: u64, intact: u64) -> Facts {
    Facts {
        acked,
        failing,
        intact,
        writer_end: Some(WriterEnd::Vanished("idle".into())),
        log_whole: Some((true, "end mark".into())),
        ..Default::default()
    }
}

#[test]
fn the_rows_that_matter() {
    use Reason::*;
    use Verdict::*;
    let rows: Vec<(&str, Facts, Verdict, Reason)> = vec![
        (
            "every record intact after a cut",
            facts(5, 0, 5),
            Pass,
            AllSurvived,
        ),
        ("a record lost", facts(5, 1, 4), Fail, Lost),
        (
            "a loss stands in a damaged log",
            Facts {
                log_damage: vec!["x".into()],
                ..facts(5, 1, 4)
            },
            Fail,
            Lost,
        ),
        (
            "a damaged log without a loss",
            Facts {
                log_damage: vec!["x".into()],
                ..facts(5, 0, 5)
            },
            Inconclusive,
            LogDamaged,
        ),
        (
            "a hung read without damage in what was read",
            Facts {
                read_timeout: Some(ReadTimeout {
                    at_byte: 0,
                    unread: 3,
                    acks: 5,
                    limit: Duration::from_secs(1),
                    damage_seen: false,
                }),
                ..facts(5, 3, 2)
            },
            Inconclusive,
            ReadTimedOut,
        ),
        (
            "a hung read after a damaged record",
            Facts {
                read_timeout: Some(ReadTimeout {
                    at_byte: 0,
                    unread: 3,
                    acks: 5,
                    limit: Duration::from_secs(1),
                    damage_seen: true,
                }),
                ..facts(5, 4, 1)
            },
            Fail,
            Lost,
        ),
        (
            "a dead device",
            Facts {
                dead_device: Some(WHY_DEAD.into()),
                ..facts(5, 5, 0)
            },
            Fail,
            DeadDevice,
        ),
        (
            "a dead device, no acks",
            Facts {
                dead_device: Some(WHY_DEAD.into()),
                ..facts(0, 0, 0)
            },
            Inconclusive,
            DeadDevice,
        ),
        ("no acks", facts(0, 0, 0), Inconclusive, NoAcks),
        (
            "no acks in a log cut short inside its first frame of acks",
            Facts {
                log_whole: Some((false, "no end mark".into())),
                ..facts(0, 0, 0)
            },
            Inconclusive,
            LogNotProvenWhole,
        ),
        (
            "a log without its end mark",
            Facts {
                log_whole: Some((false, "no end mark".into())),
                ..facts(5, 0, 5)
            },
            Inconclusive,
            LogNotProvenWhole,
        ),
        (
            "records on the medium past the last ack",
            Facts {
                log_cannot_be_complete: Some("record 9".into()),
                ..facts(5, 0, 5)
            },
            Inconclusive,
            LogCannotBeComplete,
        ),
        (
            "the writer still connected",
            Facts {
                writer_end: Some(WriterEnd::StillConnected("held".into())),
                rehearsal: true,
                ..facts(5, 0, 5)
            },
            Inconclusive,
            WriterStillConnected,
        ),
        (
            "a writer that finished",
            Facts {
                writer_end: Some(WriterEnd::Finished("done".into())),
                ..facts(5, 0, 5)
            },
            Inconclusive,
            NoCut,
        ),
        (
            "a writer that finished, --rehearsal",
            Facts {
                writer_end: Some(WriterEnd::Finished("done".into())),
                rehearsal: true,
                ..facts(5, 0, 5)
            },
            Pass,
            AllSurvived,
        ),
        (
            "every record overwritten by later runs",
            facts(5, 0, 0),
            Inconclusive,
            NothingChecked,
        ),
        (
            "a caller's log, no writer end asked for, nothing read back",
            Facts {
                writer_end: None,
                log_whole: None,
                ..facts(5, 0, 0)
            },
            Inconclusive,
            NothingChecked,
        ),
        (
            "a caller's log, no writer end asked for, records read back",
            Facts {
                writer_end: None,
                log_whole: None,
                ..facts(5, 0, 5)
            },
            Pass,
            AllSurvived,
        ),
    ];
    for (what, f, verdict, reason) in rows {
        assert_eq!(decide(&f), (verdict, reason), "{what}");
    }
}

#[test]
fn a_fail_says_what_else_is_wrong() {
    let f = Facts {
        log_damage: vec!["at byte 9".into(), "at byte 99".into()],
        writer_end: Some(WriterEnd::Finished("done".into())),
        ..facts(5, 1, 4)
    };
    let (v, r) = decide(&f);
    assert_eq!(v, Verdict::Fail);
    assert_eq!(
        summary(&f, r),
        "1 of 5 acknowledged records did not survive intact; the ack log is also damaged: \
         at byte 9 (and 1 more places); no power cut was seen during writing: the writer \
         finished by itself (done)"
    );
    // With --rehearsal the user said there was no cut: the FAIL does not say it again.
    let f = Facts {
        rehearsal: true,
        ..f
    };
    assert_eq!(
        summary(&f, decide(&f).1),
        "1 of 5 acknowledged records did not survive intact; the ack log is also damaged: \
         at byte 9 (and 1 more places)"
    );
}
