use crate::model::{Ack, RunDescriptor};
use crate::wire::frame;
use crate::wire::msg::tests::{ack, sample_descriptor};
use crate::witness::store::journal::{Journal, JournalOptions, has_journal, list_journals};
use crate::witness::store::journal_replay::{Replayed, replay};
use crate::witness::store::layout::{journal_path, log_path};
use crate::witness::store::log::AckLog;
use crate::witness::store::reader::read_log_file;
use crate::witness::store::storage::FsStorage;
use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Arc;

fn logs_with_journal(
    dir: &Path,
    opts: JournalOptions,
    runs: &[RunDescriptor],
) -> (Arc<Journal>, Vec<AckLog>) {
    let j = Arc::new(Journal::open(FsStorage::shared(), dir, opts).unwrap());
    let logs = runs
        .iter()
        .map(|d| {
            AckLog::create(&FsStorage, dir, d)
                .unwrap()
                .with_journal(j.clone())
        })
        .collect();
    (j, logs)
}

/// What a power cut does to a log whose appends were never fdatasync'd: the page
/// cache is gone, the file holds only what was synced at creation.
fn lose_unsynced_appends(log: &Path, synced_len_bytes: u64) {
    let f = OpenOptions::new().write(true).open(log).unwrap();
    f.set_len(synced_len_bytes).unwrap();
}

#[test]
fn replay_restores_confirmed_acks_the_logs_lost() {
    let dir = tempfile::tempdir().unwrap();
    let runs = [sample_descriptor(11), sample_descriptor(12)];
    let (j, mut logs) = logs_with_journal(dir.path(), JournalOptions::default(), &runs);
    let created: Vec<u64> = logs.iter().map(|l| l.durable_len_bytes()).collect();
    let acks: Vec<Ack> = (0..500).map(ack).collect();
    for c in acks.chunks(50) {
        for l in &mut logs {
            let first = l.appended_acks();
            l.append_acks(first, c).unwrap();
            assert_eq!(l.commit().unwrap(), first + c.len() as u64);
        }
    }
    drop(logs);
    drop(j);
    for (d, len) in runs.iter().zip(&created) {
        let p = log_path(dir.path(), d.run_id);
        lose_unsynced_appends(&p, *len);
        // Read straight from the witness directory, the journal fills the gap...
        assert_eq!(read_log_file(&p).unwrap().acks, acks);
        // ...also for several logs at once.
        assert_eq!(
            crate::witness::store::reader::read_log_files(&[&p, &p])
                .unwrap()
                .iter()
                .map(|l| l.acks.len())
                .collect::<Vec<_>>(),
            vec![acks.len(), acks.len()]
        );
    }
    // ...and replay puts it back into the files.
    let r = replay(&FsStorage, dir.path()).unwrap();
    assert_eq!(r.runs, 2);
    assert!(r.entries >= 20, "{r:?}");
    assert!(
        !has_journal(&FsStorage, dir.path()),
        "replayed journals are deleted"
    );
    for d in &runs {
        let p = log_path(dir.path(), d.run_id);
        assert_eq!(read_log_file(&p).unwrap().acks, acks);
        let (l, rec) = AckLog::open(&FsStorage, &p).unwrap();
        assert_eq!(rec.truncated_bytes, 0);
        assert_eq!(l.durable_acks(), 500);
    }
    // Twice is harmless.
    assert_eq!(replay(&FsStorage, dir.path()).unwrap(), Replayed::default());
}

#[test]
fn many_threads_share_syncs_and_every_commit_is_durable() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<_> = (0..16).map(|i| sample_descriptor(100 + i)).collect();
    let (j, logs) = logs_with_journal(dir.path(), JournalOptions::default(), &runs);
    let lens: Vec<u64> = logs.iter().map(|l| l.durable_len_bytes()).collect();
    std::thread::scope(|s| {
        for mut l in logs {
            s.spawn(move || {
                for i in 0..200u64 {
                    l.append_acks(i, &[ack(i)]).unwrap();
                    assert_eq!(l.commit().unwrap(), i + 1);
                }
            });
        }
    });
    drop(j);
    for (d, len) in runs.iter().zip(lens) {
        let p = log_path(dir.path(), d.run_id);
        lose_unsynced_appends(&p, len);
    }
    replay(&FsStorage, dir.path()).unwrap();
    for d in &runs {
        let got = read_log_file(&log_path(dir.path(), d.run_id)).unwrap();
        assert_eq!(got.acks, (0..200).map(ack).collect::<Vec<_>>());
    }
}

