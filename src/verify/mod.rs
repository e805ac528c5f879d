//! `plugpull verify`: read the target back, bypassing the page cache, and judge every
//! acknowledged record against what the witness holds.
//!
//! Why per record and not per location: the witness's list of promises is the truth, and
//! every promise gets exactly one class from the decision table in `classify`. Locations
//! that were legitimately overwritten later (a ring that wrapped, an unacknowledged write
//! that survived) are "superseded", never failures: no false alarms on an honest drive.

pub mod classify;
pub mod distribution;
pub mod medium;
pub mod progress;
pub mod report;
pub mod scan;
pub mod select;

use crate::commands::args::VerifyArgs;
use crate::device::{Device, FileDevice, identity};
use crate::model::{Ack, LossWindow, RecordClass, RunLog, RunSelector, Verdict};
use anyhow::{Context, Result, bail};
use classify::classify_record;
use report::{AckLogCheck, Finding, MAX_FINDINGS, OrderingHoles, REPORT_FORMAT, Report};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Judges every ack of `log` against `dev`.
pub fn verify_device(dev: Arc<dyn Device>, log: &RunLog, read_timeout: Duration) -> Report {
    verify_device_with_progress(dev, log, read_timeout, false, &|_, _| {})
}

/// `verify_device`, reporting `(bytes_done, bytes_total)` of the scan as it goes.
pub fn verify_device_with_progress(
    dev: Arc<dyn Device>,
    log: &RunLog,
    read_timeout: Duration,
    scan_region: bool,
    progress: &dyn Fn(u64, u64),
) -> Report {
    let t0 = Instant::now();
    let acks = &log.acks;
    let s = &log.descriptor.settings;
    let also = scan_region.then_some((
        s.region_offset,
        s.region_offset.saturating_add(s.region_bytes),
    ));
    let result = scan::scan_with_progress(
        dev,
        log.descriptor.run_id,
        acks,
        read_timeout,
        also,
        progress,
    );
    let classes: Vec<RecordClass> = acks
        .iter()
        .zip(&result.tallies)
        .map(|(a, t)| {
            classify_record(
                t,
                result
                    .found_elsewhere
                    .contains_key(&(a.record.stream, a.record.seq)),
            )
        })
        .collect();
    let mut report = judge(acks, &classes, &result.tallies, &result.found_elsewhere);
    if let Some(range) = result.timed_out {
        timed_out(&mut report, acks, &classes, range, read_timeout);
    }
    report.unreadable_ranges = result.unreadable;
    report.bytes_read = result.bytes_read;
    report.verify_ms = t0.elapsed().as_secs_f64() * 1e3;
    report.run = Some(log.descriptor.clone());
    report.note_log_damage(crate::witness::store::log::damage_details(log));
    report
}

/// A read that did not complete within the timeout proves nothing about the data: the
/// host may be starved of CPU (issue 11, defect 9: an honest drive was called FAIL under
/// a CPU hog) or the drive slow. Records it left unread are still counted "unreadable",
/// but unless a record verify did read was damaged, the verdict is INCONCLUSIVE (exit
/// 3), not FAIL, and the summary says how to get a verdict.
fn timed_out(
    report: &mut Report,
    acks: &[Ack],
    classes: &[RecordClass],
    (from, len): (u64, u64),
    read_timeout: Duration,
) {
    let unread = |a: &Ack| a.record.offset < from + len && a.record.end() > from;
    let seen_damaged = acks
        .iter()
        .zip(classes)
        .any(|(a, c)| c.is_failure() && !unread(a));
    if seen_damaged {
        return;
    }
    let n = acks.iter().filter(|a| unread(a)).count();
    report.verdict = Verdict::Inconclusive;
    report.loss_window = None;
    report.summary = format!(
        "a read at byte {from} did not complete within {read_timeout:?}, so {n} of {} \
         acknowledged records could not be checked (no damage was seen in the rest); \
         this is not a verdict on the drive: run verify again, with a longer \
         --read-timeout if this machine is busy",
        acks.len()
    );
}

