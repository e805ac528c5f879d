//! Reading verify reports back for rendering.
//!
//! Why a separate, lenient model instead of deserialising `verify::report::Report`: the
//! report renders files made by other plugpull versions and by other tools' wrappers
//! (campaign JSON lines), so keys are optional here and unknown keys are ignored. The
//! verdict and counts are the shared `model::ReportSummary`; verdicts and record classes
//! are typed, so a report naming one this build does not know is refused as malformed.
//! Anything that is not a verify report is skipped with a note rather than failing the page.

use crate::model::{ClassCounts, RecordClass, ReportSummary};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One failing record as the page lists it (verify writes `verify::report::Finding`; its
/// sector kinds are names, read back as they are).
#[derive(Clone, Debug, Deserialize)]
pub struct Finding {
    pub class: RecordClass,
    #[serde(default)]
    pub stream: u16,
    #[serde(default)]
    pub seq: u64,
    #[serde(default)]
    pub offset: u64,
    #[serde(default)]
    pub len_bytes: u64,
    #[serde(default)]
    pub acked_ms_before_last_ack: f64,
    #[serde(default)]
    pub sectors: BTreeMap<String, u64>,
    #[serde(default)]
    pub corrupt_bits: Option<u64>,
    #[serde(default)]
    pub found_at: Option<u64>,
    #[serde(default)]
    pub ordering_hole: bool,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct TimelineBucket {
    pub from_ms: f64,
    pub to_ms: f64,
    pub counts: ClassCounts,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct LatencyBucket {
    pub from_us: f64,
    pub to_us: f64,
    pub count: u64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Latency {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub buckets: Vec<LatencyBucket>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Run {
    pub run_id: String,
    pub started_at: String,
    pub host: String,
    pub command: Vec<String>,
    pub settings: BTreeMap<String, Value>,
    pub device: BTreeMap<String, Value>,
}

/// One `plugpull-verify/1` report, as much of it as the page shows.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct VerifyReport {
    pub format: String,
    /// Verdict, why, counts, loss window, ordering holes, dead device.
    #[serde(flatten)]
    pub summary: ReportSummary,
    /// The verdict in plain words (empty in reports made before it existed).
    pub plain: String,
    pub acked_records: u64,
    pub acked_bytes: u64,
    pub corrupt_bits: u64,
    pub unreadable_ranges: Vec<(u64, u64, String)>,
    pub findings: Vec<Finding>,
    pub findings_truncated: bool,
    pub target: String,
    pub device: Option<BTreeMap<String, Value>>,
    pub run: Option<Run>,
    pub verify_ms: f64,
    pub ack_timeline: Vec<TimelineBucket>,
    pub flush_latency: Option<Latency>,
    pub plugpull_version: String,
    /// A campaign cycle's proof of the cut (docs/campaign.md): the rail's fall, whether
    /// it proves the cut, the ramp's fall time.
    pub fall: Option<crate::power::fall::Fall>,
    pub cut_proven: Option<bool>,
    pub fall_time_ms: Option<f64>,
}

/// Why the input could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("reading stdin")]
    Stdin(#[source] std::io::Error),
    #[error("reading {}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    NotFile(crate::userfile::UserFileError),
    /// `where_` is "NAME:LINE".
    #[error("{where_}: not JSON")]
    NotJson {
        where_: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{label}: malformed verify report")]
    Malformed {
        label: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("no plugpull verify reports in the input (make them with `plugpull verify --json`)")]
    NoReports,
    #[error(
        "{label}: a fleet matrix ({format}) is rendered on its own page: give it as the only input"
    )]
    FleetWithOthers { label: String, format: String },
    #[error(
        "{label}: a fleet matrix of format {format}, which this plugpull does not read (it reads {}): render it with the plugpull that made it",
        crate::fleet::FLEET_FORMAT
    )]
    FleetFormat { label: String, format: String },
    #[error("{label}: damaged fleet matrix: {why}")]
    FleetInconsistent { label: String, why: String },
    #[error("{label}: malformed fleet matrix")]
    FleetMalformed {
        label: String,
        #[source]
        source: serde_json::Error,
    },
}

/// What the inputs hold: verify reports (a run, or a campaign's cycles), or one fleet
/// matrix.
pub enum Inputs {
    Cycles(Vec<Cycle>),
    Fleet(Box<crate::fleet::Matrix>),
}

/// A report and where it came from ("file.json", "campaign.jsonl:3", or a cycle number).
#[derive(Clone, Debug)]
pub struct Cycle {
    pub label: String,
    pub report: VerifyReport,
}

/// A verify report, or a campaign's cycle line (its verify summary is flat in the line).
fn is_verify(v: &Value) -> bool {
    v.get("format").and_then(Value::as_str).is_some_and(|f| {
        f.starts_with("plugpull-verify/") || f.starts_with("plugpull-campaign-cycle/")
    })
}

/// The verify report in `v`: `v` itself, or one nested one level down (a campaign line
/// such as `{"cycle": 3, "verify": {...}}`), with the wrapper's cycle number if any.
fn find_verify(v: &Value) -> Option<(&Value, Option<String>)> {
    if is_verify(v) {
        // A campaign's cycle line names its cycle.
        let cycle = v
            .get("format")
            .and_then(Value::as_str)
            .filter(|f| f.starts_with("plugpull-campaign-cycle/"))
            .and_then(|_| v.get("cycle")?.as_u64())
            .map(|n| n.to_string());
        return Some((v, cycle));
    }
    let obj = v.as_object()?;
    let cycle = obj
        .get("cycle")
        .and_then(|c| c.as_u64().map(|n| n.to_string()));
    obj.values().find(|x| is_verify(x)).map(|x| (x, cycle))
}

/// Every verify report in `text`: one JSON document, or JSON lines. `notes` collects what
/// was skipped and why.
pub fn parse(name: &str, text: &str, notes: &mut Vec<String>) -> Result<Vec<Cycle>, InputError> {
    let docs: Vec<(String, Value)> = match serde_json::from_str::<Value>(text) {
        Ok(v) => vec![(name.to_string(), v)],
        Err(_) => {
            let mut d = vec![];
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let v =
                    serde_json::from_str::<Value>(line).map_err(|source| InputError::NotJson {
                        where_: format!("{name}:{}", i + 1),
                        source,
                    })?;
                d.push((format!("{name}:{}", i + 1), v));
            }
            d
        }
    };
    let mut out = vec![];
    for (label, v) in docs {
        // A campaign results file's own first line: its configuration, not a run.
        let format = v.get("format").and_then(Value::as_str).unwrap_or("");
        if format.starts_with("plugpull-campaign/") {
            continue;
        }
        match find_verify(&v) {
            Some((r, cycle)) => {
                let report: VerifyReport =
                    serde_json::from_value(r.clone()).map_err(|source| InputError::Malformed {
                        label: label.clone(),
                        source,
                    })?;
                let label = match cycle {
                    Some(c) => format!("cycle {c}"),
                    None => label,
                };
                out.push(Cycle { label, report });
            }
            None => notes.push(format!("{label}: not a plugpull verify report, skipped")),
        }
    }
    Ok(out)
}

