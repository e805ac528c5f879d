//! What a verification concludes, as types: the verdict, the class of each acknowledged
//! record, and the summary of one verify report that campaigns, the agent and the HTML
//! report pass around.
//!
//! Why here, at the bottom: verify decides these, but the campaign results file, the
//! agent's boot report and `plugpull report` read them back from JSON. With one typed
//! vocabulary nobody compares strings such as "PASS" or "lost", and a report summary is
//! declared once instead of once per reader. Every type serialises exactly as the strings
//! the formats document (docs/report.md, docs/campaign.md).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// The outcome of verifying one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// Every acknowledged record survived (or was legitimately overwritten).
    #[serde(rename = "PASS")]
    Pass,
    /// At least one acknowledged record did not survive.
    #[serde(rename = "FAIL")]
    Fail,
    /// No verdict possible (no acks, or an ack log that cannot be trusted).
    #[serde(rename = "INCONCLUSIVE")]
    Inconclusive,
    /// No verification happened: the campaign cycle itself went wrong (a switch error,
    /// a writer that never started). Verify never gives it. Also what a summary says
    /// before anything was verified.
    #[serde(rename = "ERROR")]
    #[default]
    Error,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Inconclusive,
        Verdict::Error,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::Error => "ERROR",
        }
    }

    /// The process exit status that reports this verdict (README, exit codes).
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Pass => crate::exit::PASS,
            Verdict::Fail => crate::exit::FAIL,
            Verdict::Inconclusive => crate::exit::INCONCLUSIVE,
            Verdict::Error => crate::exit::ERROR,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A verdict or record class name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {name:?}")]
pub struct UnknownName {
    pub what: &'static str,
    pub name: String,
}

impl FromStr for Verdict {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Verdict, UnknownName> {
        Verdict::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| UnknownName {
                what: "verdict",
                name: s.into(),
            })
    }
}

/// The verdict class of one acknowledged record (docs/format.md has the decision table;
/// `verify::classify` applies it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordClass {
    Intact,
    Superseded,
    Lost,
    Stale,
    Shorn,
    Corrupt,
    Misdirected,
    Unreadable,
}

impl RecordClass {
    pub const ALL: [RecordClass; 8] = [
        RecordClass::Intact,
        RecordClass::Superseded,
        RecordClass::Lost,
        RecordClass::Stale,
        RecordClass::Shorn,
        RecordClass::Corrupt,
        RecordClass::Misdirected,
        RecordClass::Unreadable,
    ];
    pub fn name(self) -> &'static str {
        match self {
            RecordClass::Intact => "intact",
            RecordClass::Superseded => "superseded",
            RecordClass::Lost => "lost",
            RecordClass::Stale => "stale",
            RecordClass::Shorn => "shorn",
            RecordClass::Corrupt => "corrupt",
            RecordClass::Misdirected => "misdirected",
            RecordClass::Unreadable => "unreadable",
        }
    }
    /// Whether this class means the drive broke its promise.
    pub fn is_failure(self) -> bool {
        !matches!(self, RecordClass::Intact | RecordClass::Superseded)
    }
}

impl fmt::Display for RecordClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RecordClass {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<RecordClass, UnknownName> {
        RecordClass::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownName {
                what: "record class",
                name: s.into(),
            })
    }
}

/// Records per class. On the wire a JSON object keyed by class name in alphabetical
/// order, as the string-keyed maps before it were; only the classes present are listed
/// (verify always lists all eight, a campaign's ERROR cycle none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts(BTreeMap<RecordClass, u64>);

impl ClassCounts {
    /// Every class, at zero.
    pub fn zero() -> ClassCounts {
        ClassCounts(RecordClass::ALL.into_iter().map(|c| (c, 0)).collect())
    }
    /// The count of `class` (0 when absent).
    pub fn get(&self, class: RecordClass) -> u64 {
        self.0.get(&class).copied().unwrap_or(0)
    }
    pub fn add(&mut self, class: RecordClass, n: u64) {
        *self.0.entry(class).or_default() += n;
    }
    /// The classes present and their counts, in `RecordClass` order.
    pub fn iter(&self) -> impl Iterator<Item = (RecordClass, u64)> + '_ {
        self.0.iter().map(|(c, n)| (*c, *n))
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// All records counted.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }
    /// Records in failing classes.
    pub fn failing(&self) -> u64 {
        self.iter()
            .filter(|(c, _)| c.is_failure())
            .map(|(_, n)| n)
            .sum()
    }
    fn by_name(&self) -> BTreeMap<&'static str, u64> {
        self.iter().map(|(c, n)| (c.name(), n)).collect()
    }
}