/// Counts, loss window, ordering holes and the verdict from per-record classes.
fn judge(
    acks: &[Ack],
    classes: &[RecordClass],
    tallies: &[classify::SectorTally],
    elsewhere: &std::collections::HashMap<(u16, u64), u64>,
) -> Report {
    let mut counts = Report::counts_zero();
    for c in classes {
        *counts.get_mut(c.name()).unwrap() += 1;
    }
    let last_ack_ns = acks.iter().map(|a| a.flushed_ns).max().unwrap_or(0);
    let newest_survivor = acks
        .iter()
        .zip(classes)
        .filter(|(_, c)| **c == RecordClass::Intact)
        .map(|(a, _)| a.record.write_time_ns)
        .max();
    let mut findings = vec![];
    let (mut lost_records, mut lost_bytes, mut earliest_lost_ns, mut holes, mut bits) =
        (0u64, 0u64, u64::MAX, 0u64, 0u64);
    for ((a, c), t) in acks.iter().zip(classes).zip(tallies) {
        bits += t.corrupt_bits;
        if !c.is_failure() {
            continue;
        }
        lost_records += 1;
        lost_bytes += a.record.len_bytes();
        earliest_lost_ns = earliest_lost_ns.min(a.flushed_ns);
        let hole = newest_survivor.is_some_and(|s| s > a.flushed_ns);
        holes += hole as u64;
        if findings.len() < MAX_FINDINGS {
            let sectors = [
                ("intact", t.intact),
                ("superseded", t.superseded),
                ("old", t.old),
                ("blank", t.blank),
                ("foreign", t.foreign),
                ("corrupt", t.corrupt),
                ("misplaced", t.misplaced),
                ("unreadable", t.unreadable),
            ]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
            findings.push(Finding {
                class: *c,
                stream: a.record.stream,
                seq: a.record.seq,
                offset: a.record.offset,
                len_bytes: a.record.len_bytes(),
                submitted_ns: a.record.write_time_ns,
                flushed_ns: a.flushed_ns,
                acked_ms_before_last_ack: last_ack_ns.saturating_sub(a.flushed_ns) as f64 / 1e6,
                sectors,
                corrupt_bits: (t.corrupt_bits > 0).then_some(t.corrupt_bits),
                found_at: elsewhere
                    .get(&(a.record.stream, a.record.seq))
                    .copied()
                    .filter(|_| *c == RecordClass::Misdirected),
                ordering_hole: hole,
            });
        }
    }
    let (verdict, summary) = if acks.is_empty() {
        (
            Verdict::Inconclusive,
            "the witness holds no acknowledged records for this run, so there is nothing to check"
                .to_string(),
        )
    } else if lost_records > 0 {
        (
            Verdict::Fail,
            format!(
                "{lost_records} of {} acknowledged records did not survive intact",
                acks.len()
            ),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "all {} acknowledged records survived (intact or legitimately overwritten)",
                acks.len()
            ),
        )
    };
    Report {
        format: REPORT_FORMAT,
        verdict,
        summary,
        counts,
        acked_records: acks.len() as u64,
        acked_bytes: acks.iter().map(|a| a.record.len_bytes()).sum(),
        corrupt_bits: bits,
        loss_window: (lost_records > 0).then(|| LossWindow {
            records: lost_records,
            bytes: lost_bytes,
            ms: last_ack_ns.saturating_sub(earliest_lost_ns) as f64 / 1e6,
        }),
        ordering_holes: OrderingHoles {
            count: holes,
            newest_survivor_submitted_ns: newest_survivor,
        },
        dead_device: None,
        ack_log: AckLogCheck::default(),
        unreadable_ranges: vec![],
        findings_truncated: lost_records as usize > findings.len(),
        findings,
        target: String::new(),
        ram_warning: None,
        device: None,
        run: None,
        bytes_read: 0,
        verify_ms: 0.0,
        ack_timeline: distribution::ack_timeline(acks, classes),
        flush_latency: distribution::flush_latency(acks),
        plugpull_version: env!("CARGO_PKG_VERSION"),
    }
}