#[test]
fn rotation_checkpoints_logs_and_deletes_old_journals() {
    let dir = tempfile::tempdir().unwrap();
    let runs = [sample_descriptor(21), sample_descriptor(22)];
    let opts = JournalOptions {
        rotate_bytes: 4096,
        ..JournalOptions::default()
    };
    let (j, mut logs) = logs_with_journal(dir.path(), opts, &runs);
    let acks: Vec<Ack> = (0..3000).map(ack).collect();
    for c in acks.chunks(30) {
        for l in &mut logs {
            let first = l.appended_acks();
            l.append_acks(first, c).unwrap();
            l.commit().unwrap();
        }
    }
    assert!(j.generation() > 3, "rotated: generation {}", j.generation());
    // Give the last checkpoint a moment; then only the current and next file stay.
    let only_current_and_next = || {
        let left = list_journals(&FsStorage, dir.path()).unwrap();
        left.len() <= 2 && left.iter().all(|(g, _)| *g >= j.generation())
    };
    for _ in 0..200 {
        if only_current_and_next() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        only_current_and_next(),
        "old journals deleted: {:?}",
        list_journals(&FsStorage, dir.path())
    );
    drop(logs);
    drop(j);
    for d in &runs {
        let p = log_path(dir.path(), d.run_id);
        assert_eq!(read_log_file(&p).unwrap().acks, acks);
    }
}

#[test]
fn a_deleted_log_does_not_stop_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let runs = [sample_descriptor(41), sample_descriptor(42)];
    let opts = JournalOptions {
        rotate_bytes: 4096,
        ..JournalOptions::default()
    };
    let (j, mut logs) = logs_with_journal(dir.path(), opts, &runs);
    logs[0].append_acks(0, &[ack(0)]).unwrap();
    logs[0].commit().unwrap();
    std::fs::remove_file(log_path(dir.path(), runs[0].run_id)).unwrap();
    // The first rotation hands the deleted log's run to a checkpoint; the second
    // needs the file that checkpoint prepares, so generation 3 means it got through.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut acks = Vec::new();
    while j.generation() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "checkpoint never finished"
        );
        let first = logs[1].appended_acks();
        let batch: Vec<Ack> = (first..first + 20).map(ack).collect();
        logs[1].append_acks(first, &batch).unwrap();
        logs[1].commit().expect("the other run keeps committing");
        acks.extend(batch);
    }
    drop(logs);
    drop(j);
    let p = log_path(dir.path(), runs[1].run_id);
    assert_eq!(read_log_file(&p).unwrap().acks, acks);
}

/// Damage is not a torn tail, for the journal: a bad entry with valid entries after it is
/// corruption. Replay refuses with every file as it was (the journal is not deleted,
/// no log is written), and reading a log through the journal names the damage.
#[test]
fn journal_corruption_is_not_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(32);
    let (j, mut logs) = logs_with_journal(
        dir.path(),
        JournalOptions::default(),
        std::slice::from_ref(&d),
    );
    let created = logs[0].durable_len_bytes();
    let mut ends = vec![];
    for c in 0..3u64 {
        let acks: Vec<Ack> = (c * 5..c * 5 + 5).map(ack).collect();
        logs[0].append_acks(c * 5, &acks).unwrap();
        logs[0].commit().unwrap();
    }
    let generation = j.generation();
    drop(logs);
    drop(j);
    let jp = journal_path(dir.path(), generation);
    let full = std::fs::read(&jp).unwrap();
    let mut at = 0;
    while let frame::Decoded::Frame(f) = frame::decode(&full[at..]) {
        at += f.len_bytes;
        ends.push(at);
    }
    assert_eq!(ends.len(), 4, "header and three entries");
    let lp = log_path(dir.path(), d.run_id);
    lose_unsynced_appends(&lp, created);
    let log_before = std::fs::read(&lp).unwrap();
    // Every byte of the first two entries (the third is the tail).
    for pos in ends[0]..ends[2] {
        let mut bytes = full.clone();
        bytes[pos] ^= 1 << (pos % 8);
        std::fs::write(&jp, &bytes).unwrap();
        let e = replay(&FsStorage, dir.path())
            .err()
            .map(|e| format!("{e:#}"));
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("damaged") && e.contains("byte")),
            "flip at {pos}: {e:?}"
        );
        assert!(
            std::fs::read(&jp).unwrap() == bytes,
            "flip at {pos}: journal changed"
        );
        assert!(
            std::fs::read(&lp).unwrap() == log_before,
            "flip at {pos}: log changed"
        );
        let r = read_log_file(&lp).unwrap();
        assert!(
            r.events
                .iter()
                .any(|e| e.kind == crate::witness::store::checker::DAMAGE_EVENT),
            "flip at {pos}: reading through the journal names the damage"
        );
    }
}