impl<'a> From<&'a BTreeMap<&'static str, u64>> for ClassCounts {
    /// From verify's name-keyed counts; names that are not classes are left out.
    fn from(m: &'a BTreeMap<&'static str, u64>) -> ClassCounts {
        ClassCounts(
            m.iter()
                .filter_map(|(k, v)| k.parse::<RecordClass>().ok().map(|c| (c, *v)))
                .collect(),
        )
    }
}

impl Serialize for ClassCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.by_name().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ClassCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ClassCounts, D::Error> {
        let m = BTreeMap::<String, u64>::deserialize(d)?;
        m.into_iter()
            .map(|(k, v)| {
                Ok((
                    k.parse::<RecordClass>().map_err(serde::de::Error::custom)?,
                    v,
                ))
            })
            .collect::<Result<_, D::Error>>()
            .map(ClassCounts)
    }
}

/// How much was lost (docs/report.md, `loss_window`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossWindow {
    pub records: u64,
    pub bytes: u64,
    /// From the earliest failing record's ack to the last ack of the run.
    pub ms: f64,
}

/// The part of a verify report that a campaign keeps per cycle, the agent reports at
/// boot and the HTML report totals: the verdict, why, and what was lost.
///
/// Deserialised from a verify report (`plugpull-verify/1`, extra keys ignored) as well as
/// from a campaign results line or an agent message, which embed it flat. The one
/// difference between them: verify writes `ordering_holes` as an object with a `count`,
/// the others as the bare count; both read back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReportSummary {
    pub verdict: Verdict,
    /// One sentence saying why.
    pub summary: String,
    pub counts: ClassCounts,
    pub loss_window: Option<LossWindow>,
    /// Failing records flushed before a surviving record was even submitted.
    #[serde(deserialize_with = "count_or_object")]
    pub ordering_holes: u64,
    /// Set when the target could not be opened or read at all.
    pub dead_device: Option<String>,
}

/// `ordering_holes` as a bare count or as verify's `{"count": n, ...}`.
fn count_or_object<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum CountOrObject {
        Count(u64),
        Object {
            #[serde(default)]
            count: u64,
        },
    }
    Ok(match CountOrObject::deserialize(d)? {
        CountOrObject::Count(n) | CountOrObject::Object { count: n } => n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_the_documented_strings() {
        for v in Verdict::ALL {
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{v}\""));
            assert_eq!(v.name().parse::<Verdict>(), Ok(v));
        }
        for c in RecordClass::ALL {
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{c}\""));
            assert_eq!(c.name().parse::<RecordClass>(), Ok(c));
        }
        assert!("lost ".parse::<RecordClass>().is_err());
    }

    #[test]
    fn counts_serialise_in_name_order_like_the_string_maps() {
        let mut c = ClassCounts::zero();
        c.add(RecordClass::Lost, 3);
        let names: BTreeMap<&str, u64> = RecordClass::ALL
            .iter()
            .map(|c| (c.name(), if *c == RecordClass::Lost { 3 } else { 0 }))
            .collect();
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            serde_json::to_string(&names).unwrap()
        );
        let back: ClassCounts = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<ClassCounts>(r#"{"gone":1}"#).is_err());
    }

    #[test]
    fn a_summary_reads_verify_json_and_campaign_lines() {
        let verify = r#"{"format":"plugpull-verify/1","verdict":"FAIL","summary":"s",
            "counts":{"lost":2,"intact":1},"acked_records":3,
            "loss_window":{"records":2,"bytes":8192,"ms":1.5},
            "ordering_holes":{"count":1,"newest_survivor_submitted_ns":null},
            "dead_device":null}"#;
        let s: ReportSummary = serde_json::from_str(verify).unwrap();
        assert_eq!(s.verdict, Verdict::Fail);
        assert_eq!(s.counts.get(RecordClass::Lost), 2);
        assert_eq!(s.ordering_holes, 1);
        assert_eq!(s.loss_window.as_ref().map(|w| w.bytes), Some(8192));
        let line = serde_json::to_string(&s).unwrap();
        assert!(line.contains(r#""ordering_holes":1"#), "{line}");
        let again: ReportSummary = serde_json::from_str(&line).unwrap();
        assert_eq!(again, s);
        let error: ReportSummary =
            serde_json::from_str(r#"{"verdict":"ERROR","counts":{}}"#).unwrap();
        assert_eq!(error.verdict, Verdict::Error);
    }
}
