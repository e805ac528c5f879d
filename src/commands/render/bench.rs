//! `plugpull bench`'s report on stdout: the tables for people (`bench::output`,
//! `bench::tree::text`) or JSON. Quiet only silences bench's progress on stderr.

use super::Format;
use crate::bench::BenchReport;
use crate::bench::tree::TreeBenchReport;

/// The device tables.
pub fn tables(format: Format, r: &BenchReport) -> Result<String, serde_json::Error> {
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(r)?),
        Format::Text | Format::Quiet => crate::bench::output::text(r),
    })
}

/// The tree bench.
pub fn tree(format: Format, r: &TreeBenchReport) -> Result<String, serde_json::Error> {
    Ok(match format {
        Format::Json => format!("{}\n", serde_json::to_string_pretty(r)?),
        Format::Text | Format::Quiet => crate::bench::tree::text(r),
    })
}