/// A report for a target that cannot be opened or read at all.
pub fn dead_device_report(log: &RunLog, why: String) -> Report {
    // Sectors a later acknowledged record covers are that record's to lose: a record
    // wholly covered is superseded even on a dead drive.
    let visible = scan::visible_ranges(&log.acks);
    let tallies: Vec<_> = log
        .acks
        .iter()
        .zip(&visible)
        .map(|(a, v)| {
            let seen: u64 = v
                .iter()
                .map(|(s, e)| (e - s) / crate::record::SECTOR as u64)
                .sum();
            classify::SectorTally {
                unreadable: seen as u32,
                superseded: a.record.sectors - seen as u32,
                ..Default::default()
            }
        })
        .collect();
    let classes: Vec<RecordClass> = tallies.iter().map(|t| classify_record(t, false)).collect();
    let mut r = judge(&log.acks, &classes, &tallies, &Default::default());
    r.verdict = if log.acks.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Fail
    };
    r.summary = format!("the device is dead: {why}");
    r.dead_device = Some(why);
    r.run = Some(log.descriptor.clone());
    r.note_log_damage(crate::witness::store::log::damage_details(log));
    r
}

/// Where a run's acks came from and whether they proved they are all of them.
pub struct LoadedRun {
    pub log: RunLog,
    /// "witness HOST:PORT" or the file's path.
    pub source: String,
    pub wholeness: crate::witness::store::log::Wholeness,
}

/// Loads the run's acks from a log file or the witness.
pub fn load_run(a: &VerifyArgs) -> Result<RunLog> {
    Ok(load_run_checked(a)?.log)
}

/// [`load_run`], also saying whether the acks are provably all of them: a file must end
/// in a matching end mark (module `ack::log`); a fetch from the witness ends in the
/// witness's count of what it sent, over the (authenticated, with a key) connection.
pub fn load_run_checked(a: &VerifyArgs) -> Result<LoadedRun> {
    let run = match &a.run {
        Some(r) => Some(
            crate::record::RunId::parse(r)
                .with_context(|| format!("--run '{r}' is not a run id (32 hex digits)"))?,
        ),
        None => None,
    };
    let key = crate::wire::auth::load_key(a.key_file.as_deref())?;
    let (log, source, wholeness) = if let Some(path) = &a.acks {
        let (log, wholeness) =
            crate::witness::store::log::read_log_file_checked(path, key.as_ref())
                .with_context(|| format!("reading acks from {}", path.display()))?;
        (log, path.display().to_string(), wholeness)
    } else {
        let witness = a
            .witness
            .as_deref()
            .expect("clap requires --witness or --acks");
        let log = match run {
            Some(r) => {
                crate::witness::client::fetch_with_key(witness, &RunSelector::Run(r), key.as_ref())?
            }
            None => select::latest_for_target(
                &select::Witness {
                    addr: witness,
                    key: key.as_ref(),
                },
                &a.target,
                &identity::identify(&a.target),
                a.read_timeout,
            )?,
        };
        let how = format!(
            "fetched from the witness, which counted {} acks and sent them all{}",
            log.acks.len(),
            if key.is_some() {
                " over a connection authenticated with --key-file"
            } else {
                ""
            }
        );
        let whole = crate::witness::store::log::Wholeness { whole: true, how };
        (log, format!("witness {witness}"), whole)
    };
    if let Some(r) = run {
        if log.descriptor.run_id != r {
            bail!("the ack log is for run {}, not {r}", log.descriptor.run_id);
        }
    }
    Ok(LoadedRun {
        log,
        source,
        wholeness,
    })
}

