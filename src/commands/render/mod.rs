//! How the commands show what the domain modules return: one renderer per format, the
//! format chosen once from the command's options. Why here: a domain module that prints
//! cannot be reused (a campaign, a test, another command wants the report, not its
//! text), and the formats of one report stay side by side where they can be compared.
//! The HTML page of verify reports is `plugpull report` (`crate::report::html`).

pub mod bench;
pub mod fetch;
pub mod ocp;
pub mod ocp_campaign;
pub mod report;
pub mod verify;

/// Which form a command's result takes on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// For people.
    Text,
    /// Versioned JSON (docs/report.md).
    Json,
    /// One line: the verdict.
    Quiet,
}

impl Format {
    /// `--json` wins over `--quiet`, as it always did.
    pub fn from_flags(json: bool, quiet: bool) -> Format {
        match (json, quiet) {
            (true, _) => Format::Json,
            (false, true) => Format::Quiet,
            (false, false) => Format::Text,
        }
    }
}

/// Writes `text` to stdout as it is (renderers end their lines themselves).
pub fn out(text: &str) {
    print!("{text}");
}

#[cfg(test)]
mod tests {
    use super::Format;

    #[test]
    fn json_wins_over_quiet() {
        assert_eq!(Format::from_flags(true, true), Format::Json);
        assert_eq!(Format::from_flags(false, true), Format::Quiet);
        assert_eq!(Format::from_flags(false, false), Format::Text);
    }
}
