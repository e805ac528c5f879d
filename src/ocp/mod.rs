//! The OCP Test and Validation output specification, version 2.0 (opencomputeproject/
//! ocp-diag-core, json_spec/): one JSON object a line, each with a `sequenceNumber`
//! counting from 0 and a `timestamp`; first the schema version, then a test run
//! (`testRunStart` ... `testRunEnd`) whose test steps carry measurements, diagnoses,
//! logs and errors. This module writes those lines and knows nothing of plugpull's
//! reports: `commands::render::ocp` says what a verify or a campaign puts in them, and
//! [`dut`] makes the device under test from a drive's identity (docs/ocp.md).

pub mod dut;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

/// The version of the specification the lines follow (`schemaVersion`).
pub const SCHEMA_MAJOR: u32 = 2;
pub const SCHEMA_MINOR: u32 = 0;

/// How a test run or a test step ended (`TestStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Complete,
    Error,
    Skip,
}

/// The outcome of a test run (`TestResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TestResult {
    Pass,
    Fail,
    NotApplicable,
}

/// `DiagnosisType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiagnosisType {
    Pass,
    Fail,
    Unknown,
}

/// `Severity` of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// `ValidatorType`: the ones plugpull uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ValidatorType {
    Equal,
    GreaterThan,
}

/// A rule a measurement's value must meet for the run to pass.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Validator {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ValidatorType,
    pub value: Value,
}

/// One measured value of a step.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    pub name: String,
    pub value: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub validators: Vec<Validator>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_info_id: Option<String>,
}

impl Measurement {
    /// `value` in `unit`, with no validator.
    pub fn new(name: &str, value: impl Into<Value>, unit: &str) -> Measurement {
        Measurement {
            name: name.into(),
            value: value.into(),
            unit: Some(unit.into()).filter(|u: &String| !u.is_empty()),
            validators: vec![],
            hardware_info_id: None,
        }
    }

    /// With a validator of `kind` against `value`.
    pub fn must(mut self, kind: ValidatorType, value: impl Into<Value>, name: &str) -> Self {
        self.validators.push(Validator {
            name: name.into(),
            kind,
            value: value.into(),
        });
        self
    }

    /// Of the hardware `id` of the run's `dutInfo`.
    pub fn of(mut self, id: Option<&str>) -> Self {
        self.hardware_info_id = id.map(str::to_string);
        self
    }
}

/// A step's conclusion about the device under test.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    pub verdict: String,
    #[serde(rename = "type")]
    pub kind: DiagnosisType,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hardware_info_id: Option<String>,
}

/// What `testRunStart` says of the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStart {
    pub name: String,
    pub version: String,
    pub command_line: String,
    pub parameters: serde_json::Map<String, Value>,
    pub dut_info: Value,
}

/// A test step's id (`testStepId`): "0", "1", ... in the order the steps start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepId(String);

/// The lines of one test run, in order; [`Output::finish`] hands them over.
pub struct Output {
    seq: u64,
    steps: u64,
    at: Option<DateTime<Utc>>,
    text: String,
}

impl Default for Output {
    fn default() -> Self {
        Output::new()
    }
}

impl Output {
    /// The output so far: the `schemaVersion` line, made now.
    pub fn new() -> Output {
        Output::starting_at(None)
    }

    /// The `schemaVersion` line at `t` (`None`: now), and later lines at [`Output::at`].
    pub fn starting_at(t: Option<DateTime<Utc>>) -> Output {
        let mut o = Output {
            seq: 0,
            steps: 0,
            at: t,
            text: String::new(),
        };
        o.emit(
            "schemaVersion",
            json!({"major": SCHEMA_MAJOR, "minor": SCHEMA_MINOR}),
        );
        o
    }

    /// The time the next lines carry: `t`, or (`None`, the default) when each is made.
    pub fn at(&mut self, t: Option<DateTime<Utc>>) {
        self.at = t;
    }

    fn emit(&mut self, key: &str, body: Value) {
        let t = self.at.unwrap_or_else(Utc::now);
        let mut line = serde_json::Map::new();
        line.insert(key.into(), body);
        line.insert("sequenceNumber".into(), self.seq.into());
        line.insert(
            "timestamp".into(),
            t.to_rfc3339_opts(SecondsFormat::Micros, true).into(),
        );
        self.seq += 1;
        self.text.push_str(&Value::Object(line).to_string());
        self.text.push('\n');
    }