#[test]
fn torn_journal_tail_is_ignored_and_foreign_journal_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = sample_descriptor(31);
    let (j, mut logs) = logs_with_journal(
        dir.path(),
        JournalOptions::default(),
        std::slice::from_ref(&d),
    );
    let created = logs[0].durable_len_bytes();
    logs[0].append_acks(0, &[ack(0), ack(1)]).unwrap();
    logs[0].commit().unwrap();
    logs[0].append_acks(2, &[ack(2)]).unwrap();
    logs[0].commit().unwrap();
    let generation = j.generation();
    drop(logs);
    drop(j);
    let jp = journal_path(dir.path(), generation);
    let full = std::fs::read(&jp).unwrap();
    // Cut into the last entry: only the first commit survives.
    std::fs::write(&jp, &full[..full.len() - 3]).unwrap();
    let p = log_path(dir.path(), d.run_id);
    lose_unsynced_appends(&p, created);
    replay(&FsStorage, dir.path()).unwrap();
    assert_eq!(read_log_file(&p).unwrap().acks, vec![ack(0), ack(1)]);

    // A file with a journal's name but not a journal's content stops the start.
    let foreign = journal_path(dir.path(), 7);
    std::fs::write(&foreign, b"someone's notes").unwrap();
    let e = format!("{:#}", replay(&FsStorage, dir.path()).unwrap_err());
    assert!(e.contains("move it out of the witness directory"), "{e}");
    assert_eq!(std::fs::read(&foreign).unwrap(), b"someone's notes");
    // Other names are not ours and are left alone.
    std::fs::remove_file(&foreign).unwrap();
    std::fs::write(dir.path().join("notes.journal"), b"x").unwrap();
    assert_eq!(replay(&FsStorage, dir.path()).unwrap(), Replayed::default());
}

/// A copy of a witness directory's log with the journal overlaid (what verify streams
/// from, `reader::copy_overlaid`) reads as the log read whole with the journal does:
/// the acks only the journal held, the same events and wholeness, and the witness's own
/// log left as it was.
#[test]
fn a_copy_with_the_journal_overlaid_reads_as_the_log_read_whole() {
    use crate::witness::store::reader::{copy_overlaid, read_log_file_checked, stream_log_file};
    let dir = tempfile::tempdir().unwrap();
    let runs = [sample_descriptor(21), sample_descriptor(22)];
    let (j, mut logs) = logs_with_journal(dir.path(), JournalOptions::default(), &runs);
    let created: Vec<u64> = logs.iter().map(|l| l.durable_len_bytes()).collect();
    let acks: Vec<Ack> = (0..400).map(ack).collect();
    for c in acks.chunks(40) {
        for l in &mut logs {
            let first = l.appended_acks();
            l.append_acks(first, c).unwrap();
            l.commit().unwrap();
        }
    }
    drop(logs);
    drop(j);
    let p = log_path(dir.path(), runs[0].run_id);
    // The log lost its tail: only the journal holds those acks.
    lose_unsynced_appends(&p, created[0] + 1000);
    let before = std::fs::read(&p).unwrap();
    let (whole, wholeness) = read_log_file_checked(&p, None).unwrap();
    assert_eq!(whole.acks, acks);
    let out = tempfile::tempdir().unwrap();
    let copy = out.path().join("copy.acklog");
    let journal_damage = copy_overlaid(&p, &copy).unwrap().expect("a journaled log");
    assert!(journal_damage.is_empty());
    let mut streamed = vec![];
    let (log, copied) =
        stream_log_file(&copy, None, &mut |a| streamed.extend_from_slice(a)).unwrap();
    assert_eq!(streamed, acks);
    assert_eq!(log.events, whole.events);
    assert_eq!((copied.whole, copied.how), (wholeness.whole, wholeness.how));
    assert_eq!(
        std::fs::read(&p).unwrap(),
        before,
        "the witness's log was changed"
    );
    // A log outside a witness directory needs no copy.
    assert!(
        copy_overlaid(&copy, &out.path().join("again"))
            .unwrap()
            .is_none()
    );
}