/// Reads every input file ("-" is stdin) in order: its name and its text.
fn read_all(paths: &[std::path::PathBuf]) -> Result<Vec<(String, String)>, InputError> {
    let mut all = vec![];
    for p in paths {
        let text = if p == Path::new("-") {
            std::io::read_to_string(std::io::stdin()).map_err(InputError::Stdin)?
        } else {
            // A device or pipe named by mistake is refused, not read without end.
            let f = crate::userfile::open_regular(p).map_err(InputError::NotFile)?;
            std::io::read_to_string(f).map_err(|source| InputError::Read {
                path: p.clone(),
                source,
            })?
        };
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "stdin".into());
        all.push((name, text));
    }
    Ok(all)
}

/// The format of `text` when it is one fleet matrix document (`plugpull-fleet/...`).
fn fleet_format(text: &str) -> Option<(Value, String)> {
    let v: Value = serde_json::from_str(text).ok()?;
    let f = v.get("format")?.as_str()?.to_string();
    f.starts_with("plugpull-fleet/").then_some((v, f))
}

/// One fleet matrix, when the only input is one; an error when a matrix comes with other
/// inputs or in a format this build does not read.
fn fleet(texts: &[(String, String)]) -> Result<Option<crate::fleet::Matrix>, InputError> {
    for (name, text) in texts {
        let Some((v, format)) = fleet_format(text) else {
            continue;
        };
        let label = name.clone();
        if texts.len() > 1 {
            return Err(InputError::FleetWithOthers { label, format });
        }
        if format != crate::fleet::FLEET_FORMAT {
            return Err(InputError::FleetFormat { label, format });
        }
        let m: crate::fleet::Matrix =
            serde_json::from_value(v).map_err(|source| InputError::FleetMalformed {
                label: label.clone(),
                source,
            })?;
        return m
            .checked()
            .map(Some)
            .map_err(|why| InputError::FleetInconsistent { label, why });
    }
    Ok(None)
}

/// Reads every input file ("-" is stdin) in order: one fleet matrix, or verify reports.
pub fn load(paths: &[std::path::PathBuf], notes: &mut Vec<String>) -> Result<Inputs, InputError> {
    let texts = read_all(paths)?;
    if let Some(m) = fleet(&texts)? {
        return Ok(Inputs::Fleet(Box::new(m)));
    }
    let mut all = vec![];
    for (name, text) in &texts {
        all.extend(parse(name, text, notes)?);
    }
    if all.is_empty() {
        return Err(InputError::NoReports);
    }
    Ok(Inputs::Cycles(all))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_single_documents_json_lines_and_wrapped_cycles() {
        let mut notes = vec![];
        let one = r#"{"format":"plugpull-verify/1","verdict":"PASS","counts":{"intact":3}}"#;
        let c = parse("a.json", one, &mut notes).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].report
                .summary
                .counts
                .get(crate::model::RecordClass::Intact),
            3
        );
        let lines = format!(
            "{one}\n{{\"cycle\":7,\"verify\":{one}}}\n{{\"format\":\"plugpull-campaign/1\"}}\n"
        );
        let c = parse("c.jsonl", &lines, &mut notes).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].label, "c.jsonl:1");
        assert_eq!(c[1].label, "cycle 7");
        // The campaign header is the results file's own line, skipped without a note.
        assert_eq!(notes, Vec::<String>::new());
        parse("x.jsonl", r#"{"format":"something-else/1"}"#, &mut notes).unwrap();
        assert_eq!(notes, ["x.jsonl: not a plugpull verify report, skipped"]);
        assert!(parse("bad", "{\n", &mut notes).is_err());
    }
}