    fn run_artifact(&mut self, key: &str, body: Value) {
        self.emit("testRunArtifact", json!({ key: body }));
    }

    fn step_artifact(&mut self, step: &StepId, key: &str, body: Value) {
        self.emit("testStepArtifact", json!({"testStepId": step.0, key: body}));
    }

    pub fn run_start(&mut self, start: &RunStart) {
        self.run_artifact("testRunStart", to_value(start));
    }

    pub fn run_end(&mut self, status: Status, result: TestResult) {
        self.run_artifact("testRunEnd", json!({"status": status, "result": result}));
    }

    /// An error of the run outside any step: `symptom` a short name, `message` the text.
    pub fn run_error(&mut self, symptom: &str, message: &str) {
        self.run_artifact("error", json!({"symptom": symptom, "message": message}));
    }

    /// Starts a step named `name`.
    pub fn step_start(&mut self, name: &str) -> StepId {
        let id = StepId(self.steps.to_string());
        self.steps += 1;
        self.step_artifact(&id, "testStepStart", json!({ "name": name }));
        id
    }

    pub fn step_end(&mut self, step: &StepId, status: Status) {
        self.step_artifact(step, "testStepEnd", json!({ "status": status }));
    }

    pub fn measurement(&mut self, step: &StepId, m: Measurement) {
        self.step_artifact(step, "measurement", to_value(&m));
    }

    pub fn diagnosis(&mut self, step: &StepId, d: Diagnosis) {
        self.step_artifact(step, "diagnosis", to_value(&d));
    }

    pub fn log(&mut self, step: &StepId, severity: Severity, message: &str) {
        self.step_artifact(
            step,
            "log",
            json!({"severity": severity, "message": message}),
        );
    }

    pub fn step_error(&mut self, step: &StepId, symptom: &str, message: &str) {
        self.step_artifact(
            step,
            "error",
            json!({"symptom": symptom, "message": message}),
        );
    }

    /// The lines, each ending in a newline.
    pub fn finish(self) -> String {
        self.text
    }
}

/// `v` as JSON: the types here have no map with non-string keys, nothing that fails.
fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("plain structs serialise")
}

/// The command line as one string, each argument that needs it in single quotes.
pub fn command_line(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
            if plain {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_numbered_from_0_and_steps_from_0() {
        let mut o = Output::new();
        let t = DateTime::parse_from_rfc3339("2026-01-02T03:04:05.5Z")
            .unwrap()
            .with_timezone(&Utc);
        o.at(Some(t));
        let s = o.step_start("read back");
        o.measurement(
            &s,
            Measurement::new("lost", 0, "records").must(ValidatorType::Equal, 0, "none lost"),
        );
        o.step_end(&s, Status::Complete);
        o.run_end(Status::Complete, TestResult::Pass);
        let lines: Vec<Value> = o
            .finish()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["schemaVersion"], json!({"major": 2, "minor": 0}));
        assert_eq!(lines[0]["sequenceNumber"], 0);
        assert_eq!(lines[4]["sequenceNumber"], 4);
        assert_eq!(lines[1]["timestamp"], "2026-01-02T03:04:05.500000Z");
        assert_eq!(
            lines[2]["testStepArtifact"],
            json!({"testStepId": "0", "measurement": {"name": "lost", "value": 0,
                "unit": "records", "validators": [{"name": "none lost", "type": "EQUAL",
                "value": 0}]}})
        );
        assert_eq!(
            lines[4]["testRunArtifact"]["testRunEnd"],
            json!({"status": "COMPLETE", "result": "PASS"})
        );
    }

    #[test]
    fn the_command_line_quotes_what_a_shell_would_split() {
        let args = [
            "plugpull",
            "verify",
            "/dev/sdb",
            "--acks",
            "my run's.acklog",
            "",
        ];
        assert_eq!(
            command_line(args.map(String::from)),
            r"plugpull verify /dev/sdb --acks 'my run'\''s.acklog' ''"
        );
    }
}
