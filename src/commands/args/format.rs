//! `--format text|json|ocp` of `verify` and `campaign`, with `--json` kept as the
//! synonym of `--format json` it always was; kept apart so `args.rs` stays within its
//! size. `ocp` is the OCP Test and Validation output (docs/ocp.md).

use clap::{Args, ValueEnum};

/// What `verify` and `campaign` print on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people (`--quiet`: the verdict line only).
    Text,
    /// Versioned JSON (docs/report.md, docs/campaign.md); the same as `--json`.
    Json,
    /// OCP Test and Validation output, one JSON object a line (docs/ocp.md).
    Ocp,
}

#[derive(Args, Debug, Clone, Default)]
pub struct FormatArgs {
    /// Print the result as JSON on stdout: the same as --format json.
    #[arg(long)]
    pub json: bool,
    /// What stdout shows: text, json (docs/report.md, docs/campaign.md) or ocp (the OCP
    /// Test and Validation output, JSON lines: docs/ocp.md) [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<OutputFormat>,
}

impl FormatArgs {
    /// The format asked for; an error when `--json` and `--format` contradict each other.
    pub fn resolve(&self) -> Result<OutputFormat, String> {
        match (self.json, self.format) {
            (true, Some(f)) if f != OutputFormat::Json => Err(format!(
                "--json contradicts --format {}: give one of them",
                f.to_possible_value().expect("no hidden values").get_name()
            )),
            (true, _) => Ok(OutputFormat::Json),
            (false, f) => Ok(f.unwrap_or(OutputFormat::Text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(json: bool, format: Option<OutputFormat>) -> Result<OutputFormat, String> {
        FormatArgs { json, format }.resolve()
    }

    #[test]
    fn json_is_format_json_and_a_contradiction_is_refused() {
        use OutputFormat::*;
        assert_eq!(resolve(false, None), Ok(Text));
        assert_eq!(resolve(true, None), Ok(Json));
        assert_eq!(resolve(true, Some(Json)), Ok(Json));
        assert_eq!(resolve(false, Some(Ocp)), Ok(Ocp));
        assert_eq!(
            resolve(true, Some(Ocp)),
            Err("--json contradicts --format ocp: give one of them".into())
        );
        assert!(resolve(true, Some(Text)).is_err());
    }
}