pub fn run(a: VerifyArgs) -> Result<i32> {
    if !a.target.exists() && a.run.is_none() && a.acks.is_none() {
        bail!(
            "{} does not exist. Give the path of the device or file the run wrote to; if the drive did not come back after the cut, pass --run RUN_ID (or --acks FILE) to get a dead-device verdict",
            a.target.display()
        );
    }
    let LoadedRun {
        log,
        source,
        wholeness,
    } = load_run_checked(&a)?;
    crate::witness::validate::refuse_impossible_run(&log)?;
    let note = |r: &mut Report| {
        r.note_log_wholeness(source.clone(), wholeness.whole, wholeness.how.clone())
    };
    if !a.target.exists() {
        // The run is named explicitly: a target that was there for the run and is gone
        // now is the "dead device" finding, not a usage error.
        let absolute = std::path::absolute(&a.target).unwrap_or_else(|_| a.target.clone());
        if absolute.display().to_string() != log.descriptor.device.target {
            bail!(
                "{} does not exist, and run {} wrote to {}: give that path",
                a.target.display(),
                log.descriptor.run_id,
                log.descriptor.device.target
            );
        }
        let mut report = dead_device_report(
            &log,
            format!(
                "{} does not exist any more (the device did not come back after the cut)",
                a.target.display()
            ),
        );
        report.target = a.target.display().to_string();
        note(&mut report);
        return print_report(&a, &report);
    }
    let device = identity::identify(&a.target);
    select::check_identity(
        &log,
        &a.target,
        &device,
        a.allow_identity_mismatch,
        a.read_timeout,
    )?;
    let mut report = match FileDevice::open_read(&a.target) {
        Ok(dev) => {
            let bar = progress::ScanBar::new(a.quiet);
            let r = verify_device_with_progress(
                Arc::new(dev),
                &log,
                a.read_timeout,
                a.scan_region,
                &|d, t| bar.update(d, t),
            );
            bar.finish();
            r
        }
        Err(e) => dead_device_report(&log, format!("{e:#}")),
    };
    report.target = a.target.display().to_string();
    report.device = Some(device);
    report.ram_warning = crate::device::safety::ram_warning(&a.target);
    if let Some(w) = &report.ram_warning {
        eprintln!("plugpull verify: WARNING: {w}");
    }
    note(&mut report);
    print_report(&a, &report)
}

