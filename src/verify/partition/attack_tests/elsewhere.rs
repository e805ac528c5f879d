//! A drive that misplaces writes wholesale: more records of the run away from home than
//! verify names (`scan::elsewhere::MAX_NAMED`).

use super::*;
use crate::verify::scan::elsewhere::MAX_NAMED;

/// Every record of a ring of `n` one-sector records written one sector past its home
/// (the last one wrapping to the start): each is found away from home.
fn shifted_ring(n: u64) -> (RunDescriptor, Vec<Ack>, Arc<MemDevice>) {
    let d = descriptor(RunId([0x3e; 16]), 0, n * S, 512, 512);
    let mem = Arc::new(MemDevice::new((n * S) as usize));
    let acks: Vec<Ack> = (0..n).map(|k| ack(0, k + 1, k * S, 1)).collect();
    for a in &acks {
        write(&mem, &d, a, (a.record.offset + S) % (n * S), None);
    }
    (d, acks, mem)
}

/// Once could break the budget: the list of records found away from home grew with the
/// region (an entry per misplaced sector, kept for the whole region by the parts too).
/// Past the bound none is named: the whole run and the parts both say so, name no place
/// a record was found, still call every record misdirected (its home holds another
/// record's misplaced sector) and agree to the byte; under the bound each finding names
/// where its record was found.
#[test]
fn attack_a_drive_misplacing_every_write_names_none_past_the_bound() {
    let t = Duration::from_secs(10);
    for (n, too_many) in [(4096u64, false), (MAX_NAMED as u64 + 4096, true)] {
        let (d, acks, mem) = shifted_ring(n);
        let whole = whole_run(mem.clone(), &d, &acks, t, false).unwrap().report;
        assert_eq!(whole.too_many_found_elsewhere, too_many, "{n} records");
        assert_eq!(whole.counts["misdirected"], n, "{n} records");
        assert!(!whole.findings.is_empty());
        for f in &whole.findings {
            let named = f.found_at.is_some();
            assert_eq!(named, !too_many, "{n} records: {f:?}");
        }
        let plan = Plan::with_parts(&d, 4, 512, 1);
        let parts = in_parts(mem, &d, &acks, false, plan, t).report;
        assert_eq!(without_time(&parts), without_time(&whole), "{n} records");
    }
}
