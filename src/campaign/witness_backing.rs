//! A campaign never records a verdict its own witness cannot back with acks.
//!
//! Why: in whole-host mode the verdict comes from the agent on the host under test, over
//! the network. The controller's witness holds the run's ack log, so the controller can
//! check the agent's word against it: a PASS or FAIL for a run the witness holds no acks
//! for, fewer acks than the agent says it verified, a PASS that left some of the
//! witness's acks unverified, or a run another host started, is not recorded as the
//! agent says. It becomes ERROR with the reason, and the agent's claim is kept in
//! `agent_verdict`. The recorded `acked_records`, `witness_durable` and `last_acked` are
//! always the witness's.

use super::results::{CycleResult, LastAcked};
use crate::model::{RunLog, Verdict};

/// Checks the agent's report now in `r` (verdict, `claimed_acks`) against the witness's
/// log of the run (`Err`: why there is none) and the host that reported it.
pub fn back(r: &mut CycleResult, claimed_acks: u64, host: &str, log: Result<&RunLog, String>) {
    let claimed = r.report.verdict;
    let problem = match log {
        Err(why) => {
            r.acked_records = 0;
            r.witness_durable = 0;
            r.last_acked = None;
            matches!(claimed, Verdict::Pass | Verdict::Fail).then(|| {
                format!(
                    "the controller's witness holds no acks for run {}: {why}",
                    r.run_id
                )
            })
        }
        Ok(log) => {
            let held = log.acks.len() as u64;
            r.acked_records = held;
            r.witness_durable = held;
            r.last_acked = LastAcked::newest(&log.acks);
            if log.descriptor.host != host {
                Some(format!(
                    "run {} was started by host {:?} (the witness's log), not by the reporting host {host:?}",
                    r.run_id, log.descriptor.host
                ))
            } else if !matches!(claimed, Verdict::Pass | Verdict::Fail) {
                None
            } else if held == 0 {
                Some(format!(
                    "the controller's witness holds no acks for run {}",
                    r.run_id
                ))
            } else if claimed_acks > held {
                Some(format!(
                    "the agent verified {claimed_acks} acked records, the controller's witness holds only {held} for run {}",
                    r.run_id
                ))
            } else if claimed == Verdict::Pass && claimed_acks < held {
                Some(format!(
                    "the agent verified {claimed_acks} acked records, but the controller's witness holds {held} for run {}: the rest went unchecked",
                    r.run_id
                ))
            } else {
                None
            }
        }
    };
    let Some(why) = problem else {
        return;
    };
    r.agent_verdict = Some(claimed);
    r.report.verdict = Verdict::Error;
    r.report.summary = format!("not recorded as the agent said ({claimed}): {why}");
    r.error = Some(why);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_pass_without_witness_acks_is_an_error() {
        let mut r = CycleResult::empty(1, 1);
        r.run_id = "00112233445566778899aabbccddeeff".into();
        r.report.verdict = Verdict::Pass;
        r.acked_records = 5000;
        back(&mut r, 5000, "h", Err("no such run".into()));
        assert_eq!(r.report.verdict, Verdict::Error);
        assert_eq!(r.agent_verdict, Some(Verdict::Pass));
        assert_eq!(r.acked_records, 0, "the witness's count, not the agent's");
        assert!(
            r.report.summary.contains("holds no acks"),
            "{}",
            r.report.summary
        );
        // No claim of PASS or FAIL: nothing to back.
        let mut r = CycleResult::empty(1, 1);
        r.report.verdict = Verdict::Inconclusive;
        back(&mut r, 0, "h", Err("no such run".into()));
        assert_eq!(r.report.verdict, Verdict::Inconclusive);
    }
}