fn print_report(a: &VerifyArgs, report: &Report) -> Result<i32> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else if a.quiet {
        println!("VERDICT: {} - {}", report.verdict.name(), report.summary);
    } else {
        print!("{}", report.to_text());
    }
    Ok(report.verdict.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::mem::MemDevice;
    use crate::model::{RunDescriptor, WriterSettings};
    use crate::record::{RecordId, RunId, fill_record};
    use crate::rng::RunKey;

    fn log(run: RunId, acks: Vec<Ack>) -> RunLog {
        RunLog {
            descriptor: RunDescriptor {
                run_id: run,
                format_version: crate::record::FORMAT_VERSION,
                plugpull_version: String::new(),
                host: String::new(),
                started_at: String::new(),
                device: Default::default(),
                settings: WriterSettings {
                    region_offset: 0,
                    region_bytes: 1 << 16,
                    record_bytes_min: 4096,
                    record_bytes_max: 4096,
                    placement: "sequential".into(),
                    streams: 1,
                    flush: crate::device::FlushMethod::Fdatasync,
                    direct: true,
                    seed: 0,
                },
                command: vec![],
            },
            acks,
            events: vec![],
        }
    }

    fn ack(seq: u64, offset: u64) -> Ack {
        Ack {
            record: RecordId {
                stream: 0,
                seq,
                offset,
                sectors: 8,
                write_time_ns: seq,
            },
            flushed_ns: seq,
        }
    }

    /// A record acknowledged over an earlier one takes over its promise: when both are
    /// lost, only the later one is (the earlier was judged lost too before the fix; the
    /// simulated drive's oracle and the design both say "latest acknowledged record").
    #[test]
    fn only_the_latest_acked_record_at_a_sector_is_judged() {
        let run = RunId([9; 16]);
        let key = RunKey::new(run);
        let dev = Arc::new(MemDevice::new(1 << 16));
        // seq 1 and seq 3 at 0 (both lost: the device holds zeros there), seq 2 intact
        // at 4096.
        let a2 = ack(2, 4096);
        let mut buf = vec![0u8; 4096];
        fill_record(&mut buf, &key, run, &a2.record);
        dev.write_at(&buf, 4096).unwrap();
        let l = log(run, vec![ack(1, 0), a2, ack(3, 0)]);
        let r = verify_device(dev.clone(), &l, Duration::from_secs(5));
        assert_eq!(r.counts["lost"], 1, "{:?}", r.findings);
        assert_eq!(r.counts["superseded"], 1);
        assert_eq!(r.counts["intact"], 1);
        assert_eq!(r.findings[0].seq, 3);
        // A dead device: the covered record is superseded, the others unreadable.
        let d = dead_device_report(&l, "gone".into());
        assert_eq!(d.counts["unreadable"], 2);
        assert_eq!(d.counts["superseded"], 1);
    }

    /// A device whose first read at or past `stall_from` takes `stall` (a host starved of
    /// CPU, a drive busy collecting garbage) and then returns the right data.
    struct SlowOnce {
        inner: Arc<MemDevice>,
        stall_from: u64,
        stall: Duration,
        stalled: std::sync::atomic::AtomicBool,
    }

    impl Device for SlowOnce {
        fn size_bytes(&self) -> u64 {
            self.inner.size_bytes()
        }
        fn logical_block_bytes(&self) -> u32 {
            512
        }
        fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<()> {
            panic!("verify must never write")
        }
        fn flush(&self) -> std::io::Result<()> {
            panic!("verify must never flush")
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            let ordering = std::sync::atomic::Ordering::SeqCst;
            if offset >= self.stall_from && !self.stalled.swap(true, ordering) {
                std::thread::sleep(self.stall);
            }
            self.inner.read_at(buf, offset)
        }
    }

    /// `n` intact 4 KiB records at `offsets` of a 4 MiB device, and their log.
    fn intact_run(offsets: &[u64]) -> (Arc<MemDevice>, RunLog) {
        let run = RunId([7; 16]);
        let key = RunKey::new(run);
        let dev = Arc::new(MemDevice::new(4 << 20));
        let acks: Vec<Ack> = offsets
            .iter()
            .enumerate()
            .map(|(i, &o)| ack(i as u64 + 1, o))
            .collect();
        for a in &acks {
            let mut buf = vec![0u8; 4096];
            fill_record(&mut buf, &key, run, &a.record);
            dev.write_at(&buf, a.record.offset).unwrap();
        }
        (dev, log(run, acks))
    }

    /// Issue 11, defect 9 (a false alarm under load): a read slower than
    /// `--read-timeout` on an honest drive made verify say FAIL, "8 of 8 acknowledged
    /// records did not survive intact", about records it never saw. A timeout proves
    /// nothing about the data: INCONCLUSIVE (exit 3), and the next verify decides.
    #[test]
    fn false_alarm_under_load_a_read_timeout_is_inconclusive_not_fail() {
        let offsets: Vec<u64> = (0..8).map(|i| i * 4096).collect();
        let (dev, l) = intact_run(&offsets);
        let slow = Arc::new(SlowOnce {
            inner: dev,
            stall_from: 0,
            stall: Duration::from_millis(1500),
            stalled: Default::default(),
        });
        let r = verify_device(slow.clone(), &l, Duration::from_millis(200));
        assert_eq!(r.verdict, Verdict::Inconclusive, "{}", r.to_text());
        assert_eq!(r.verdict.exit_code(), crate::exit::INCONCLUSIVE);
        assert!(r.loss_window.is_none(), "nothing was shown lost");
        assert!(r.summary.contains("--read-timeout"), "{}", r.summary);
        // The drive kept everything: once the read answers in time, PASS.
        let again = verify_device(slow, &l, Duration::from_millis(200));
        assert_eq!(again.verdict, Verdict::Pass, "{}", again.to_text());
        assert_eq!(again.counts["intact"], 8);
    }

    /// The other side: a loss verify did see stays a FAIL when a later read times out.
    #[test]
    fn a_read_timeout_does_not_hide_a_loss_already_seen() {
        // Record 1 at 0 is lost (zeros); record 2 lies in the next 2 MiB chunk, whose
        // read stalls past the timeout.
        let (dev, mut l) = intact_run(&[2 << 20]);
        l.acks.insert(0, ack(0, 0));
        let slow = Arc::new(SlowOnce {
            inner: dev,
            stall_from: 2 << 20,
            stall: Duration::from_millis(1500),
            stalled: Default::default(),
        });
        let r = verify_device(slow, &l, Duration::from_millis(200));
        assert_eq!(r.verdict, Verdict::Fail, "{}", r.to_text());
        assert_eq!(r.counts["lost"], 1);
        assert_eq!(r.counts["unreadable"], 1);
    }
}
